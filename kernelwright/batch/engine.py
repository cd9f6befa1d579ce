"""Drive a batch: plan its tasks against the results file (skipping what is done), run them on
local workers or Ray, append every result as it arrives, then write the report.

`plan_judge` is judge mode's planner; optimise mode plans in `agent/batch.py` and runs through
the same `execute`. One task is one problem; a task's `stubs` are the results lines it owes
(one per candidate, or one for the optimisation), so a task that dies still leaves a line for
each of them (not final: the next run tries again).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kernelwright.batch.events import (
    BatchFinished,
    BatchStarted,
    Listener,
    ProblemStarted,
    ResultRecorded,
    WorkerStatus,
)
from kernelwright.batch.layout import match_candidates
from kernelwright.batch.pool import Handler, LocalPool, MakeWorker, Message
from kernelwright.batch.problem_set import ProblemSet
from kernelwright.batch.results import (
    BatchRecord,
    Manifest,
    ResultsFile,
    candidate_key,
    done_keys,
    latest,
)
from kernelwright.batch.spec import JudgeSpec, Slot
from kernelwright.errors import ExitCode, ProblemError
from kernelwright.problems import Problem


@dataclass
class BatchPlan:
    mode: Literal["judge", "optimize"]
    out: Path
    manifest: Manifest
    tasks: list[dict[str, Any]]
    keys: list[str] = field(default_factory=list)
    """Every key of the batch, done or not: the exit code covers them all."""
    already_done: int = 0
    problem_errors: list[ProblemError] = field(default_factory=list)

    @property
    def to_do(self) -> int:
        return sum(len(t["stubs"]) for t in self.tasks)


@dataclass
class Runner:
    """Where the tasks run: local worker subprocesses (`module`, one per slot) or Ray (`handler`)."""

    slots: list[Slot]
    module: str
    handler: Handler
    ray_address: str | None = None
    gpu: bool = False
    """Ray: each actor takes one GPU (else a share of the CPUs)."""
    env: dict[str, str] = field(default_factory=dict)
    make_worker: MakeWorker | None = None
    """Ray: builds each actor's handler around its inbox, as the worker module does (a handler
    that looks ahead); None: `handler` as it is."""

    @property
    def labels(self) -> list[str]:
        return [f"ray ({self.ray_address})"] if self.ray_address else [s.label for s in self.slots]


@dataclass
class BatchOutcome:
    exit_code: int
    done: int
    to_do: int
    correct: int
    seconds: float
    report: Path | None = None


def problem_fields(problem: Problem) -> dict[str, Any]:
    return {
        "problem": problem.qualified,
        "problem_sha256": problem.sha256,
        "level": problem.level,
        "problem_id": problem.id,
    }


def problem_task(problem: Problem, number: int) -> dict[str, Any]:
    """A task's problem part: its path, and its source for Ray nodes that do not share files."""
    return {
        "id": number,
        **problem_fields(problem),
        "problem_path": str(problem.path),
        "problem_source": problem.source,
        "stubs": {},
    }


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def plan_judge(problem_set: ProblemSet, candidates_dir: Path, spec: JudgeSpec, out: Path) -> BatchPlan:
    """One task per problem with candidates still to judge; a candidate is done when its latest
    results line is final and was judged on the same problem and candidate content."""
    matched = match_candidates(problem_set.problems, candidates_dir)
    manifest = Manifest(
        mode="judge",
        judged_with=spec.judged_with(),
        problems=[p.summary() for p in problem_set.problems],
        candidates_dir=str(candidates_dir.resolve()),
        unmatched=[list(u) for u in matched.unmatched],
        problem_errors=[e.message for e in problem_set.errors],
    )
    manifest.check_compatible(Manifest.load(out), out)
    done = done_keys(ResultsFile(out).read())
    plan = BatchPlan("judge", out, manifest, [], problem_errors=list(problem_set.errors))
    for problem in problem_set.problems:
        task = problem_task(problem, len(plan.tasks))
        candidates = []
        for candidate in matched.by_problem.get(problem.qualified, []):
            key = candidate_key(problem.qualified, candidate.rel)
            plan.keys.append(key)
            source = candidate.path.read_text(errors="replace")
            sha = _sha(source)
            earlier = done.get(key)
            if earlier and earlier.candidate_sha256 == sha and earlier.problem_sha256 == problem.sha256:
                plan.already_done += 1
                continue
            candidates.append({"key": key, "rel": candidate.rel, "source": source, "sample": candidate.sample})
            task["stubs"][key] = BatchRecord(
                kind="candidate",
                key=key,
                **problem_fields(problem),
                candidate=candidate.rel,
                candidate_sha256=sha,
                sample=candidate.sample,
            ).model_dump(mode="json")
        if candidates:
            task["candidates"] = candidates
            plan.tasks.append(task)
    return plan


