"""One optimization run, start (or resume) to summary: the run folder, the SQLite checkpointer,
the event consumers, and the files a finished or interrupted run leaves. Its live parts (chat
models, evaluator, profiler, memory: `RunParts`) come from `assembly.assemble`; how a frontend
drives it (resume, subscribers, hints, steering) is a `RunSteering`.

The summary and trajectory are written in `finally`, so a run ended by an API error, a script
that ran out or Ctrl-C is saved and resumable with `--resume RUN_ID`.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from kernelwright.agent import remember, runs
from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.control import RunControl
from kernelwright.agent.deps import Deps, Evaluator, Memory, Profiler
from kernelwright.agent.events import (
    EventStream,
    PlanAwaitingApproval,
    PlanDecided,
    RunBranched,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    TrajectoryWriter,
    _Event,
)
from kernelwright.agent.graph import build_graph
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.agent.state import AgentState, CandidateRecord
from kernelwright.errors import ExitCode
from kernelwright.memory import KnowledgeBase

log = logging.getLogger(__name__)
RECURSION_LIMIT = 2000
Subscriber = Callable[[_Event], None]


@dataclass
class RunOutcome:
    config: AgentConfig
    state: AgentState
    finished: bool
    stop_reason: str
    events: list[_Event] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return bool(self.state.get("accepted"))

    @property
    def best(self) -> CandidateRecord | None:
        return self.state.get("best")

    @property
    def candidates(self) -> list[CandidateRecord]:
        return list(self.state.get("candidates", []))

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.accepted else ExitCode.NEEDS_ATTENTION


def initial_state(config: AgentConfig, origin: CandidateRecord | None = None) -> AgentState:
    """A fresh run's state; a branched run (`--from`) starts with the origin as its starting point,
    and as its best when the origin is correct."""
    state: AgentState = {
        "problem": config.problem,
        "round": 0,
        "candidates": [],
        "lessons": [],
        "history": [],
        "usage": {},
        "profiles": {},
    }
    if origin is not None:
        state["origin"] = origin
        state["start"] = origin
        state["best"] = origin if origin["verdict"] == "correct" else None
    return state


@contextlib.contextmanager
def open_memory(config: AgentConfig, given: Memory | None) -> Iterator[Memory | None]:
    """The run's memory: the one given (a test's, a caller's), else the database the config
    names (closed at the end), else none (`--no-memory`)."""
    if given is not None or not config.memory or config.memory_db is None:
        yield given if config.memory else None
        return
    with KnowledgeBase.open(config.memory_db) as kb:
        yield kb


def _fresh_state(config: AgentConfig, deps: Deps) -> AgentState:
    events = deps.events
    if config.branch_from is None:
        state = initial_state(config)
        state.update(remember.start_from_memory(config, deps))
        return state
    origin, from_index = runs.branch_origin(config)
    if origin["verdict"] == "correct":
        shutil.copyfile(origin["path"], config.run_dir / "best.py")
    events.emit(
        RunBranched(
            from_run=config.branch_from,
            from_index=from_index,
            path=origin["path"],
            verdict=origin["verdict"],
        )
    )
    return initial_state(config, origin)


class _StepClock:
    """StepFinished events: each step's time, from its StepStarted to the checkpoint after it."""

    def __init__(self, events: EventStream) -> None:
        self.events = events
        self.started: dict[str, float] = {}

    def __call__(self, event: _Event) -> None:
        if isinstance(event, StepStarted):
            self.started[event.step] = time.monotonic()

    def finished(self, chunk: dict[str, Any]) -> None:
        for step in chunk:
            began = self.started.pop(step, None)
            if began is not None:  # a step that only routed (a stop, a budget check) has no StepStarted
                self.events.emit(StepFinished(step=step, seconds=round(time.monotonic() - began, 3)))


def _pending_plan(snapshot: Any) -> str | None:
    """The plan a pending approval interrupt shows, or None when the graph waits on nothing."""
    for task in snapshot.tasks:
        for pending in task.interrupts:
            value = getattr(pending, "value", None)
            if isinstance(value, dict) and value.get("step") == "approve_plan":
                return str(value.get("plan", ""))
    return None


