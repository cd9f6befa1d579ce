"""The correctness phase: the trials, one command each. The candidate learns a trial's seed only
when it runs, every call has a time limit scaled to the reference's, and each output is compared
in the reference's process and then deleted. The output compared is a copy made right after the
call; when it fails, the worker is asked whether the output was still changing (`settle`:
`checks/settling.py`), which names the failure `lazy_output`."""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

from kernelwright.harness import judge
from kernelwright.harness.checks.static.analysis import CandidateAnalysis
from kernelwright.harness.options import TrialPlan
from kernelwright.harness.phases.context import Context, apply
from kernelwright.harness.result import EvalResult
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.client import CandidateClient, Reply
from kernelwright.harness.workers.jobs import TrialRequest
from kernelwright.harness.workers.messages import CompareReport, Rejection, TrialReport
from kernelwright.harness.workers.process import WorkerProcess

log = logging.getLogger(__name__)


def one_trial(
    ctx: Context, worker: CandidateClient, plan: TrialPlan, repeat: bool, limit: float, workdir: Path
) -> tuple[Reply[TrialReport], CompareReport | None]:
    """Run one trial and compare its output (None when there is nothing to compare): once more
    with files where the CUDA memory handles it was handed over with did not open."""
    for attempt in range(2):
        ipc = ctx.wants_ipc()
        reply = worker.trial(TrialRequest(plan=plan, repeat=repeat, ipc=ipc), limit)
        report = reply.report if reply.ok else None
        if report is None or report.fatal or not judge.needs_comparison(report, ctx.opts.device):
            return reply, None
        comparison = ctx.compare(
            plan,
            workdir / f"candidate_{plan.index}.out",
            workdir / f"candidate_{plan.index}_repeat.out" if repeat else None,
        )
        if not (comparison.ipc_unavailable and ipc and attempt == 0):
            return reply, comparison
        ctx.ipc = False  # not here (or a forged handle): files from now on, this trial again
        log.info("CUDA memory handles did not open (%s): outputs go through files", comparison.ipc_unavailable)
    raise AssertionError("unreachable")


def run_trials(
    ctx: Context, worker: WorkerProcess, path: Path, result: EvalResult, workdir: Path, analysis: CandidateAnalysis
) -> EvalResult | None:
    """Every trial the reference ran; the result when the evaluation ends here (None: go on)."""
    client = CandidateClient(worker)
    skipped = set(ctx.skipped_trials())
    plans = [plan for plan in ctx.trials if plan.index not in skipped]
    refs = ctx.reference_trials()
    call_limit = ctx.call_limit_s()
    result.limits["call_s"] = call_limit
    ctx.opts.say(f"{path.name}: checking correctness on {len(plans)} trials ({call_limit:.0f} s per call at most)")
    constants: list[tuple[bool, bool]] = []
    rejections: list[Rejection] = []
    handed_over = 0
    lazy = False  # a failed output was found still changing: no need to ask again
    start = time.monotonic()

    def phase_ended() -> None:
        result.phase_seconds["correctness"] = time.monotonic() - start
        result.stderr_tail = worker.stderr_tail(3000)

    for k, plan in enumerate(plans):
        repeat = k == 0  # the first trial runs twice: a race shows as two different outputs
        # Triton compiles (and autotunes) at the first call: that call keeps the build's limit.
        jit = k == 0 and analysis.backend == "triton"
        limit = call_limit * (2 if repeat else 1) + (ctx.opts.build_timeout_s if jit else 0.0)
        reply, comparison = one_trial(ctx, client, plan, repeat, limit, workdir)
        early = judge.run_failure(reply.outcome, Reason.CORRECTNESS_TIMEOUT)
        if early is None and reply.report is None:  # a result that could not be read: as a dead worker
            early = judge.unreadable_report("trial")
        if early is not None:
            phase_ended()
            if reply.outcome.timed_out:
                detail = f"trial {plan.index}: no answer within {limit:.0f} s (the per-call limit: {call_limit:.0f} s)"
                early = dataclasses.replace(early, message=detail)
            return apply(result, early)
        report = reply.report
        assert report is not None
        rejections = report.rejections if report.rejections is not None else rejections
        if report.fatal:
            return apply(result, judge.raised(report.fatal))
        if comparison is not None:
            handed_over += comparison.handed_over
            constants.append((comparison.constant_candidate, comparison.constant_reference))
        if comparison is not None and not comparison.passed and not lazy:
            # The output compared was copied right after the call: was it still changing?
            settle = client.settle(call_limit)
            early = judge.run_failure(settle.outcome, Reason.CORRECTNESS_TIMEOUT)
            if early is not None or settle.report is None:
                phase_ended()
                return apply(result, early or judge.unreadable_report("settle"))
            if settle.report.rejections is not None:
                rejections = settle.report.rejections
            lazy = not settle.report.settled
        result.trials.append(judge.trial_result(plan, report, refs[plan.index], comparison, ctx.opts.device))
    phase_ended()
    if constants:
        result.outputs_handed_over = "cuda-ipc" if handed_over else "files"
    apply(result, judge.judge_trials(result.trials, constants, rejections))
    if result.reason == Reason.OUTPUT_MISMATCH and analysis.half_kernels:
        result.message += f"; note: {', '.join(analysis.half_kernels)} compute in half precision in a float32 problem"
    return result if result.verdict != Verdict.CORRECT else None
