"""Nsight Compute for the agent: run ncu, read reports, digest them, diff two digests, sweep.

result = profile_problem("1_relu", Path("cand.py"), report_path=Path("ev/cand.ncu-rep"))
if result.ok:
    digest = build_digest(load_report(result.report_path))
    print(digest.to_text())

What lives here, lowest first:
- `report`: the typed report (kernels, metrics, NCU rule results); `formatting`: short number text;
  `classification`: bottleneck class and roofline position (pure arithmetic).
- `runner` (runs ncu; `target` is the child it profiles), `csv_fallback` and `reader` (load a
  `.ncu-rep` with `ncu_report`, else through `ncu --import --csv`).
- `metrics` (which metrics the digest reads), `digest` (the curated digest and its text), `diff`
  (baseline vs candidate), `ownership` (which kernels a candidate launched), `sweep` / `sweep_worker`
  (nsight-python metric sweeps).

Layer 5 of DESIGN.md, beside `harness`: this folder may import `problems`, `hardware_specs`,
`fastext`, `config` and `errors`, never `harness`, `tools`, `agent`, `memory` or the frontends.
No import circles inside it, hidden in function-level imports or not; heavy third-party modules
(torch, ncu_report, nsight) are imported lazily where start-up time matters.

`sweep_worker.py` runs as a script, which puts this folder first on that process's sys.path: no
module here may share its name with a top-level package that anything imports (a `bottleneck.py`
here once shadowed the one pandas looks for, and sweeps failed).
"""

from kernelwright.profiler.classification import Bottleneck, Classification, Roofline, classify, roofline
from kernelwright.profiler.diff import DigestDiff, diff
from kernelwright.profiler.digest import NcuDigest, build_digest
from kernelwright.profiler.ownership import KernelOwnership, kernel_ownership
from kernelwright.profiler.reader import load_report
from kernelwright.profiler.report import Metric, NcuKernel, NcuReport, RuleResult
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
from kernelwright.profiler.speed_of_light import SpeedOfLight, Work, count_work
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
    "SpeedOfLight",
    "SweepResult",
    "SweepSpec",
    "SweepStatus",
    "Work",
    "build_command",
    "build_digest",
    "classify",
    "count_work",
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
