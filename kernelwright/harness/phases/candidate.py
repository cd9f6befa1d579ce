"""One candidate through the pipeline: rejected before it runs, or built → trials → work share →
timing (with the baselines' cross-check) in a worker of its own; then its channel is checked for
forged lines and its sandbox record added. Re-verification of a suspicious speedup is
`reverify.py`, around this."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelwright.harness import judge
from kernelwright.harness.building.link import broker_link
from kernelwright.harness.checks.static.analysis import CandidateAnalysis
from kernelwright.harness.environment import hardware_summary, library_versions
from kernelwright.harness.phases import build, trials, work_share
from kernelwright.harness.phases.context import Context, apply, redacted
from kernelwright.harness.phases.timing import run_timing
from kernelwright.harness.result import EvalResult, Flag
from kernelwright.harness.sandbox.isolation import write_redacted_copy
from kernelwright.harness.verdicts import Verdict
from kernelwright.harness.workers.client import CandidateClient
from kernelwright.harness.workers.process import WorkerProcess

Acquire = Callable[[], tuple[Path, WorkerProcess]]  # a candidate worker (and its folder) for the next candidate


def start_worker(ctx: Context, workdir: Path) -> WorkerProcess:
    """A candidate worker started without its candidate: it sets up the harness and the baselines,
    then waits for `candidate JSON` on stdin (see `CandidateAssignment`)."""
    workdir.mkdir(parents=True, exist_ok=True)
    job = ctx.job("candidate", workdir)
    return WorkerProcess(job, workdir / "job.json", workdir / "worker.log", ctx.env(), broker_link)


def base_result(ctx: Context, path: Path, source: str, analysis: CandidateAnalysis | None) -> EvalResult:
    atol, rtol = ctx.problem.meta.tolerance()
    return EvalResult(
        problem=ctx.problem.qualified,
        problem_sha256=ctx.problem.sha256,
        candidate=str(path),
        candidate_sha256=hashlib.sha256(source.encode()).hexdigest(),
        verdict=Verdict.CORRECT,
        backend=analysis.backend if analysis else "unknown",
        device=ctx.opts.device,
        size=ctx.opts.size,
        tolerance={"atol": atol, "rtol": rtol},
        hardware=hardware_summary(ctx.opts.device),
        versions=library_versions(),
        flags=[
            Flag(code=f.code, message=f.message, severity=f.severity, line=f.line)
            for f in (analysis.findings if analysis else ())
        ],
    )


def evaluate_one(
    ctx: Context, path: Path, source: str, analysis: CandidateAnalysis, acquire: Acquire
) -> tuple[EvalResult, Path | None]:
    """One candidate's verdict, and the worker folder it used (None when no worker ran)."""
    result = base_result(ctx, path, source, analysis)
    reject = judge.static_rejection(analysis)
    if reject is not None:
        reason, message = reject
        return apply(result, judge.ending(judge.static_rejection_verdict(reason), reason, message)), None
    workdir, started = acquire()
    with started as worker:
        CandidateClient(worker).assign(path)
        result = run_candidate(ctx, worker, path, result, workdir, analysis)
        worker.close_channel(ctx.call_limit_s())
        if worker.forged:
            apply(result, judge.forged_channel(worker.forged))
        apply(result, judge.judge_sandbox(worker.isolation, worker.attempts, ctx.opts.sandbox))
        return redacted(result), workdir


def run_candidate(
    ctx: Context, worker: WorkerProcess, path: Path, result: EvalResult, workdir: Path, analysis: CandidateAnalysis
) -> EvalResult:
    """The phases in order, each ending the evaluation when its verdict is not correct."""
    report = build.run_build(ctx, worker, path, result)
    if report is None:
        return result
    ctx.await_reference()
    with ThreadPoolExecutor(max_workers=1) as reader:  # the libraries' kernels, read while the trials run
        found = reader.submit(work_share.read_own_kernels, ctx, report.builds)
        ended = trials.run_trials(ctx, worker, path, result, workdir, analysis)
        if ended is not None:
            return ended
        request = work_share.ownership(ctx, result, found.result(), analysis)
    shares = work_share.run_work_share(ctx, worker, result, request, analysis)
    if result.verdict != Verdict.CORRECT or not ctx.opts.timing:
        return result
    ctx.opts.say(f"{path.name}: correct; timing against {', '.join(ctx.opts.baselines)}")
    return run_timing(ctx, worker, result, request, shares)


def write_evidence(out_dir: Path, path: Path, source: str, result: EvalResult, workdir: Path | None) -> None:
    folder = out_dir / path.stem
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "candidate.py").write_text(source)
    (folder / "result.json").write_text(result.to_json())
    if workdir is not None:  # never through a link the candidate left there, and without secrets
        write_redacted_copy(workdir / "worker.log", folder / "build-and-run.log")
