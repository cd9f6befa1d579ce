"""The harness's side of the worker protocol: one typed client per worker kind, so no phase
writes a command string or reads a reply's data by key.

A command is one line on the worker's stdin (`trial JSON`, `workshare JSON`, `timing N`,
`onethread JSON`, `settle`, `compare JSON`, `baselines MS`, `prepare`, `candidate JSON`); its answer is the `result` message
of the same phase, read back as that phase's report (`messages.py`). Every call returns a
`Reply`: the `Outcome` (a crash, hang or OOM is a value there) and the report, None when there
was none or it did not validate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel

from kernelwright.harness.workers.jobs import (
    CandidateAssignment,
    CompareRequest,
    OneThreadRequest,
    TrialRequest,
    WorkShareRequest,
)
from kernelwright.harness.workers.messages import (
    BaselinesReport,
    BuildReport,
    CompareReport,
    OneThreadReport,
    PrepareReport,
    ReadyReport,
    ReferenceReport,
    SettleReport,
    TimingReport,
    TrialReport,
    WorkShareReport,
)
from kernelwright.harness.workers.process import Outcome

R = TypeVar("R", bound=BaseModel)


class Worker(Protocol):
    """What a client needs of a worker (`WorkerProcess` is one; tests pass stand-ins)."""

    def send(self, command: str) -> None: ...

    def expect(self, phase: str, timeout_s: float) -> Outcome: ...


@dataclass(frozen=True)
class Reply(Generic[R]):
    """A command's end: how the phase ended, and its report (the data of whatever message ended
    it, typed; None without one, or when it did not validate)."""

    outcome: Outcome
    report: R | None

    @property
    def ok(self) -> bool:
        return self.outcome.ok


def _wait(worker: Worker, phase: str, kind: type[R], timeout_s: float) -> Reply[R]:
    outcome = worker.expect(phase, timeout_s)
    return Reply(outcome, outcome.report(kind))


class ReferenceClient:
    """The reference's worker: its trials once, then comparisons and the clean baselines."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def trials(self, timeout_s: float) -> Reply[ReferenceReport]:
        """The reference run on every trial (the worker starts with it)."""
        return _wait(self.worker, "reference", ReferenceReport, timeout_s)

    def compare(self, request: CompareRequest, timeout_s: float) -> Reply[CompareReport]:
        self.worker.send(f"compare {request.model_dump_json()}")
        return _wait(self.worker, "compare", CompareReport, timeout_s)

    def prepare(self, timeout_s: float) -> Reply[PrepareReport]:
        """Make the baselines now and keep them for the session."""
        self.worker.send("prepare")
        return _wait(self.worker, "prepare", PrepareReport, timeout_s)

    def baselines(self, spacer_ms: float | None, timeout_s: float) -> Reply[BaselinesReport]:
        """Time the baselines (with a busy stand-in of `spacer_ms` where the candidate was)."""
        self.worker.send(f"baselines {spacer_ms or 0.0}")
        return _wait(self.worker, "baselines", BaselinesReport, timeout_s)


class CandidateClient:
    """A candidate's worker: its candidate, built, then the phases in the harness's order."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def ready(self, timeout_s: float) -> Reply[ReadyReport]:
        """A worker started ahead: its baselines are ready."""
        return _wait(self.worker, "ready", ReadyReport, timeout_s)

    def assign(self, candidate: Path) -> None:
        """A worker started ahead is told its candidate (it then builds it)."""
        self.worker.send(f"candidate {CandidateAssignment(candidate_path=candidate).model_dump_json()}")

    def build(self, timeout_s: float) -> Reply[BuildReport]:
        return _wait(self.worker, "build", BuildReport, timeout_s)

    def trial(self, request: TrialRequest, timeout_s: float) -> Reply[TrialReport]:
        self.worker.send(f"trial {request.model_dump_json()}")
        return _wait(self.worker, "trial", TrialReport, timeout_s)

    def settle(self, timeout_s: float) -> Reply[SettleReport]:
        """After a trial whose output failed its comparison: had that output changed since it
        was copied (`checks/settling.py`)?"""
        self.worker.send("settle")
        return _wait(self.worker, "settle", SettleReport, timeout_s)

    def workshare(self, request: WorkShareRequest, timeout_s: float) -> Reply[WorkShareReport]:
        self.worker.send(f"workshare {request.model_dump_json()}")
        return _wait(self.worker, "workshare", WorkShareReport, timeout_s)

    def timing(self, samples: int, timeout_s: float) -> Reply[TimingReport]:
        """Time the candidate against its baselines, keeping `samples` of its timed outputs."""
        self.worker.send(f"timing {samples}")
        return _wait(self.worker, "timing", TimingReport, timeout_s)

    def one_thread(self, request: OneThreadRequest, timeout_s: float) -> Reply[OneThreadReport]:
        """The CPU's one-thread look: the default shapes profiled and the candidate timed alone,
        both with one intra-op thread."""
        self.worker.send(f"onethread {request.model_dump_json()}")
        return _wait(self.worker, "onethread", OneThreadReport, timeout_s)
