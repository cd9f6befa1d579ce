"""Metric sweeps with nsight-python: one problem (and candidate) over its input sets, several runs
each, with confidence intervals.

nsight-python's injection re-runs the calling script under ncu and lives for the whole process,
so every sweep runs in its own worker subprocess (`sweep_worker.py`) and comes back as a
`SweepResult` value.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
import subprocess
import sys
import time
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel

from kernelwright.profiler.runner import find_ncu, ncu_version

log = logging.getLogger(__name__)

WORKER = Path(__file__).with_name("sweep_worker.py")


class SweepStatus(StrEnum):
    OK = "ok"
    NSIGHT_MISSING = "nsight_missing"
    NCU_MISSING = "ncu_missing"
    INCOMPATIBLE = "incompatible"
    TIMEOUT = "timeout"
    FAILED = "failed"


class SweepSpec(BaseModel):
    problem: str
    candidate: str | None = None
    size: str = "default"
    input_sets: list[int] | None = None  # indices into [default inputs, *variants]; None = all
    runs: int = 5
    metrics: list[str] = ["gpu__time_duration.sum"]
    include_reference: bool = True
    build_cache: Path | None = None  # where the candidate's extensions are built; None: the configured one


class SweepPoint(BaseModel):
    annotation: str  # "reference" or "candidate"
    input_set: int
    metric: str
    mean: float | None
    std: float | None = None
    ci95_low: float | None = None
    ci95_high: float | None = None
    runs: int | None = None
    stable: bool | None = None
    kernels: str = ""


class SweepResult(BaseModel):
    status: SweepStatus
    message: str
    hint: str | None = None
    points: list[SweepPoint] = []
    nsight_version: str | None = None
    ncu_version: str | None = None
    duration_s: float = 0.0
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.status is SweepStatus.OK


def nsight_python_version() -> str | None:
    try:
        return importlib.metadata.version("nsight-python")
    except importlib.metadata.PackageNotFoundError:
        return None


def _parts(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def nsight_fits_ncu(nsight: str | None, ncu: str | None) -> tuple[bool, str]:
    """Whether this nsight-python line works with this ncu: 0.9.x needs ncu >= 2022.4,
    1.x refuses ncu older than 2026.2.1."""
    if nsight is None:
        return False, "nsight-python is not installed"
    if ncu is None:
        return False, "ncu is not available"
    need = (2026, 2, 1) if _parts(nsight)[:1] >= (1,) else (2022, 4, 0)
    if _parts(ncu) < need:
        wanted = ".".join(str(p) for p in need)
        return False, f"nsight-python {nsight} needs ncu >= {wanted}, found {ncu}"
    return True, f"nsight-python {nsight} works with ncu {ncu}"


def run_sweep(spec: SweepSpec, *, work_dir: Path, timeout_s: float = 600.0) -> SweepResult:
    """Run the sweep in a fresh worker process; every failure is a value. A problem's reference
    only: a candidate's code would run in that process (and in ncu's target) outside the sandbox's
    layers, so a spec naming one is refused; `kernelwright profile PROBLEM CANDIDATE` profiles a
    candidate confined (`tools/profile.profile_candidate`)."""
    if spec.candidate:
        return SweepResult(
            status=SweepStatus.FAILED,
            message="a sweep runs its code outside the sandbox: it takes a problem's reference, not a candidate",
            hint="`kernelwright profile PROBLEM CANDIDATE` profiles a candidate in the sandbox",
        )
    nsight = nsight_python_version()
    if nsight is None:
        return SweepResult(
            status=SweepStatus.NSIGHT_MISSING,
            message="nsight-python is not installed",
            hint="pip install 'nsight-python>=0.9.6,<1'",
        )
    ncu = find_ncu()
    if ncu is None:
        return SweepResult(
            status=SweepStatus.NCU_MISSING,
            message="Nsight Compute (`ncu`) is not on PATH",
            hint="install Nsight Compute; sweeps need it",
            nsight_version=nsight,
        )
    version = ncu_version(ncu)
    fits, why = nsight_fits_ncu(nsight, version)
    if not fits:
        return SweepResult(
            status=SweepStatus.INCOMPATIBLE,
            message=why,
            hint="pip install 'nsight-python>=0.9.6,<1'",
            nsight_version=nsight,
            ncu_version=version,
        )
    work_dir.mkdir(parents=True, exist_ok=True)
    spec_path, out_path = work_dir / "sweep_spec.json", work_dir / "sweep_result.json"
    spec_path.write_text(spec.model_dump_json())
    out_path.unlink(missing_ok=True)
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env["PATH"] = os.pathsep.join((str(Path(ncu).parent), env.get("PATH", "")))
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, str(WORKER), str(spec_path), str(out_path)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            cwd=work_dir,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return SweepResult(
            status=SweepStatus.TIMEOUT,
            message=f"the sweep did not finish within {timeout_s:g} s",
            hint="fewer input sets or runs",
            nsight_version=nsight,
            ncu_version=version,
            duration_s=time.monotonic() - start,
            stderr_tail=str(exc.stderr or "")[-2000:],
        )
    elapsed = time.monotonic() - start
    if proc.returncode != 0 or not out_path.exists():
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return SweepResult(
            status=SweepStatus.FAILED,
            message=f"the sweep worker exited with code {proc.returncode}: {lines[-1][:300] if lines else 'no output'}",
            hint="see stderr_tail",
            nsight_version=nsight,
            ncu_version=version,
            duration_s=elapsed,
            stderr_tail=(proc.stderr or "")[-2000:],
        )
    result = SweepResult.model_validate_json(out_path.read_text())
    result.nsight_version, result.ncu_version, result.duration_s = nsight, version, elapsed
    return result
