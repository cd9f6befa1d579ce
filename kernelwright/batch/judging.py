"""Judge one problem's candidates: the handler a Ray task runs per task, and what a local judge
worker (`ahead.JudgeWorker`) runs per task with the work it did ahead.

One `EvalSession` per problem: the reference runs once, candidates are judged in groups of
`JudgeSpec.parallel_builds` (a group is built in parallel, or found built ahead, then judged one
by one), and each result is emitted as soon as its group is done. A problem whose reference or
baselines fail, or that this machine cannot hold, becomes an error line for each of its
candidates; the batch goes on with the next problem.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kernelwright.batch.pool import Emit
from kernelwright.batch.results import BatchRecord, SpeedupFigure
from kernelwright.batch.spec import JudgeSpec, Slot
from kernelwright.errors import EnvironmentProblem, ExitCode, KernelwrightError, ProblemError
from kernelwright.harness.building.prebuild import Prebuilder
from kernelwright.harness.checks.static.analysis import detect_backend
from kernelwright.harness.result import EvalResult
from kernelwright.harness.session import EvalSession
from kernelwright.problems import Problem, load_problem_file

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")


def staged_name(rel: str) -> str:
    """A candidate's file name in the staging folder (and its evidence folder's): readable, and
    unique per problem even when two layouts flatten to the same words."""
    readable = _UNSAFE.sub("_", rel.removesuffix(".py")).strip("_") or "candidate"
    return f"{readable}_{hashlib.sha1(rel.encode()).hexdigest()[:6]}"


def problem_folder(qualified: str) -> str:
    return qualified.replace("/", "__")


def _problem_file(task: dict[str, Any], root: Path) -> Problem:
    """The task's problem: its own file when it is here and unchanged, else the source the task
    carries, written under `root` (a Ray task on another machine)."""
    path = Path(task["problem_path"])
    if path.is_file():
        problem = load_problem_file(path)
        if problem.sha256 == task["problem_sha256"]:
            return problem
    level = task.get("level")
    folder = root / "problems" / (f"level{level}" if level else "nolevel")
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / path.name
    copy.write_text(task["problem_source"])
    return load_problem_file(copy)


def _stage(candidates: list[dict[str, Any]], folder: Path) -> list[Path]:
    """Each candidate's source (read when the batch was planned) as a file of its own: what is
    judged is exactly what was hashed, even if the original changes meanwhile. A file already
    staged with that source is left alone (a build ahead may be reading it); another is
    replaced whole, never rewritten in place."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for candidate in candidates:
        path = folder / f"{staged_name(candidate['rel'])}.py"
        try:
            same = path.read_text() == candidate["source"]
        except (OSError, UnicodeDecodeError):
            same = False
        if not same:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(candidate["source"])
            tmp.replace(path)
        paths.append(path)
    return paths


def runnable_here(spec: JudgeSpec, candidate: dict[str, Any]) -> bool:
    """Whether the candidate can be judged on the batch's device (a CUDA or Triton one needs a GPU)."""
    return not (spec.device == "cpu" and detect_backend(candidate["source"]) in ("cuda", "triton"))


def stage_task(task: dict[str, Any], stage_root: Path, spec: JudgeSpec) -> tuple[Problem, list[Path]]:
    """The task's problem and its candidates that can run here, as staged files."""
    problem = _problem_file(task, stage_root)
    runnable = [c for c in task["candidates"] if runnable_here(spec, c)]
    return problem, _stage(runnable, stage_root / "candidates" / problem_folder(task["problem"]))


@dataclass
class OpenedAhead:
    """A task's session, opened while the worker judged the task before it."""

    session: EvalSession
    head_start_s: float
    """How long it was open before its task began."""


class Ahead(Protocol):
    """What a local judge worker did ahead of a task (`ahead.JudgeWorker`)."""

    def take_session(self, task: dict[str, Any], say: Callable[[str], None]) -> OpenedAhead | None:
        """The task's session if it was opened ahead (its progress now goes to `say`)."""
        ...

    def open_next(self, task: dict[str, Any]) -> None:
        """`task`'s session is open: open the next task's behind it."""
        ...

    def judging(self, candidates: list[Path]) -> None:
        """These are built and judged now: not ahead any more."""
        ...

    @property
    def prebuilder(self) -> Prebuilder | None:
        """The builds ahead: the session skips what they built and waits for what they build."""
        ...

    def figures(self, candidate: Path) -> dict[str, float]:
        """Seconds of work done ahead for this candidate (`BatchRecord.ahead`)."""
        ...


SPARES_PER_PROBLEM = 6  # candidate workers warmed up at once for a problem (memory permitting)


def spares_for(candidates: int) -> int:
    """How many candidate workers to start ahead for a problem with this many candidates: their
    start (interpreter, torch, the baselines' compile: seconds each) then overlaps instead of
    coming before each candidate in turn."""
    return max(1, min(SPARES_PER_PROBLEM, candidates))


