"""One optimization run, start (or resume) to summary: the run folder, the SQLite checkpointer,
the event consumers, the evaluation session, and the files a finished or interrupted run leaves.

The summary and trajectory are written in `finally`, so a run ended by an API error, a script
that ran out or Ctrl-C is saved and resumable with `--resume RUN_ID`.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.sqlite import SqliteSaver

from kernelwright.agent import remember, runs
from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Deps, Evaluator, Memory, Profiler
from kernelwright.agent.events import EventStream, RunBranched, RunFinished, RunStarted, TrajectoryWriter, _Event
from kernelwright.agent.graph import build_graph
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.agent.state import AgentState, CandidateRecord
from kernelwright.config import Settings
from kernelwright.errors import ExitCode
from kernelwright.harness.options import TimingPlan
from kernelwright.memory import KnowledgeBase
from kernelwright.problems import resolve_problem
from kernelwright.tools.evaluate import eval_options, open_session

log = logging.getLogger(__name__)
RECURSION_LIMIT = 2000


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
def harness_session(config: AgentConfig, settings: Settings) -> Iterator[Evaluator]:
    """The run's EvalSession (warm: the next worker starts while the LLM writes)."""
    plan = TimingPlan(time_cap_s=config.timing_cap_s) if config.timing_cap_s else None
    opts = eval_options(
        settings,
        config.device,
        size=config.size,
        policy=config.policy,
        timing=config.timing,
        timing_plan=plan,
        num_threads=config.num_threads,
        out_dir=config.run_dir / "evidence",
    )
    with open_session(resolve_problem(config.problem), opts, warm=True) as session:
        yield session


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
    }


def run(
    config: AgentConfig,
    models: dict[str, BaseChatModel],
    evaluator: Evaluator,
    *,
    resume: bool = False,
    subscribers: tuple[Callable[[_Event], None], ...] = (),
    scripted: ScriptedSession | None = None,
    hints: tuple[str, ...] = (),
    profiler: Profiler | None = None,
    profiler_missing: str = "ncu (Nsight Compute) was not found",
    memory: Memory | None = None,
) -> RunOutcome:
    """Run (or resume) the graph to its end; the outcome says how it stopped. Memory is `memory`
    when given, else the config's database (`config.memory` off: none)."""
    run_dir = config.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        runs.save_config(config)
    trajectory = TrajectoryWriter(
        run_dir / "trajectory.json", {"run_id": config.run_id, "problem": config.problem, "scripted": config.scripted}
    )
    events = EventStream(config.run_id, start_seq=trajectory.last_seq)
    seen: list[_Event] = []
    consumers: tuple[Callable[[_Event], None], ...] = (trajectory, seen.append, *subscribers)
    for subscriber in consumers:
        events.subscribe(subscriber)
    deps = Deps(models=models, evaluator=evaluator, events=events, profiler=profiler, profiler_missing=profiler_missing)
    deps.hints.extend(hints)
    thread: Any = {
        "configurable": {"thread_id": config.run_id, "agent_config": config, "deps": deps},
        "recursion_limit": RECURSION_LIMIT,
    }
    state: AgentState = {}
    stop = "interrupted"
    finished = False
    with (
        open_memory(config, memory) as deps.memory,
        SqliteSaver.from_conn_string(str(run_dir / "checkpoints.sqlite")) as saver,
    ):
        graph = build_graph(saver)
        snapshot = graph.get_state(thread)
        state = dict(snapshot.values) if snapshot.values else {}  # type: ignore[assignment]
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
            )
        )
        try:
            already_done = resume and bool(state) and not snapshot.next
            if not already_done:
                graph.invoke(None if resume and state else _fresh_state(config, deps), thread)
            after = graph.get_state(thread)
            state = dict(after.values)  # type: ignore[assignment]
            finished = not after.next
            stop = state.get("stop_reason") or ("ended" if finished else f"paused before {', '.join(after.next)}")
        except BaseException as exc:
            state = dict(graph.get_state(thread).values)  # type: ignore[assignment]
            stop = f"interrupted: {getattr(exc, 'message', None) or type(exc).__name__}"
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
