"""EvalResult: what one evaluation of one candidate found. It crosses process and file
boundaries (worker → harness → agent, `--json`, evidence folders), hence pydantic."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from kernelwright.errors import UsageError
from kernelwright.harness.sandbox.isolation import Isolation
from kernelwright.harness.timing.stats import Speedup, TimingStats
from kernelwright.harness.verdicts import Reason, Verdict

SCHEMA_VERSION = 1


class Flag(BaseModel):
    """Evidence that raised an eyebrow: a static finding, a suspicious speedup, a timer disagreement."""

    code: str
    message: str
    severity: Literal["reject", "flag"] = "flag"
    line: int | None = None


class TrialResult(BaseModel):
    """One correctness trial: which inputs, and how the candidate's outputs compared."""

    index: int
    seed: int
    distribution: str
    variant: int | None = Field(default=None, description="Index of the shape variant; None = default shapes.")
    shapes: list[str] = Field(default_factory=list)
    contiguous: bool = True
    reused_addresses: bool = Field(default=False, description="Inputs written into the previous trial's buffers.")
    passed: bool | None = None
    reason: Reason | None = None
    detail: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatch_fraction: float | None = None
    first_mismatches: list[list[int]] = Field(default_factory=list)


class EvalResult(BaseModel):
    schema_version: int = SCHEMA_VERSION
    problem: str
    problem_sha256: str = ""
    candidate: str
    candidate_sha256: str = ""
    verdict: Verdict
    reason: Reason | None = None
    message: str = ""
    backend: str = "unknown"
    device: str = "cpu"
    size: str = "default"
    tolerance: dict[str, float] = Field(default_factory=dict)
    trials: list[TrialResult] = Field(default_factory=list)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    timings: dict[str, TimingStats] = Field(default_factory=dict)
    wall_median_ms: dict[str, float] = Field(default_factory=dict)
    speedups: dict[str, Speedup] = Field(default_factory=dict)
    clean_baseline_ms: dict[str, float] = Field(
        default_factory=dict,
        description="Each baseline's median timed in the reference's process (never ran candidate code): the "
        "cross-check of the baselines timed beside the candidate.",
    )
    compile_time_s: float | None = Field(
        default=None, description="torch.compile baseline's first-call time (excluded from timing)."
    )
    phase_seconds: dict[str, float] = Field(default_factory=dict)
    limits: dict[str, float] = Field(
        default_factory=dict,
        description="The limits it ran under: `call_s` (one call's hang bound, scaled to the reference's time) "
        "and how many timed outputs were checked.",
    )
    build_cached: bool | None = None
    outputs_handed_over: Literal["cuda-ipc", "files"] | None = Field(
        default=None,
        description="How the candidate's outputs reached the reference's process to be compared: CUDA memory "
        "handles (copied device to device) or files of data.",
    )
    policy: str = Field(default="strict", description="The policy it was judged under (`strict` or `engineering`).")
    library_share: float | None = Field(
        default=None,
        description="Share of the candidate's profiled forward time spent in library ops (aten, cuBLAS, cuDNN), on "
        "the worst shape profiled; under `engineering` the result table shows it.",
    )
    flags: list[Flag] = Field(default_factory=list)
    suspicious: str | None = Field(default=None, description="Why the speedup was re-verified, and the outcome.")
    hardware: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    stderr_tail: str = ""
    isolation: Isolation | None = Field(
        default=None, description="The isolation layers the candidate's worker ran under (None: no worker ran)."
    )
    created_at: str = Field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))

    @property
    def exit_code(self) -> int:
        if self.reason == Reason.MALFORMED_CANDIDATE:
            return 2
        return int(self.verdict.exit_code)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    @classmethod
    def load(cls, path: Path) -> EvalResult:
        """Read a result file; a newer schema than this code understands is a clear error."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"{path}: not a readable result file: {exc}") from exc
        version = data.get("schema_version") if isinstance(data, dict) else None
        if not isinstance(version, int):
            raise UsageError(f"{path}: not an EvalResult (no schema_version)")
        if version > SCHEMA_VERSION:
            raise UsageError(
                f"{path}: result schema version {version} is newer than this kernelwright understands ({SCHEMA_VERSION})",
                hint="upgrade kernelwright",
            )
        return cls.model_validate(data)
