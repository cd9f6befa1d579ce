"""The run's side of memory (`deps.memory`): every judged candidate written as it is judged,
what the planner's prompt recalls, and a new run's start from the best kernel memory holds for
its problem on this machine.

That remembered kernel is not trusted on another run's numbers: it is written as candidate 0
and evaluated again here, on this machine and harness, before it counts as the best (and, if it
beats the target, before the run accepts it without a single LLM call). A kernel that is no longer
correct is recorded as such (memory stops offering it) and the run starts from scratch.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from kernelwright.agent import budget, runs
from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Deps, Memory
from kernelwright.agent.events import CandidateEvaluated, CandidateWritten, MemoryRecalled, RememberedStart
from kernelwright.agent.problems import problem_of
from kernelwright.agent.state import AgentState, CandidateRecord
from kernelwright.memory import CandidateEntry, Recall, RecallQuery, Speed, candidate_uid, current_machine, error_class


def _query(cfg: AgentConfig, memory: Memory) -> RecallQuery:
    return RecallQuery(
        problem=memory.problem_key(problem_of(cfg.problem)),
        machine=current_machine(cfg.device),
        backend=cfg.backend,
        exclude_run=cfg.run_id,
        budget_tokens=cfg.memory_tokens,
    )


def _speed(rec: CandidateRecord, name: str) -> Speed | None:
    found = rec["speedups"].get(name)
    return Speed(**found) if found else None


def record(cfg: AgentConfig, deps: Deps, rec: CandidateRecord, *, source: str, plan: str, lesson: str = "") -> None:
    """Write one judged candidate to memory now (a run killed later loses nothing judged)."""
    if deps.memory is None:
        return
    problem = problem_of(cfg.problem)
    machine = current_machine(cfg.device)
    sha = runs.source_sha(source)
    deps.memory.problem_key(problem)  # the problem's signature, stored once
    deps.memory.record(
        CandidateEntry(
            uid=candidate_uid(cfg.run_id, rec["index"], sha, machine.name),
            run_id=cfg.run_id,
            index=rec["index"],
            round=rec["round"],
            problem=problem.qualified,
            problem_sha256=problem.sha256,
            backend=cfg.backend,
            device=machine.device,
            machine=machine.name,
            arch=machine.arch,
            source=source,
            source_sha256=sha,
            verdict=rec["verdict"],
            reason=rec["reason"],
            error_class=error_class(rec["verdict"], rec["reason"]),
            message=rec["message"],
            speed_eager=_speed(rec, "eager"),
            speed_compile=_speed(rec, "compile"),
            plan=plan,
            lesson=lesson,
            scripted=cfg.scripted,
        )
    )


def annotate(cfg: AgentConfig, deps: Deps, indexes: list[int], *, digest: str = "", lesson: str = "") -> None:
    if deps.memory is not None and indexes and (digest or lesson):
        deps.memory.annotate(cfg.run_id, indexes, digest=digest or None, lesson=lesson or None)


def recall_text(cfg: AgentConfig, deps: Deps) -> str:
    """The planner prompt's memory section; the event says what was shown and why."""
    if deps.memory is None:
        return "(memory is off for this run)"
    found: Recall = deps.memory.recall(_query(cfg, deps.memory))
    deps.events.emit(
        MemoryRecalled(
            items=[{"ref": i.ref, "tier": i.tier, "kind": i.kind, "why": i.why} for i in found.items],
            left_out=found.left_out,
            tokens=found.tokens,
            budget_tokens=found.budget_tokens,
        )
    )
    return found.text()


def start_from_memory(cfg: AgentConfig, deps: Deps) -> AgentState:
    """A fresh run's state additions when memory holds a correct kernel for this problem on this
    machine and backend: that kernel, re-evaluated as candidate 0 (empty when there is none)."""
    if deps.memory is None:
        return {}
    best = deps.memory.recall(_query(cfg, deps.memory)).best
    if best is None:
        return {}
    path = runs.candidate_path(cfg.run_dir, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(best.source)
    sha = runs.source_sha(best.source)
    deps.events.emit(
        RememberedStart(
            memory_id=best.label,
            uid=best.uid,
            from_run=best.run_id,
            from_index=best.index,
            machine=best.machine,
            outcome_then=best.outcome(),
            path=str(path),
        )
    )
    deps.events.emit(CandidateWritten(index=0, path=str(path), sha256=sha))
    stored = runs.stored_result(cfg.run_dir, sha)
    result = stored or deps.evaluator.evaluate([path])[0]
    if stored is None:
        runs.store_result(cfg.run_dir, sha, result)
    rec = budget.record(result, index=0, round_=0, attempt=0, path=str(path), target=cfg.target)
    where = f"run {best.run_id} candidate {best.index}"
    rec["message"] = f"remembered from {where} ({best.outcome()} then); here: {rec['message']}"[:500]
    plan = f"(the best kernel memory held: {where}) {best.plan}".strip()
    record(cfg, deps, rec, source=best.source, plan=plan, lesson=best.lesson)
    deps.events.emit(
        CandidateEvaluated(
            index=0,
            verdict=rec["verdict"],
            reason=rec["reason"],
            message=rec["message"],
            speedups=rec["speedups"],
            beats_target=rec["beats_target"],
            cached=stored is not None,
        )
    )
    remembered: dict[str, Any] = {
        "memory_id": best.label,
        "uid": best.uid,
        "run_id": best.run_id,
        "index": best.index,
        "machine": best.machine,
        "outcome_then": best.outcome(),
    }
    update: AgentState = {"candidates": [rec], "results": {sha: str(cfg.run_dir / "results" / f"{sha}.json")}}
    update["remembered"] = remembered
    if rec["verdict"] == "correct":
        shutil.copyfile(path, Path(cfg.run_dir) / "best.py")
        update.update({"origin": rec, "start": rec, "best": rec})
    else:
        update["history"] = [
            f"round 0: the kernel memory held ({where}, {best.outcome()} then) is now {rec['verdict']}"
            f"{' (' + rec['reason'] + ')' if rec['reason'] else ''} here; starting without it"
        ]
    return update
