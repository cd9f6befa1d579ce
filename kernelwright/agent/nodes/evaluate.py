"""Evaluate: the harness judges the coder's candidates through the run's EvalSession (the next
worker is already warm while the LLM writes; with --width K the K candidates are one batch, built
in parallel). Each candidate is written to candidates/NNN.py and its EvalResult stored under
results/<sha>.json as soon as the harness returns it, so a resumed run never evaluates the same
source twice; it is written to memory at once too, before its event goes out. A draft that did
not build, was incorrect, crashed, timed out or was rejected goes back to the coder to repair
(`coder_retries` times per plan): the most nearly working of the round's drafts, with the
feedback mapped onto it (`feedback.py`); the other drafts' verdicts go with it in short."""

from __future__ import annotations

import inspect
import shutil
import threading
import time
from pathlib import Path
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from kernelwright.agent import budget, remember, runs, techniques
from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import CandidateEvaluated, CandidateWritten
from kernelwright.agent.nodes.coder import round_ideas
from kernelwright.agent.nodes.common import started, stopped_by_user
from kernelwright.agent.nodes.feedback import failure_feedback
from kernelwright.agent.state import AgentState, CandidateRecord, RepairRecord
from kernelwright.harness.result import EvalResult
from kernelwright.harness.verdicts import Verdict

_REPAIR_ORDER = (Verdict.INCORRECT, Verdict.REJECTED, Verdict.CRASHED, Verdict.TIMEOUT, Verdict.BUILD_ERROR)
"""The verdicts a draft goes back to the coder with, the most nearly working first: of a round's
failed drafts, the first in this order is the one repaired."""
DEVICE_PHASES = ("correctness", "work_share", "timing")
"""The harness phases that run on the device: what the GPU-time budget counts."""


def gpu_seconds(result: EvalResult, cached: bool, device: str) -> float:
    """GPU time an evaluation took (a result read back from the run folder costs nothing now)."""
    if device != "cuda" or cached:
        return 0.0
    return sum(result.phase_seconds.get(p, 0.0) for p in DEVICE_PHASES)


def _judge(paths: list[Path], shas: list[str], cfg: AgentConfig, deps: Deps) -> list[tuple[EvalResult, bool]]:
    """(result, read back from the run folder) per candidate; only unseen sources are evaluated.
    Each result is stored as soon as the evaluator decides it where the evaluator says so
    (`on_result`), else when its batch returns: a run killed in the middle of a step's batch
    judges again only what was not decided."""
    stored = [runs.stored_result(cfg.run_dir, sha) for sha in shas]
    todo = [i for i, result in enumerate(stored) if result is None]
    kept: set[int] = set()
    lock = threading.Lock()  # an EvalPool calls from each device's thread; two samples may share a source

    def keep(position: int, result: EvalResult) -> None:
        with lock:
            runs.store_result(cfg.run_dir, shas[todo[position]], result)
            kept.add(position)

    evaluate = deps.evaluator.evaluate
    fresh: list[EvalResult] = []
    if todo and "on_result" in inspect.signature(evaluate).parameters:
        fresh = evaluate([paths[i] for i in todo], on_result=keep)  # type: ignore[call-arg]
    elif todo:
        fresh = evaluate([paths[i] for i in todo])
    for position, (i, result) in enumerate(zip(todo, fresh, strict=True)):
        if position not in kept:
            runs.store_result(cfg.run_dir, shas[i], result)
        stored[i] = result
    return [(result, i not in todo) for i, result in enumerate(stored) if result is not None]


