"""The live objects a run's nodes use, beside its configuration: the chat model per role, the
evaluator, the profiler, the memory, the event stream and the human hint queue. Small protocols,
so tests and the demo swap in fakes without monkeypatching."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from kernelwright.agent.control import RunControl
from kernelwright.agent.events import EventStream
from kernelwright.harness.result import EvalResult
from kernelwright.memory import CandidateEntry, ProblemKey, Recall, RecallQuery
from kernelwright.problems import Problem


class Evaluator(Protocol):
    """What the evaluate node needs of the harness (an `EvalSession` is one). An evaluator may also
    have `wait_ready()` (the warm session's spare worker), which the profile node calls first, and
    its `evaluate` may take `on_result(i, result)`, called as each candidate is decided (the
    `EvalSession` and the `EvalPool` do), so the node keeps each result at once. It may also have
    `build_ahead(paths)`, which must return at once: the coder hands it each usable reply's draft as
    the reply arrives (`nodes/ahead.py`), and the builds land in the build cache, where `evaluate`
    finds them (an `EvalSession` has it; the `EvalPool` and the tests' fakes do not, and their
    candidates are built when they are judged)."""

    def evaluate(self, candidates: list[Path]) -> list[EvalResult]: ...


@dataclass(frozen=True)
class CandidateProfile:
    """One candidate under the profiler: its digest text and ownership, or why there is none."""

    ok: bool
    text: str = ""
    """The digest as text (what the reviewer and `profile_digest` read), or the failure, one line."""
    own_pct: float | None = None
    """Share of GPU time in the candidate's own kernels (ncu's view of "our kernels did the work")."""
    report: Path | None = None
    digest_json: str | None = None
    """The digest as JSON (`NcuDigest`), which `digest_diff` compares."""


class Profiler(Protocol):
    """What the profile node needs of Nsight Compute (`agent.profiling.NcuProfiler` is one)."""

    def profile(self, candidate: Path, report_path: Path) -> CandidateProfile: ...


class Memory(Protocol):
    """What the nodes need of the knowledge base (`memory.KnowledgeBase` is one): write a judged
    candidate at once, attach its digest and lesson later, and recall for the planner."""

    def problem_key(self, problem: Problem) -> ProblemKey: ...

    def record(self, entry: CandidateEntry) -> None: ...

    def annotate(
        self, run_id: str, indexes: Sequence[int], *, digest: str | None = None, lesson: str | None = None
    ) -> int: ...

    def recall(self, query: RecallQuery) -> Recall: ...


@dataclass
class Deps:
    models: dict[str, BaseChatModel]
    evaluator: Evaluator
    events: EventStream = field(default_factory=EventStream)
    hints: deque[str] = field(default_factory=deque)
    started: float = field(default_factory=time.monotonic)
    profiler: Profiler | None = None
    profiler_missing: str = "ncu (Nsight Compute) was not found"
    """Why `profiler` is None on a cuda run (the note the reviewer reads)."""
    memory: Memory | None = None
    """None: this run neither reads nor writes memory (`--no-memory`)."""
    control: RunControl | None = None
    """A frontend's steering (pause, stop, plan approval); None in a headless run."""

    @classmethod
    def from_runnable_config(cls, config: RunnableConfig | None) -> Deps:
        value = (config or {}).get("configurable", {}).get("deps")
        if not isinstance(value, cls):
            raise TypeError("the graph was invoked without configurable.deps (a Deps)")
        return value
