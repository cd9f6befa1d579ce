"""The build phase: the candidate's worker loads it (its extensions built through the harness's
build step), after the baselines it made before any candidate code ran; and, for several
candidates at once, their builds warmed in parallel first."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelwright.errors import EnvironmentProblem, ProblemError
from kernelwright.harness import judge
from kernelwright.harness.building.link import broker_link
from kernelwright.harness.checks.static.analysis import CandidateAnalysis
from kernelwright.harness.phases.context import Context, apply
from kernelwright.harness.result import EvalResult
from kernelwright.harness.verdicts import Reason
from kernelwright.harness.workers.client import CandidateClient
from kernelwright.harness.workers.messages import BuildReport
from kernelwright.harness.workers.process import WorkerProcess


def run_build(ctx: Context, worker: WorkerProcess, path: Path, result: EvalResult) -> BuildReport | None:
    """Wait for the candidate's build; its report, or None when the build ended the evaluation
    (the verdict is then in `result`). Baselines that failed before the candidate was loaded are
    the problem's failure (or the machine's), raised, never the candidate's verdict."""
    reply = CandidateClient(worker).build(ctx.opts.build_timeout_s)
    build = reply.outcome
    result.phase_seconds["build"] = build.seconds
    report = reply.report or BuildReport()  # none, or unreadable: as a report that says nothing
    # Failing before the candidate was loaded is the baselines' failure, not the candidate's.
    before_candidate = build.message is None and "build" not in worker.phases_seen
    if before_candidate or report.prepare_error:
        why = ((report.prepare_error or build.detail).strip() or "no result").splitlines()[-1]
        if build.died == Reason.OUT_OF_MEMORY:
            raise EnvironmentProblem(
                f"{ctx.problem.qualified}: the candidate's worker ran out of memory preparing the baselines ({why})",
                hint="`--size small`, or a machine with more memory",
            )
        raise ProblemError(
            f"{ctx.problem.path}: preparing the baselines ({', '.join(ctx.opts.baselines)}) failed before "
            f"the candidate was loaded: {why}",
            hint="`kernelwright problems run` runs the reference alone; `--baselines eager` skips torch.compile",
        )
    if report.seconds is not None:  # the worker's own clock: importing the candidate (its build)
        result.phase_seconds["load"] = report.seconds
        # Until the candidate's import began: interpreter, torch, harness set-up and baselines
        # (close to zero for a worker started ahead by an EvalSession).
        result.phase_seconds["worker_start"] = max(0.0, build.seconds - report.seconds)
    if report.prepare_s is not None and report.prepare_s > 0:
        result.phase_seconds["baselines_prepare"] = report.prepare_s
    result.stderr_tail = worker.stderr_tail(3000)
    early = judge.build_failure(build, report, worker.stderr_tail(400_000))
    if early is not None:
        apply(result, early)
        return None
    result.build_cached = all(b.cached for b in report.builds) if report.builds else None
    ctx.opts.say(f"{path.name}: built in {build.seconds:.1f} s")
    return report


def build_all(ctx: Context, items: list[tuple[Path, CandidateAnalysis]]) -> None:
    """Warm the build cache for every candidate in parallel (one process each, all cores)."""
    jobs = ctx.opts.build_jobs or os.cpu_count() or 1

    def build(item: tuple[Path, CandidateAnalysis]) -> None:
        path, _ = item
        folder = ctx.work / f"build-{path.stem}-{hashlib.sha1(str(path).encode()).hexdigest()[:6]}"
        folder.mkdir(parents=True, exist_ok=True)
        job = ctx.job("build", folder, path)
        with WorkerProcess(job, folder / "job.json", folder / "build.log", ctx.env(), broker_link) as worker:
            CandidateClient(worker).build(ctx.opts.build_timeout_s)

    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(items)))) as pool:
        list(pool.map(build, items))
