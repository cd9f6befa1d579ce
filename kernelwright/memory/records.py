"""What the knowledge base holds, as values: a remembered candidate, a lesson, the machine it was
measured on. Entries cross file boundaries (`memory export` / `memory import`, shared between a
team's machines), hence pydantic; a uid that does not depend on the local row id lets the same
entry be imported twice without being counted twice."""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from kernelwright.vocabulary import Device


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def candidate_uid(run_id: str, index: int, source_sha256: str, machine: str) -> str:
    """Stable across databases: the same run's candidate on the same machine is one entry."""
    return hashlib.sha256(f"{run_id}|{index}|{source_sha256}|{machine}".encode()).hexdigest()[:32]


def error_class(verdict: str, reason: str | None) -> str | None:
    """What kind of failure a candidate is, for grouping ("compile_error", "torch_fallback", ...);
    None for a correct one."""
    if verdict == "correct":
        return None
    return reason or verdict


@dataclass(frozen=True)
class Machine:
    """Where a candidate was measured: the device kind, its name (the GPU's table name, or the CPU
    model) and its architecture (Hopper, Ampere, ... for a GPU; x86_64, aarch64 for a CPU)."""

    device: str
    name: str
    arch: str

    def describe(self) -> str:
        return f"{self.name} ({self.arch})"


class Speed(BaseModel):
    """A speedup against one baseline, with its 95% confidence interval."""

    model_config = ConfigDict(frozen=True)

    ratio: float
    ci_low: float
    ci_high: float

    def text(self, baseline: str) -> str:
        return f"{self.ratio:.2f}x vs {baseline} [CI {self.ci_low:.2f}-{self.ci_high:.2f}]"


class CandidateEntry(BaseModel):
    """One evaluated candidate, with what produced it (the plan) and what it taught (the lesson)."""

    uid: str
    run_id: str
    index: int = Field(description="The candidate's number in its run.")
    round: int = 0
    problem: str = Field(description="The problem's qualified name, e.g. level1/1_relu.")
    problem_sha256: str
    backend: str
    device: str
    machine: str
    arch: str
    source: str
    source_sha256: str
    verdict: str
    reason: str | None = None
    error_class: str | None = None
    message: str = ""
    speed_eager: Speed | None = None
    speed_compile: Speed | None = None
    digest: str = Field(default="", description="The profiler's digest (Nsight Compute), when profiled.")
    plan: str = ""
    lesson: str = Field(default="", description="The reviewer's one-line lesson of the candidate's round.")
    scripted: str | None = Field(default=None, description="The scripted LLM session that wrote it, if any.")
    origin: str = Field(default="local", description="`local`, or `import` for an entry read from an export.")
    created_at: str = Field(default_factory=now)
    updated_at: str = Field(default_factory=now)
    id: int | None = Field(default=None, description="The row id in this database (not exported).")

    @property
    def label(self) -> str:
        return f"c{self.id}" if self.id is not None else self.uid[:12]

    @property
    def target_baseline(self) -> str | None:
        return "compile" if self.speed_compile else "eager" if self.speed_eager else None

    def score(self) -> float:
        """How good a correct candidate is: the CI lower bound against torch.compile (eager when
        compile was not timed); 0 for anything else."""
        if self.verdict != "correct":
            return 0.0
        speed = self.speed_compile or self.speed_eager
        return speed.ci_low if speed else 0.0

    def speed_text(self) -> str:
        parts = [s.text(name) for name, s in (("compile", self.speed_compile), ("eager", self.speed_eager)) if s]
        return ", ".join(parts) or "not timed"

    def outcome(self) -> str:
        """`correct, 1.80x vs compile [...]` or `rejected (torch_fallback)`."""
        if self.verdict == "correct":
            return f"correct, {self.speed_text()}"
        return f"{self.verdict} ({self.reason})" if self.reason else self.verdict


class LessonEntry(BaseModel):
    """A general lesson: not tied to one candidate. The seed file ships some; imports add more."""

    uid: str
    text: str
    source: str = Field(description="Where the lesson's facts come from (a document, a run).")
    url: str | None = None
    device: Device | None = Field(default=None, description="Only for this device kind; None: any.")
    arch: str | None = Field(default=None, description="Only for this architecture (e.g. Hopper); None: any.")
    ops: list[str] = Field(
        default_factory=list, description="Operators or operator classes it concerns; empty: every problem."
    )
    origin: str = Field(default="local", description="`seed`, `import` or `local`.")
    created_at: str = Field(default_factory=now)
    id: int | None = None

    @property
    def label(self) -> str:
        return f"l{self.id}" if self.id is not None else self.uid[:12]

    def scope(self) -> str:
        parts: list[str] = [self.device or "any device"]
        if self.arch:
            parts.append(self.arch)
        if self.ops:
            parts.append("ops: " + ", ".join(self.ops))
        return "; ".join(parts)