class Collector:
    """Worker messages -> results lines, evidence files and events (thread-safe)."""

    def __init__(self, out: Path, results: ResultsFile, listener: Listener, to_do: int) -> None:
        self.out, self.results, self.listener, self.to_do = out, results, listener, to_do
        self.done = 0
        self.correct = 0
        self.seen: set[str] = set()
        self._lock = threading.Lock()
        # A worker's own name, from its `ready` message (a Ray actor names its node and GPU, which
        # Ray chose; the driver's slot label only numbers it): its status lines carry that name.
        self._names: dict[int, str] = {}

    def __call__(self, slot: Slot, message: Message) -> None:
        kind = message.get("type")
        if kind == "result":
            self._result(BatchRecord.model_validate(message["record"]), message.get("result_json"))
        elif kind == "task_started":
            self.listener(
                ProblemStarted(
                    worker=str(message.get("worker", slot.label)),
                    problem=str(message.get("problem", "")),
                    to_do=int(message.get("count", 0)),
                )
            )
        elif kind == "status":
            name = self._names.get(slot.index, slot.label)
            self.listener(WorkerStatus(worker=name, problem=message.get("problem", ""), text=message["text"]))
        elif kind == "ready":
            self._names[slot.index] = str(message.get("worker", slot.label))
            self.listener(WorkerStatus(worker=self._names[slot.index], text="ready"))
        elif kind == "task_failed":
            task = message["task"]
            detail = str(message.get("detail", "")).strip()
            for key, stub in task.get("stubs", {}).items():
                if key not in self.seen:
                    record = BatchRecord.model_validate(stub).model_copy(
                        update={
                            "kind": "problem_error",
                            "reason": "worker_died",
                            "message": f"the batch worker ended before this was judged: {detail[-400:]}",
                            "exit_code": int(ExitCode.INTERNAL),
                            "final": False,
                            "worker": slot.label,
                        }
                    )
                    self._result(record, None)

    def _result(self, record: BatchRecord, result_json: str | None) -> None:
        if result_json and record.evidence:
            path = self.out / record.evidence
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(result_json)
            tmp.replace(path)
        with self._lock:
            self.results.append(record)
            self.seen.add(record.key)
            self.done += 1
            self.correct += int(record.correct)
            event = ResultRecorded(
                worker=record.worker, record=record, done=self.done, to_do=self.to_do, correct=self.correct
            )
        self.listener(event)


def exit_code_of(plan: BatchPlan, records: list[BatchRecord]) -> int:
    """The highest code over every key of the batch (done before or now) and its bad problem files."""
    last = latest(records)
    codes = [last[k].exit_code for k in plan.keys if k in last]
    if plan.problem_errors:
        codes.append(int(ExitCode.USAGE))
    return max(codes, default=0)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def execute(
    plan: BatchPlan,
    runner: Runner,
    init: dict[str, Any],
    listener: Listener,
    *,
    write_report: Callable[[Path], Path] | None = None,
) -> BatchOutcome:
    """Run the plan's tasks; every result is in results.jsonl the moment it arrives. (A Ray
    instance started here takes this process's cores; the runner's slots say how many actors,
    `ray_runner.actor_plan`.)"""
    out = plan.out
    out.mkdir(parents=True, exist_ok=True)
    results = ResultsFile(out)
    invocation: dict[str, Any] = {
        "started": _now(),
        "workers": runner.labels,
        "to_do": plan.to_do,
        "already_done": plan.already_done,
        "pid": os.getpid(),
    }
    earlier = Manifest.load(out)
    plan.manifest.invocations = [*(earlier.invocations if earlier else []), invocation]
    plan.manifest.save(out)
    listener(
        BatchStarted(
            mode=plan.mode,
            out=str(out),
            problems=len(plan.manifest.problems),
            to_do=plan.to_do,
            already_done=plan.already_done,
            workers=runner.labels,
            backend="ray" if runner.ray_address else "local",
        )
    )
    collector = Collector(out, results, listener, plan.to_do)
    start = time.monotonic()
    status = "interrupted"
    try:
        if plan.tasks and runner.ray_address:
            from kernelwright.batch.ray_runner import run_on_ray

            run_on_ray(
                runner.ray_address,
                runner.handler,
                init,
                plan.tasks,
                collector,
                gpu=runner.gpu,
                make_worker=runner.make_worker,
                workers=len(runner.slots) or None,
                threads=runner.slots[0].threads if runner.slots else None,
            )
        elif plan.tasks:
            LocalPool(runner.module, runner.slots, init, out / "logs", runner.env).run(plan.tasks, collector)
        status = "finished"
    finally:
        seconds = time.monotonic() - start
        invocation.update(ended=_now(), seconds=round(seconds, 2), done=collector.done, status=status)
        plan.manifest.save(out)
    code = exit_code_of(plan, results.read())
    report = write_report(out) if write_report is not None else None
    listener(
        BatchFinished(
            done=collector.done,
            to_do=plan.to_do,
            correct=collector.correct,
            seconds=seconds,
            exit_code=code,
            report=str(report) if report else None,
        )
    )
    return BatchOutcome(code, collector.done, plan.to_do, collector.correct, seconds, report)
