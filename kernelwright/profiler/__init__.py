"""Nsight Compute for the agent: run ncu, read reports, digest them, diff two digests, sweep.

result = profile_problem("1_relu", Path("cand.py"), report_path=Path("ev/cand.ncu-rep"))
if result.ok:
    digest = build_digest(load_report(result.report_path))
    print(digest.to_text())
"""

from kernelwright.profiler.diff import DigestDiff, diff
from kernelwright.profiler.digest import (
    Bottleneck,
    Classification,
    NcuDigest,
    Roofline,
    build_digest,
    classify,
    roofline,
)
from kernelwright.profiler.ownership import KernelOwnership, kernel_ownership
from kernelwright.profiler.report import Metric, NcuKernel, NcuReport, RuleResult, load_report
from kernelwright.profiler.runner import (
    DEFAULT_SECTIONS,
    NcuOptions,
    ProfileResult,
    ProfileStatus,
    build_command,
    find_ncu,
    ncu_version,
    profile_problem,
    run_ncu,
)
from kernelwright.profiler.sweep import SweepResult, SweepSpec, SweepStatus, run_sweep

__all__ = [
    "DEFAULT_SECTIONS",
    "Bottleneck",
    "Classification",
    "DigestDiff",
    "KernelOwnership",
    "Metric",
    "NcuDigest",
    "NcuKernel",
    "NcuOptions",
    "NcuReport",
    "ProfileResult",
    "ProfileStatus",
    "Roofline",
    "RuleResult",
    "SweepResult",
    "SweepSpec",
    "SweepStatus",
    "build_command",
    "build_digest",
    "classify",
    "diff",
    "find_ncu",
    "kernel_ownership",
    "load_report",
    "ncu_version",
    "profile_problem",
    "roofline",
    "run_ncu",
    "run_sweep",
]