def record_from_result(record: BatchRecord, result: EvalResult, evidence: str | None) -> BatchRecord:
    """The results line of one judged candidate (the full EvalResult stays in its evidence file)."""
    return record.model_copy(
        update={
            "verdict": result.verdict.value,
            "reason": result.reason.value if result.reason else None,
            "message": result.message[:600],
            "exit_code": result.exit_code,
            "speedups": {
                name: SpeedupFigure(ratio=s.ratio, ci_low=s.ci_low, ci_high=s.ci_high)
                for name, s in result.speedups.items()
            },
            "times_ms": {name: stats.median_ms for name, stats in result.timings.items()},
            "seconds": result.phase_seconds.get("total", 0.0),
            "phases": {k: v for k, v in result.phase_seconds.items() if k != "total"},
            "backend": result.backend,
            "hardware": str(result.hardware.get("name", "")),
            "evidence": evidence,
            "build_cached": result.build_cached,
        }
    )


def error_record(record: BatchRecord, exc: BaseException) -> BatchRecord:
    """A candidate its problem could not judge: final for a bad problem file (it will fail the
    same way again), retried by the next run for anything else."""
    if isinstance(exc, KernelwrightError):
        code, text = int(exc.exit_code), exc.one_line()
    else:
        code, text = int(ExitCode.INTERNAL), f"internal error: {type(exc).__name__}: {exc}"
    return record.model_copy(
        update={
            "kind": "problem_error",
            "verdict": None,
            "reason": "problem_error" if isinstance(exc, ProblemError) else "environment" if code == 5 else "error",
            "message": text[:600],
            "exit_code": code,
            "final": isinstance(exc, ProblemError),
        }
    )


def judge_task(init: dict[str, Any], slot: Slot, task: dict[str, Any], emit: Emit) -> None:
    """Judge every candidate of one task (one problem) and emit a `result` message for each."""
    spec = JudgeSpec.model_validate(init["spec"])
    with tempfile.TemporaryDirectory(prefix="kw-batch-") as scratch:
        stage_root = Path(init["stage_dir"]) if init.get("stage_dir") else Path(scratch)
        evidence_root = Path(init["evidence_dir"]) if init.get("evidence_dir") else Path(scratch) / "evidence"
        judge_problem(spec, slot, task, emit, stage_root, evidence_root, ship=bool(init.get("ship_evidence")))


def judge_problem(
    spec: JudgeSpec,
    slot: Slot,
    task: dict[str, Any],
    emit: Emit,
    stage_root: Path,
    evidence_root: Path,
    ship: bool,
    ahead: Ahead | None = None,
) -> None:
    candidates: list[dict[str, Any]] = task["candidates"]
    records = {
        c["key"]: BatchRecord.model_validate(task["stubs"][c["key"]]).model_copy(
            update={"worker": slot.label, "device": spec.device}
        )
        for c in candidates
    }
    pending = dict(records)

    def send(record: BatchRecord, result_json: str | None = None) -> None:
        pending.pop(record.key, None)
        message: dict[str, Any] = {"type": "result", "record": record.model_dump(mode="json")}
        if ship and result_json is not None:
            message["result_json"] = result_json
        emit(message)

    def say(text: str) -> None:
        emit({"type": "status", "problem": task["problem"], "text": text})

    runnable = []
    for candidate in candidates:
        if runnable_here(spec, candidate):
            runnable.append(candidate)
        else:
            needs_gpu = EnvironmentProblem(
                f"{candidate['rel']} is a {detect_backend(candidate['source'])} candidate and needs a GPU"
            )
            send(error_record(records[candidate["key"]], needs_gpu))
    if not runnable:
        return
    folder = problem_folder(task["problem"])
    try:
        problem, paths = stage_task(task, stage_root, spec)
        opened = ahead.take_session(task, say) if ahead is not None else None
        if opened is None:
            options = spec.eval_options(slot, progress=say, out_dir=evidence_root / folder)
            session = EvalSession(problem, options, warm=True, spares=spares_for(len(runnable)))
        else:
            session = opened.session
        if ahead is not None:  # what was built ahead is not built again; what is building is waited for
            session.prebuilder = ahead.prebuilder
        head_start = opened.head_start_s if opened is not None else None
        group = max(1, spec.parallel_builds)
        with session:
            if ahead is not None:
                ahead.open_next(task)
            for start in range(0, len(runnable), group):
                chunk = list(zip(runnable[start : start + group], paths[start : start + group], strict=True))
                if start + group >= len(runnable):
                    session.warm = False  # no worker started ahead after the last group
                if ahead is not None:
                    ahead.judging([path for _, path in chunk])
                session.coming = len(runnable) - start - len(chunk)  # spares kept ready for them too
                results = session.evaluate([path for _, path in chunk])
                for (candidate, path), result in zip(chunk, results, strict=True):
                    result.candidate = candidate["rel"]
                    where = f"evidence/{folder}/{path.stem}/result.json"
                    record = record_from_result(records[candidate["key"]], result, where)
                    if ahead is not None:
                        figures = ahead.figures(path)
                        if head_start is not None:  # on the problem's first result only
                            figures["session"], head_start = round(head_start, 3), None
                        record = record.model_copy(update={"ahead": figures})
                    send(record, result.to_json())
    except (KeyboardInterrupt, SystemExit):
        raise
    except KernelwrightError as exc:
        log.error("%s: %s", task["problem"], exc.one_line())
        for record in list(pending.values()):
            send(error_record(record, exc))
    except Exception as exc:  # a bug: this problem's candidates are retried by the next run
        log.error("%s: internal error\n%s", task["problem"], traceback.format_exc())
        for record in list(pending.values()):
            send(error_record(record, exc))
