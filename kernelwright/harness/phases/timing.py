"""The timing phase: the candidate timed against its baselines in its own process, everything
else paused (`live.quiet`); then the baselines cross-checked against the clean ones, a sample
of the timed calls' outputs checked against the reference, and the timing against the profile
(on a CPU timed with several threads, a disagreement in time is looked at once more with one
thread before it decides: `judge.one_thread`)."""

from __future__ import annotations

from pathlib import Path

from kernelwright.harness import judge
from kernelwright.harness.judge import work_share as share_rules
from kernelwright.harness.judge.one_thread import judge_at_one_thread, needs_one_thread_look
from kernelwright.harness.phases.context import Context, apply
from kernelwright.harness.phases.cross_check import cross_check_baselines
from kernelwright.harness.phases.work_share import one_thread_look, profile_again
from kernelwright.harness.result import EvalResult
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers import live
from kernelwright.harness.workers.client import CandidateClient
from kernelwright.harness.workers.jobs import WorkShareRequest
from kernelwright.harness.workers.messages import Share
from kernelwright.harness.workers.process import WorkerProcess

TIMED_SAMPLES = 4  # outputs of timed calls (a uniform sample) checked against the reference


def cpu_pressure(path: Path = Path("/proc/pressure/cpu")) -> float | None:
    """The share of the last 10 s (in %) some task waited for a CPU (Linux PSI), or None where not
    available. Measured on the 2-core machine: ~1 idle, 31-36 with other sessions' builds and
    tests, ~60 with 2 busy loops beside."""
    try:
        first = path.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    fields = dict(part.split("=", 1) for part in first.split()[1:] if "=" in part)
    try:
        return float(fields["avg10"])
    except (KeyError, ValueError):
        return None


# Flags of a timing whose speedups were withheld because the machine was busy (`judge/timing.py`,
# `phases/cross_check.py`): its comparison of times says nothing either way.
WITHHELD_FOR_LOAD = frozenset({"device_contended", "baselines_disagree"})


def run_timing(
    ctx: Context, worker: WorkerProcess, result: EvalResult, request: WorkShareRequest, shares: list[Share]
) -> EvalResult:
    """Time the candidate and judge what the timing shows; `request` and `shares` are the work
    share's (profiled again here when the timing is too fast for that profile)."""
    with live.quiet(keep=worker) as paused:  # builds and the spare worker wait: quiet cores, quiet device
        reply = CandidateClient(worker).timing(TIMED_SAMPLES, ctx.timing_limit_s())
    result.limits["workers_paused_while_timing"] = float(paused)
    pressure = cpu_pressure()
    if pressure is not None:  # evidence for a reader, no rule reads it (the one-thread look decides)
        result.limits["cpu_pressure_some_avg10"] = pressure
    result.phase_seconds["timing"] = reply.outcome.seconds
    early = judge.run_failure(reply.outcome, Reason.TIMING_TIMEOUT)
    if early is None and reply.report is None:
        early = judge.unreadable_report("timing")
    if early is not None:
        return apply(result, early)
    report = reply.report
    assert report is not None
    apply(result, judge.judge_timing(report))
    # The sampled outputs are compared first: handed over as CUDA memory handles they live only
    # until the worker's next command, and the cross-check below may time the candidate again (its
    # fresh inputs then reuse that memory, and the reference would read another call's values).
    checks = [ctx.compare(item.plan, Path(item.file)) for item in report.timed_outputs]
    result.limits["timed_outputs_checked"] = float(len(checks))
    if result.verdict == Verdict.CORRECT and result.speedups:
        cross_check_baselines(ctx, worker, result, report)
    if result.verdict != Verdict.CORRECT:
        return result
    mismatch = judge.judge_measured_outputs(checks, Reason.TIMED_OUTPUT_MISMATCH, "the timed calls (fresh inputs)")
    if mismatch is not None:
        return apply(result, mismatch)
    if share_rules.profile_disagrees_with_timing(result.timings, result.device, shares, report):
        shares = profile_again(ctx, worker, result, request, shares)
    if result.verdict != Verdict.CORRECT:
        return result
    decision = share_rules.judge_profile_consistency(result.timings, result.device, shares, report)
    untold = any(f.code in WITHHELD_FOR_LOAD for f in result.flags)
    if needs_one_thread_look(decision, result.device, shares, report, untold):
        timed = result.timings["candidate"]
        look = one_thread_look(ctx, worker, result, request, timed.median_ms)
        if result.verdict != Verdict.CORRECT:
            return result
        decision = judge_at_one_thread(decision, look, report, timed)
    return apply(result, decision)
