"""Which kernels, by name, took a profile's GPU time: the candidate's own or someone else's.

A second opinion on the harness's torch.profiler work-share check (`dynamic_checks`), from
Nsight Compute's own kernel records: the candidate's kernel names come from static analysis of
its source (`__global__` functions, `@triton.jit` functions), matched on the kernel's function
name, never by substring (an own kernel called `kernel` must not claim ATen's
`vectorized_elementwise_kernel`) and never in PyTorch's namespaces.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from kernelwright.problems.candidate.kernel_names import base_name, in_torch_namespace
from kernelwright.profiler.report import NcuKernel, NcuReport


class KernelOwnership(BaseModel):
    own_names: list[str]
    own_kernels: list[str]  # profiled kernels whose function name is one of own_names
    other_kernels: list[str]
    own_us: float
    total_us: float

    @property
    def own_pct(self) -> float | None:
        return 100.0 * self.own_us / self.total_us if self.total_us > 0 else None

    def to_text(self) -> str:
        pct = self.own_pct
        share = f"{pct:.0f}% of {self.total_us:.1f} us profiled" if pct is not None else "no profiled GPU time"
        others = ", ".join(self.other_kernels[:3]) or "none"
        return (
            f"own kernels ({', '.join(self.own_names) or 'none found in the source'}): {share}; other kernels: {others}"
        )


def _is_own(kernel: NcuKernel, own_names: Sequence[str]) -> bool:
    return not in_torch_namespace(kernel.name) and base_name(kernel.name) in {n for n in own_names if n}


def kernel_ownership(report: NcuReport, own_names: Sequence[str]) -> KernelOwnership:
    """Split the report's GPU time between the candidate's kernels and all others."""
    own_us = total_us = 0.0
    own: list[str] = []
    others: list[str] = []
    for kernel in report.kernels:
        duration_ns = kernel.duration_ns or 0.0
        total_us += duration_ns / 1e3
        if _is_own(kernel, own_names):
            own_us += duration_ns / 1e3
            own.append(kernel.name)
        else:
            others.append(kernel.name)
    return KernelOwnership(
        own_names=list(own_names),
        own_kernels=sorted(set(own)),
        other_kernels=sorted(set(others)),
        own_us=own_us,
        total_us=total_us,
    )
