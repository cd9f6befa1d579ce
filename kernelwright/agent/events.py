"""The run's event stream: one typed, versioned event per step, and the consumers that read it.

The headless renderer (cli), the trajectory writer, `--events-json` and later the TUI are all
subscribers of one `EventStream`; nodes only ever `emit`. Events are pydantic so they can be
written as JSON lines and read back (`parse_event`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from kernelwright.harness.sandbox.isolation import redact

log = logging.getLogger(__name__)

EVENT_SCHEMA_VERSION = 1
TRAJECTORY_SCHEMA_VERSION = 1


class _Event(BaseModel):
    schema_version: int = EVENT_SCHEMA_VERSION
    run_id: str = ""
    seq: int = 0
    round: int = 0
    ts: str = Field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"))


class RunStarted(_Event):
    kind: Literal["run_started"] = "run_started"
    problem: str
    device: str
    backend: str
    target: float
    target_baseline: str
    scripted: str | None = None
    resumed: bool = False
    budget: dict[str, float | None] = Field(
        default_factory=dict,
        description="The run's limits: rounds, tokens, cost_usd, wall_s, gpu_s (None: no limit).",
    )
    cost_note: str = ""
    """Why the cost meter cannot count (a model without a price), or ""."""


class StepStarted(_Event):
    kind: Literal["step_started"] = "step_started"
    step: str


class StepFinished(_Event):
    """A node ended (the runner sees each step's checkpoint): how long it took."""

    kind: Literal["step_finished"] = "step_finished"
    step: str
    seconds: float


class PlanWritten(_Event):
    kind: Literal["plan_written"] = "plan_written"
    plan: str
    expected_speedup: float | None = None
    hints: list[str] = Field(default_factory=list, description="The people's hints this plan was written with.")


class PlanAwaitingApproval(_Event):
    """The run waits before the coder until a person approves or edits the plan (a LangGraph interrupt)."""

    kind: Literal["plan_awaiting_approval"] = "plan_awaiting_approval"
    plan: str


class PlanDecided(_Event):
    kind: Literal["plan_decided"] = "plan_decided"
    edited: bool
    plan: str


class RunPaused(_Event):
    """The run stopped at a step boundary (its state is checkpointed) until it is resumed."""

    kind: Literal["run_paused"] = "run_paused"
    next_steps: list[str] = Field(default_factory=list)


class RunResumed(_Event):
    kind: Literal["run_resumed"] = "run_resumed"


class CandidateWritten(_Event):
    kind: Literal["candidate_written"] = "candidate_written"
    index: int
    path: str
    sha256: str


class BuildAhead(_Event):
    """A coder reply's draft handed to the evaluator to build while the step's other replies are
    awaited (`nodes/ahead.py`); its candidate number comes later, with `CandidateWritten`."""

    kind: Literal["build_ahead"] = "build_ahead"
    sample: int
    """The step's sample it came from (from 1)."""
    sha256: str
    path: str
    """The draft's file, under the run's drafts/."""


class CoderRetry(_Event):
    kind: Literal["coder_retry"] = "coder_retry"
    why: str


class CandidateEvaluated(_Event):
    kind: Literal["candidate_evaluated"] = "candidate_evaluated"
    index: int
    verdict: str
    reason: str | None = None
    message: str = ""
    speedups: dict[str, dict[str, float]] = Field(default_factory=dict)
    beats_target: bool = False
    cached: bool = Field(default=False, description="Result read back from the run folder, not re-evaluated.")
    parent: int | None = Field(default=None, description="The candidate this one's idea started from (its parent).")
    also: list[int] = Field(
        default_factory=list, description="Other candidates its idea combined with its parent (extra parents)."
    )
    tags: list[str] = Field(default_factory=list, description="Technique tags (its niche in the program database).")
    idea: str = Field(default="", description="The plan of the idea it implements.")
    gpu_seconds: float = Field(
        default=0.0, description="Device time of its evaluation (correctness, work share, timing)."
    )


class ProfileSkipped(_Event):
    kind: Literal["profile_skipped"] = "profile_skipped"
    why: str
    index: int | None = None


class CandidateProfiled(_Event):
    kind: Literal["candidate_profiled"] = "candidate_profiled"
    index: int
    digest: str
    own_pct: float | None = None
    report: str | None = None
    cached: bool = False


class ToolCalled(_Event):
    kind: Literal["tool_called"] = "tool_called"
    role: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    result: str = Field(default="", description="The start of what the tool returned (what the model read).")
    truncated: bool = False


class RunBranched(_Event):
    kind: Literal["run_branched"] = "run_branched"
    from_run: str
    from_index: int
    path: str
    verdict: str


class MemoryRecalled(_Event):
    """What the planner's prompt shows from memory this round: each item's id, tier and why."""

    kind: Literal["memory_recalled"] = "memory_recalled"
    items: list[dict[str, Any]] = Field(default_factory=list)
    left_out: int = 0
    tokens: int = 0
    budget_tokens: int = 0


class RememberedStart(_Event):
    """A new run starts from the best kernel memory holds for its problem on this machine; it is
    re-evaluated here as candidate 0 (the numbers then are another run's)."""

    kind: Literal["remembered_start"] = "remembered_start"
    memory_id: str
    uid: str
    from_run: str
    from_index: int
    machine: str
    outcome_then: str
    path: str


class ReviewWritten(_Event):
    kind: Literal["review_written"] = "review_written"
    decision: str
    lesson: str
    feedback: str = ""


class UsageUpdated(_Event):
    kind: Literal["usage_updated"] = "usage_updated"
    role: str
    input_tokens: int
    output_tokens: int
    total_tokens: float
    cost_usd: float
    estimated: bool = False
    cached_tokens: int = Field(default=0, description="Of input_tokens: read from the provider's prompt cache.")
    reasoning_tokens: int = Field(default=0, description="Of output_tokens: spent by a reasoning model thinking.")
    sample: int = Field(default=0, description="Which of the step's concurrent samples (0: the only one).")
    temperature: float | None = Field(
        default=None,
        description="The temperature the request was drawn at (`sampling.temperature_schedule`); None: the "
        "model's default (none set, or the endpoint refused it).",
    )


class TokensStreamed(_Event):
    """A reply as it streams in, at most about four times a second per request (`asking.py`). Transient:
    live frontends show it, the trajectory and --events-json never hold it, and it takes no number
    of its own (it carries the last persisted event's `seq`)."""

    kind: Literal["tokens_streamed"] = "tokens_streamed"
    role: str
    sample: int = 0
    chars: int
    tokens_so_far: int = Field(description="Estimated: ceil(chars / 4), the scripted model's rule of thumb.")
    preview_tail: str = Field(default="", description="The last characters received (text, or tool-call arguments).")


class LlmNote(_Event):
    """What the endpoint made a call do (`llm.py`): a refused parameter dropped for the rest of the run,
    a reply cut at max_tokens retried with more room (or left cut), a prompt compressed to fit the
    model's context, a sample that failed while the step's other samples went on."""

    kind: Literal["llm_note"] = "llm_note"
    role: str
    sample: int = 0
    what: Literal["parameter_dropped", "more_room", "still_cut", "prompt_compressed", "sample_failed"]
    detail: str


class RunFinished(_Event):
    kind: Literal["run_finished"] = "run_finished"
    stop_reason: str
    accepted: bool
    best_index: int | None = None
    best_speedups: dict[str, dict[str, float]] = Field(default_factory=dict)


Event = Annotated[
    RunStarted
    | StepStarted
    | StepFinished
    | PlanWritten
    | PlanAwaitingApproval
    | PlanDecided
    | RunPaused
    | RunResumed
    | CandidateWritten
    | BuildAhead
    | CoderRetry
    | CandidateEvaluated
    | ProfileSkipped
    | CandidateProfiled
    | ToolCalled
    | RunBranched
    | MemoryRecalled
    | RememberedStart
    | ReviewWritten
    | UsageUpdated
    | TokensStreamed
    | LlmNote
    | RunFinished,
    Field(discriminator="kind"),
]
_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)
TRANSIENT_KINDS = frozenset({"tokens_streamed"})


