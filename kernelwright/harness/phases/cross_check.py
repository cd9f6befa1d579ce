"""The baselines' cross-check: the baselines as timed in the candidate's process against the same
baselines timed in the reference's, which never ran candidate code. A candidate that slows its
baselines (a hook, a patch) inflates its speedup; a busy machine does the same to both sides."""

from __future__ import annotations

import time

from kernelwright.harness import judge
from kernelwright.harness.phases.context import Context, apply
from kernelwright.harness.result import EvalResult
from kernelwright.harness.workers import live
from kernelwright.harness.workers.client import CandidateClient
from kernelwright.harness.workers.process import WorkerProcess


def cross_check_baselines(ctx: Context, worker: WorkerProcess, result: EvalResult) -> None:
    """Slower beside the candidate: the clean ones are timed again with a stand-in for the
    candidate interleaved (what runs between a baseline's calls changes its time), and the
    candidate's side once more; slower beside it every time, the candidate slowed them
    (rejected); otherwise no speedup of this run is reported."""
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
    if still:
        with live.quiet(keep=worker):
            again = CandidateClient(worker).timing(0, ctx.timing_limit_s())
        if again.ok and again.report is not None:
            like = ctx.clean_baselines(spacer_ms=spacer)
            retimed = judge.slowed_baselines({name: fn.stats for name, fn in again.report.result.fns.items()}, like)
            still = [name for name in still if name in retimed and name in judge.slowed_baselines(result.timings, like)]
        else:
            still = []
    apply(result, judge.judge_baselines(result.timings, like, slowed, still))
