"""Judge one problem's candidates: the handler a batch worker (or a Ray task) runs per task.

One `EvalSession` per problem: the reference runs once, candidates are judged in groups of
`JudgeSpec.parallel_builds` (a group is built in parallel, then judged one by one), and each
result is emitted as soon as its group is done. A problem whose reference or baselines fail,
or that this machine cannot hold, becomes an error line for each of its candidates; the batch
goes on with the next problem.
"""

from __future__ import annotations

import hashlib
import logging
import re
import tempfile
import traceback
from pathlib import Path
from typing import Any

from kernelwright.errors import EnvironmentProblem, ExitCode, KernelwrightError, ProblemError
from kernelwright.harness.checks.static.analysis import detect_backend
from kernelwright.harness.result import EvalResult
from kernelwright.harness.session import EvalSession
from kernelwright.problems import Problem, load_problem_file
from kernelwright.tools.batch.pool import Emit
from kernelwright.tools.batch.results import BatchRecord, SpeedupFigure
from kernelwright.tools.batch.spec import JudgeSpec, Slot

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
    judged is exactly what was hashed, even if the original changes meanwhile."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for candidate in candidates:
        path = folder / f"{staged_name(candidate['rel'])}.py"
        path.write_text(candidate["source"])
        paths.append(path)
    return paths


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
        _judge(spec, slot, task, emit, stage_root, evidence_root, ship=bool(init.get("ship_evidence")))


def _judge(
    spec: JudgeSpec, slot: Slot, task: dict[str, Any], emit: Emit, stage_root: Path, evidence_root: Path, ship: bool
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
        backend = detect_backend(candidate["source"])
        if backend in ("cuda", "triton") and spec.device == "cpu":
            needs_gpu = EnvironmentProblem(f"{candidate['rel']} is a {backend} candidate and needs a GPU")
            send(error_record(records[candidate["key"]], needs_gpu))
        else:
            runnable.append(candidate)
    if not runnable:
        return
    folder = problem_folder(task["problem"])
    try:
        problem = _problem_file(task, stage_root)
        paths = _stage(runnable, stage_root / "candidates" / folder)
        options = spec.eval_options(slot, progress=say, out_dir=evidence_root / folder)
        group = max(1, spec.parallel_builds)
        with EvalSession(problem, options, warm=True) as session:
            for start in range(0, len(runnable), group):
                chunk = list(zip(runnable[start : start + group], paths[start : start + group], strict=True))
                if start + group >= len(runnable):
                    session.warm = False  # no worker started ahead after the last group
                results = session.evaluate([path for _, path in chunk])
                for (candidate, path), result in zip(chunk, results, strict=True):
                    result.candidate = candidate["rel"]
                    where = f"evidence/{folder}/{path.stem}/result.json"
                    send(record_from_result(records[candidate["key"]], result, where), result.to_json())
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