def is_transient(event: _Event) -> bool:
    """Shown live, never persisted (a streamed reply's progress would swell the trajectory)."""
    return getattr(event, "kind", "") in TRANSIENT_KINDS


def parse_event(data: str | dict[str, Any]) -> _Event:
    """One event back from JSON (a line of --events-json, an entry of trajectory.json)."""
    value = _ADAPTER.validate_json(data) if isinstance(data, str) else _ADAPTER.validate_python(data)
    assert isinstance(value, _Event)
    return value


Subscriber = Callable[[_Event], None]


class EventStream:
    """Fan-out of events to subscribers, numbering them. A subscriber's exception propagates: a
    consumer that cannot write (a full disk) should stop the run, not be silently dropped."""

    def __init__(self, run_id: str = "", start_seq: int = 0) -> None:
        self.run_id = run_id
        self.seq = start_seq
        self._subscribers: list[Subscriber] = []
        self.round = 0

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def emit(self, event: _Event) -> None:
        if not is_transient(event):  # persisted events stay numbered 1, 2, 3... across a resume
            self.seq += 1
        event.run_id, event.seq = self.run_id, self.seq
        if not event.round:
            event.round = self.round
        for subscriber in self._subscribers:
            subscriber(event)


class JsonLinesWriter:
    """`--events-json FILE`: one event per line, flushed as it happens."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def __call__(self, event: _Event) -> None:
        if is_transient(event):
            return
        self._file.write(redact(event.model_dump_json()) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class TrajectoryWriter:
    """runs/<id>/trajectory.json: every event of the run (a resumed run appends), rewritten after
    each event so a killed run leaves a readable file."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.header = header
        self.events: list[dict[str, Any]] = []
        if path.exists():
            try:
                self.events = list(json.loads(path.read_text()).get("events", []))
            except (OSError, json.JSONDecodeError) as exc:
                log.warning("%s unreadable (%s); starting a new trajectory", path, exc)

    @property
    def last_seq(self) -> int:
        return max((int(e.get("seq", 0)) for e in self.events), default=0)

    def __call__(self, event: _Event) -> None:
        if is_transient(event):
            return
        self.events.append(event.model_dump(mode="json"))
        doc = {"schema_version": TRAJECTORY_SCHEMA_VERSION, **self.header, "events": self.events}
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(redact(json.dumps(doc, indent=1)))  # an event's error text can quote a key
        tmp.replace(self.path)