def evaluate(state: AgentState, config: RunnableConfig) -> Command[Literal["coder", "profile", "reviewer", "__end__"]]:
    cfg, deps = AgentConfig.from_runnable_config(config), Deps.from_runnable_config(config)
    halt = stopped_by_user(state, deps)
    if halt is not None:
        return halt
    started(deps, state, "evaluate")
    first = max((c["index"] for c in state.get("candidates", [])), default=0) + 1  # 0: a remembered kernel
    paths, shas = [], []
    for offset, source in enumerate(state.get("drafts") or []):
        path = runs.candidate_path(cfg.run_dir, first + offset)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        paths.append(path)
        shas.append(runs.source_sha(source))
        deps.events.emit(CandidateWritten(index=first + offset, path=str(path), sha256=shas[-1]))
    records: list[CandidateRecord] = []
    best = state.get("best")
    judged = _judge(paths, shas, cfg, deps)
    ideas = round_ideas(state)
    numbers = state.get("draft_ideas") or [0] * len(paths)
    for offset, (result, cached) in enumerate(judged):
        idea = ideas[min(numbers[offset] if offset < len(numbers) else 0, len(ideas) - 1)]
        rec = budget.record(
            result,
            index=first + offset,
            round_=state.get("round", 0),
            attempt=state.get("attempt", 1),
            path=str(paths[offset]),
            target=cfg.target,
            parent=idea["parent"],
        )
        rec["idea"] = idea["plan"]
        if idea.get("also"):
            rec["also"] = list(idea.get("also") or [])
        rec["tags"] = techniques.tags(paths[offset].read_text(), idea["plan"])
        records.append(rec)
        remember.record(cfg, deps, rec, source=paths[offset].read_text(), plan=idea["plan"])
        deps.events.emit(
            CandidateEvaluated(
                index=rec["index"],
                verdict=rec["verdict"],
                reason=rec["reason"],
                message=rec["message"],
                speedups=rec["speedups"],
                beats_target=rec["beats_target"],
                cached=cached,
                parent=rec["parent"],
                also=rec.get("also") or [],
                tags=rec.get("tags") or [],
                idea=rec.get("idea") or "",
                gpu_seconds=gpu_seconds(result, cached, cfg.device),
            )
        )
        if budget.better(rec, best):
            best = rec
            shutil.copyfile(paths[offset], cfg.run_dir / "best.py")
    correct = [r for r in records if r["verdict"] == Verdict.CORRECT.value]
    update: dict[str, object] = {
        "candidates": records,
        "results": {sha: str(cfg.run_dir / "results" / f"{sha}.json") for sha in shas},
        "last_candidate": max(correct, key=budget.score) if correct else records[-1],
        "drafts": [],
        "draft_ideas": [],
        "best": best,
        "repair": None,
        "coder_feedback": "",
        "elapsed_s": time.monotonic() - deps.started,
    }
    if gpu := sum(gpu_seconds(result, cached, cfg.device) for result, cached in judged):
        update["usage"] = {"gpu_s": gpu}
    results = [r for r, _ in judged]
    return Command(goto=_next(results, records, paths, state, cfg, update), update=update)


def _next(
    results: list[EvalResult],
    records: list[CandidateRecord],
    paths: list[Path],
    state: AgentState,
    cfg: AgentConfig,
    update: dict[str, object],
) -> Literal["coder", "profile", "reviewer"]:
    if any(r.verdict == Verdict.CORRECT for r in results):
        return "profile"
    failed = [i for i, r in enumerate(results) if r.verdict in _REPAIR_ORDER]
    if not failed or state.get("attempt", 1) > cfg.coder_retries:
        return "reviewer"  # out of retries: the reviewer sees the round (and explains a hack)
    chosen = min(failed, key=lambda i: (_REPAIR_ORDER.index(results[i].verdict), i))
    source = paths[chosen].read_text()
    numbers = state.get("draft_ideas") or []
    update["repair"] = RepairRecord(
        index=records[chosen]["index"],
        path=str(paths[chosen]),
        feedback=failure_feedback(results[chosen], source, cfg.feedback_chars),
        idea=numbers[chosen] if chosen < len(numbers) else 0,
    )
    others = [f"candidate {records[i]['index']}: {_short(results[i])}" for i in failed if i != chosen]
    update["coder_feedback"] = ("The other drafts of this turn: " + "; ".join(others)) if others else ""
    return "coder"


def _short(result: EvalResult) -> str:
    reason = f" ({result.reason.value})" if result.reason else ""
    return f"{result.verdict.value}{reason}: {result.message.splitlines()[0][:160] if result.message else ''}"
