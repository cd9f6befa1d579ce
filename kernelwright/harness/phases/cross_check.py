"""The baselines' cross-check: the baselines as timed in the candidate's process against the same
baselines timed in the reference's, which never ran candidate code. A candidate that slows its
baselines (a hook, a patch) inflates its speedup; a busy machine does the same to both sides."""

from __future__ import annotations

import time

from kernelwright.harness import judge
from kernelwright.harness.phases.context import Context, apply
from kernelwright.harness.result import EvalResult
from kernelwright.harness.timing.stats import TimingStats
from kernelwright.harness.workers import live
from kernelwright.harness.workers.client import CandidateClient
from kernelwright.harness.workers.messages import TimingReport
from kernelwright.harness.workers.process import WorkerProcess


def cross_check_baselines(ctx: Context, worker: WorkerProcess, result: EvalResult, report: TimingReport) -> None:
    """Slower beside the candidate: the clean ones are timed again with a stand-in for the
    candidate interleaved (what runs between a baseline's calls changes its time), and the
    candidate's side once more; slower beside it every time, the candidate slowed them
    (rejected), unless (on the CPU) they agreed with the clean ones at one intra-op thread in some
    look (`judge.agree_at_one_thread`: a stalled thread pool, not the candidate); otherwise no
    speedup of this run is reported. `report`: the timing being checked."""
    started = time.perf_counter()
    clean = ctx.clean_baselines()
    result.phase_seconds["clean_baselines"] = time.perf_counter() - started
    result.clean_baseline_ms = {name: figures.median_ms for name, figures in clean.items()}
    if not judge.disagreeing_baselines(result.timings, clean):
        return
    spacer = result.timings["candidate"].median_ms
    like = ctx.clean_baselines(spacer_ms=spacer)
    slowed = judge.disagreeing_baselines(result.timings, like)
    if not slowed:  # timed again, the clean process agrees: its first figures were the odd ones
        return
    still = [name for name in judge.slowed_baselines(result.timings, like) if name in slowed]
    agrees: dict[str, str] = {}
    looks: list[dict[str, TimingStats]] = []
    if still:
        with live.quiet(keep=worker):
            again = CandidateClient(worker).timing(0, ctx.timing_limit_s())
        if again.ok and again.report is not None:
            like = ctx.clean_baselines(spacer_ms=spacer)
            retimed = judge.slowed_baselines({name: fn.stats for name, fn in again.report.result.fns.items()}, like)
            still = [name for name in still if name in retimed and name in judge.slowed_baselines(result.timings, like)]
            # Slower in every look with the configured threads: timed with one thread on both sides
            # (each timing's `one_thread` figures), a stalled pool agrees, a hook does not.
            looks = [look for look in (report.one_thread, again.report.one_thread) if look]
            agrees = judge.agree_at_one_thread(still, looks, like)
        else:
            still = []
    apply(result, judge.judge_baselines(result.timings, like, slowed, still, agrees, looks))