def ended(snapshot: Any) -> bool:
    """Has the graph reached its end? Not when the checkpoint is the run's input alone (a run
    killed in its first step): that one has no next node yet, but its start task is pending."""
    return not snapshot.next and not snapshot.tasks


def drive(graph: Any, first: Any, thread: Any, deps: Deps) -> None:
    """Stream the graph step by step. Without a control this is `invoke`. With one, the runner
    stops streaming after a step when a pause (or a detach) is asked for: the state is checkpointed
    there, so a quit while paused leaves a resumable run; a plan-approval interrupt waits for the
    person's answer, then the graph resumes with it (`Command(resume=...)`). Each step's checkpoint
    is written before the next step starts (durability "sync", where LangGraph's default writes it
    beside the next step): a run killed with SIGKILL loses only the step in flight, never a
    finished evaluation's place in the graph. The write costs milliseconds; a step costs seconds."""
    control, events = deps.control, deps.events
    clock = _StepClock(events)
    events.subscribe(clock)
    payload = first
    while True:
        for chunk in graph.stream(payload, thread, stream_mode="updates", durability="sync"):
            if isinstance(chunk, dict):
                clock.finished({k: v for k, v in chunk.items() if not k.startswith("__")})
            if control is not None and control.should_break():
                break
        snapshot = graph.get_state(thread)
        if ended(snapshot) or control is None:
            return  # ended; or headless and waiting on an interrupt (the run stays resumable)
        plan = _pending_plan(snapshot)
        if plan is not None:
            events.emit(PlanAwaitingApproval(plan=plan))
            answer = control.wait_plan_answer()
            if answer.detached:
                return
            events.emit(PlanDecided(edited=answer.text is not None, plan=answer.text or plan))
            payload = Command(resume=answer.text or "")
            continue
        if control.detached:
            return
        events.emit(RunPaused(next_steps=list(snapshot.next)))
        if control.wait_resume() == "detach":
            return
        events.emit(RunResumed())
        payload = None


def _why(exc: BaseException) -> str:
    """One line for a run that ended on an exception: a KernelwrightError's message, else the
    exception's type and first line (a bug must say what it was, not only its class)."""
    message = getattr(exc, "message", None)
    if isinstance(message, str) and message:
        return message
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0][:300]}" if first else type(exc).__name__


def summary_of(config: AgentConfig, state: AgentState, stop_reason: str, finished: bool) -> dict[str, Any]:
    best = state.get("best")
    return {
        "run_id": config.run_id,
        "problem": config.problem,
        "device": config.device,
        "backend": config.backend,
        "scripted": config.scripted,
        "target": config.target,
        "finished": finished,
        "stop_reason": stop_reason,
        "accepted": bool(state.get("accepted")),
        "rounds": state.get("round", 0),
        "best": best,
        "best_file": str(config.run_dir / "best.py") if best else None,
        "branched_from": (
            {"run_id": config.branch_from, "candidate": config.branch_candidate, "origin": state.get("origin")}
            if config.branch_from
            else None
        ),
        "candidates": list(state.get("candidates", [])),
        "lessons": list(state.get("lessons", [])),
        "usage": dict(state.get("usage", {})),
        "profiles": dict(state.get("profiles", {})),  # the digests by candidate index (`runs export`)
        "history": list(state.get("history", [])),  # one line per round: its idea, outcome and why
        "ideas": list(state.get("idea_log", [])),  # every round's ideas, parents and why each parent
    }


@dataclass(frozen=True)
class RunParts:
    """The live dependencies of one run (`assembly.assemble` makes them the same way for every
    frontend): the chat model per role, the evaluator, the scripted session when the run is
    scripted, the profiler (or why there is none) and the memory."""

    models: dict[str, BaseChatModel]
    evaluator: Evaluator
    scripted: ScriptedSession | None = None
    profiler: Profiler | None = None
    profiler_missing: str = "ncu (Nsight Compute) was not found"
    memory: Memory | None = None
    """None: the config's database is opened by the run (`config.memory` off: none)."""

    def script_watch(self) -> tuple[Subscriber, ...]:
        """The subscriber that stops a scripted run where reality leaves its script (none when
        the run is not scripted or its script expects no verdicts)."""
        session = self.scripted
        return (session.watch,) if session is not None and session.expected_verdicts else ()


