"""The reference's phase, once per session: its worker started and its trials run (the expected
outputs stay in that process), then (on CUDA, and on the CPU where they are small) the clean
baselines made there ahead of any timing."""

from __future__ import annotations

import logging

from kernelwright.harness import capacity
from kernelwright.harness.options import EvalOptions, TrialPlan, plan_trials
from kernelwright.harness.phases.context import Context
from kernelwright.harness.workers.client import ReferenceClient
from kernelwright.harness.workers.process import Outcome, WorkerProcess
from kernelwright.problems import Problem
from kernelwright.problems.footprint import Footprint, measure

log = logging.getLogger(__name__)


def make_trials(problem: Problem, opts: EvalOptions, base_seed: int) -> list[TrialPlan]:
    return plan_trials(opts.trials, len(measure(problem, opts.size).variants), base_seed)


def run_reference(ctx: Context) -> tuple[WorkerProcess | None, Outcome]:
    """Start the reference's worker and wait for its trials; it then stays, to compare outputs."""
    ctx.data_dir.mkdir(parents=True, exist_ok=True)
    job = ctx.job("reference", ctx.data_dir)
    worker = WorkerProcess(job, ctx.data_dir / "reference_job.json", ctx.data_dir / "reference.log", ctx.env())
    outcome = ReferenceClient(worker).trials(ctx.opts.run_timeout_s).outcome
    if not outcome.ok:
        worker.close()
        return None, outcome
    return worker, outcome


def prepares_ahead(opts: EvalOptions, footprint: Footprint | None = None) -> bool:
    """Whether the reference's process makes the clean baselines right after the reference and
    keeps them: on CUDA, where their input sets live on the device; on the CPU when what they hold
    is small (`capacity.keeps_baselines_on_host`: beside the comparisons larger ones would hold the
    host memory those need, so there each timing of them makes its own, torch.compile included)."""
    if not (opts.timing and opts.baselines):
        return False
    if opts.device == "cuda":
        return True
    return footprint is not None and capacity.keeps_baselines_on_host(footprint, opts, capacity.usable_memory())


def prepare_baselines(ctx: Context) -> None:
    """Have the reference's process make the baselines it will time (compile included) now, while
    candidates are built and checked (or, in a session opened ahead, while the previous problem is
    judged): only the timing is left for `clean_baselines`, under `live.quiet`. Every quiet phase
    pauses this process like any other worker. Runs on the session's thread after the reference."""
    assert ctx.pending is not None
    oracle, outcome = ctx.pending.result()
    if oracle is None or not outcome.ok:
        return
    with ctx.lock:
        answer = ReferenceClient(oracle).prepare(ctx.opts.run_timeout_s).outcome
        if not answer.ok:
            ctx.prepare_failed = answer.detail or "no answer"
    if not answer.ok and not ctx.closing:
        log.warning(
            "%s: preparing the baselines in the reference's process failed: %s", ctx.problem.qualified, answer.detail
        )
