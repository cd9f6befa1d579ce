"""A GPU spec's peak rates for roofline placement, and the ridge points they imply.

Pure arithmetic over a `GpuSpec`, so that live detection (which attaches ridge points to what it
detects) and the query layer (which answers `ridge.*` questions) share it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelwright.hardware_specs.schema import GpuSpec


@dataclass(frozen=True)
class Peaks:
    """Peak rates for roofline placement: DRAM bytes/s and FLOP/s (OP/s for int8) per precision."""

    gpu: str
    dram_bytes_per_s: float | None
    cuda_core_flops: dict[str, float] = field(default_factory=dict)
    tensor_core_flops: dict[str, float] = field(default_factory=dict)

    def ridge_points(self) -> dict[str, float]:
        """FLOP per DRAM byte at which a kernel turns compute-bound, keyed `cuda_fp32`, `tensor_bf16`..."""
        if not self.dram_bytes_per_s:
            return {}
        points = {f"cuda_{p}": f / self.dram_bytes_per_s for p, f in self.cuda_core_flops.items()}
        points |= {f"tensor_{p}": f / self.dram_bytes_per_s for p, f in self.tensor_core_flops.items()}
        return points


def peaks_of(spec: GpuSpec) -> Peaks:
    bw = spec.memory.bandwidth_gbs
    return Peaks(
        gpu=spec.name,
        dram_bytes_per_s=bw * 1e9 if bw else None,
        cuda_core_flops={k: v * 1e12 for k, v in spec.cuda_core_tflops.model_dump().items() if v is not None},
        tensor_core_flops={k: v * 1e12 for k, v in spec.tensor_core_tflops.model_dump().items() if v is not None},
    )


def ridge_points(spec: GpuSpec) -> dict[str, float]:
    return peaks_of(spec).ridge_points()