@dataclass(frozen=True)
class RunSteering:
    """How a frontend drives a run: resume it, watch its events (in this order), give the first
    planner prompt hints, steer it (`control.py`; None: headless, the run never pauses)."""

    resume: bool = False
    subscribers: tuple[Subscriber, ...] = ()
    hints: tuple[str, ...] = ()
    control: RunControl | None = None


def run(config: AgentConfig, parts: RunParts, steering: RunSteering | None = None) -> RunOutcome:
    """Run (or resume) the graph to its end; the outcome says how it stopped. One process at a
    time drives a run (a second one is a UsageError)."""
    with runs.exclusive(config.run_dir):
        return _run(config, parts, steering or RunSteering())


def _run(config: AgentConfig, parts: RunParts, steering: RunSteering) -> RunOutcome:
    resume, control, scripted = steering.resume, steering.control, parts.scripted
    run_dir = config.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        runs.save_config(config)
    trajectory = TrajectoryWriter(
        run_dir / "trajectory.json", {"run_id": config.run_id, "problem": config.problem, "scripted": config.scripted}
    )
    events = EventStream(config.run_id, start_seq=trajectory.last_seq)
    seen: list[_Event] = []
    consumers: tuple[Subscriber, ...] = (trajectory, seen.append, *steering.subscribers)
    for subscriber in consumers:
        events.subscribe(subscriber)
    deps = Deps(
        models=parts.models,
        evaluator=parts.evaluator,
        events=events,
        profiler=parts.profiler,
        profiler_missing=parts.profiler_missing,
        control=control,
    )
    if control is not None:
        deps.hints = control.hints  # the frontend's queue is the run's
    deps.hints.extend(steering.hints)
    thread: Any = {
        "configurable": {"thread_id": config.run_id, "agent_config": config, "deps": deps},
        "recursion_limit": RECURSION_LIMIT,
    }
    state: AgentState = {}
    stop = "interrupted"
    finished = False
    with (
        open_memory(config, parts.memory) as deps.memory,
        SqliteSaver.from_conn_string(str(run_dir / "checkpoints.sqlite")) as saver,
    ):
        graph = build_graph(saver)
        snapshot = graph.get_state(thread)
        state = dict(snapshot.values) if snapshot.values else {}  # type: ignore[assignment]
        if resume and state.get("elapsed_s"):  # the wall-time budget counts every session of the run
            deps.started = time.monotonic() - float(state.get("elapsed_s", 0.0))
        if resume and scripted is not None:
            usage = state.get("usage", {})
            scripted.skip({k.split(".", 1)[1]: int(v) for k, v in usage.items() if k.startswith("calls.")})
        events.emit(
            RunStarted(
                problem=config.problem,
                device=config.device,
                backend=config.backend,
                target=config.target,
                target_baseline="compile (eager where compile is unavailable)",
                scripted=config.scripted,
                resumed=resume,
                budget={
                    "rounds": config.max_rounds,
                    "tokens": config.max_tokens,
                    "cost_usd": config.max_cost_usd,
                    "wall_s": config.max_wall_s,
                    "gpu_s": config.max_gpu_s,
                },
                cost_note=config.cost_uncounted(),
            )
        )
        try:
            already_done = resume and bool(state) and ended(snapshot)
            if not already_done:
                drive(graph, None if resume and state else _fresh_state(config, deps), thread, deps)
            after = graph.get_state(thread)
            state = dict(after.values)  # type: ignore[assignment]
            finished = ended(after)
            left = "left by the user" if control is not None and control.detached else "paused"
            stop = state.get("stop_reason") or ("ended" if finished else f"{left} before {', '.join(after.next)}")
        except BaseException as exc:
            state = dict(graph.get_state(thread).values)  # type: ignore[assignment]
            stop = f"interrupted: {_why(exc)}"
            raise
        finally:
            runs.write_summary(run_dir, summary_of(config, state, stop, finished))
            best = state.get("best")
            events.emit(
                RunFinished(
                    stop_reason=stop,
                    accepted=bool(state.get("accepted")),
                    best_index=best["index"] if best else None,
                    best_speedups=best["speedups"] if best else {},
                    round=state.get("round", 0),
                )
            )
    return RunOutcome(config, state, finished, stop, seen)
