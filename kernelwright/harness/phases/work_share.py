"""The work-share phase: which kernels are the candidate's (read from the libraries it built),
then a profile on the default shapes and on one trial of every shape variant, whose outputs are
checked like any other; and, when the timing later looks too fast for that profile, the default
shapes profiled once more."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from kernelwright.harness import judge
from kernelwright.harness.checks.static.analysis import CandidateAnalysis
from kernelwright.harness.checks.symbols import OwnKernels, own_kernels
from kernelwright.harness.judge import Decision
from kernelwright.harness.judge import work_share as share_rules
from kernelwright.harness.options import TrialPlan
from kernelwright.harness.phases.context import Context, apply
from kernelwright.harness.result import EvalResult, Flag
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers import live
from kernelwright.harness.workers.client import CandidateClient, Reply
from kernelwright.harness.workers.jobs import OneThreadRequest, WorkShareRequest
from kernelwright.harness.workers.messages import BuildRecord, OneThreadReport, Share, WorkShareReport
from kernelwright.harness.workers.process import WorkerProcess


def read_own_kernels(ctx: Context, builds: list[BuildRecord]) -> OwnKernels | None:
    """The CUDA kernels defined in the libraries the candidate built (read here, not in the worker
    the candidate runs in: `nm` and `c++filt`, a few tens of ms, run while the trials do); None
    on the CPU."""
    libraries = [Path(b.library) for b in builds if b.library]
    return own_kernels(libraries, ctx.opts.build_cache) if ctx.opts.device == "cuda" else None


def ownership(
    ctx: Context, result: EvalResult, found: OwnKernels | None, analysis: CandidateAnalysis
) -> WorkShareRequest:
    """Which kernels are the candidate's: its CUDA kernels as `read_own_kernels` found them, its
    Triton kernels by name. When a library could not be read, the source's kernel names stand in,
    and the result says so."""
    request = WorkShareRequest(plans=[], own_names=list(analysis.triton_kernels), own_ops=list(analysis.own_ops))
    if found is not None and found.read:
        request.own_exact = list(found.names)
    else:
        request.own_names += list(analysis.cuda_kernels)
        if found is not None:
            result.flags.append(Flag(code="own_kernels_from_source", message=found.note))
    if found is not None and found.excluded:
        names = ", ".join(found.excluded[:3])
        result.flags.append(
            Flag(
                code="kernel_in_torch_namespace", message=f"kernels in PyTorch's namespaces never count as own: {names}"
            )
        )
    return request


def run_work_share(
    ctx: Context, worker: WorkerProcess, result: EvalResult, request: WorkShareRequest, analysis: CandidateAnalysis
) -> list[Share]:
    """Profile on the default shapes and on one trial of every shape variant; the outputs of the
    profiled calls are checked like any other. The shares profiled (none when it ended here)."""
    firsts: dict[int | None, TrialPlan] = {}
    for plan in ctx.trials:
        if plan.contiguous and plan.index not in ctx.skipped_trials():
            firsts.setdefault(plan.variant, plan)
    plans = list(firsts.values())
    request.plans = plans
    limit = max(ctx.opts.run_timeout_s, 40 * len(plans) * ctx.call_limit_s())
    reply = profile(worker, request, min(limit, 4 * ctx.opts.run_timeout_s))
    result.phase_seconds["work_share"] = reply.outcome.seconds
    early = judge.run_failure(reply.outcome, Reason.CORRECTNESS_TIMEOUT)
    if early is None and reply.report is None:
        early = judge.unreadable_report("workshare")
    if early is not None:
        apply(result, early)
        return []
    report = reply.report
    assert report is not None
    if report.fatal:
        apply(result, judge.raised(report.fatal))
        return []
    apply(result, judge.judge_trials(result.trials, [], report.rejections))
    if result.verdict != Verdict.CORRECT:
        return []
    shares = report.shares
    if not profiled_outputs_agree(ctx, result, shares, "the profiled calls"):
        return shares
    flagged = [f.code for f in result.flags]

    def decide(judged: Sequence[Share]) -> Decision:
        return judge.judge_work_share(judged, analysis, ctx.opts.policy, len(result.trials), flagged)

    def again(plans: list[TrialPlan]) -> list[Share]:
        return profile_shapes(ctx, worker, result, request.model_copy(update={"plans": plans}))

    decision, shares = judged_twice_if_noisy(shares, ctx.opts.policy, decide, again)
    if result.verdict == Verdict.CORRECT:  # the second profile's outputs were compared too
        apply(result, decision)
    return shares


def judged_twice_if_noisy(
    shares: list[Share],
    policy: str,
    decide: Callable[[Sequence[Share]], Decision],
    again: Callable[[list[TrialPlan]], list[Share]],
) -> tuple[Decision, list[Share]]:
    """The work share's decision, taken twice when its evidence is within noise: a `torch_fallback`
    whose shapes are past the library threshold by less than `WORK_SHARE_NOISE` has those shapes
    profiled once more (`again`), and each is judged on the profile further from the threshold
    (rejected only when both are past it). Evidence beyond noise is decided at once. Returns the
    decision and the shares it was taken on."""
    decision = decide(shares)
    if decision.reason != Reason.TORCH_FALLBACK:
        return decision, shares
    noisy = judge.fallback_within_noise(shares, policy)
    if not noisy:
        return decision, shares
    second = again([shares[i].plan for i in noisy])
    if not second:  # the second profile failed or its outputs did not match: the first stands
        return decision, shares
    merged = judge.with_second_profile(shares, second, policy)
    decided = decide(merged)
    still = "still past it" if decided.reason == Reason.TORCH_FALLBACK else "within it"
    flag = Flag(
        code="profiled_again",
        message=f"the library share was past the torch_fallback threshold by less than noise allows on "
        f"{len(noisy)} shape(s): profiled again, {still}",
    )
    return replace(decided, flags=(*decided.flags, flag)), merged


def profile_shapes(ctx: Context, worker: WorkerProcess, result: EvalResult, request: WorkShareRequest) -> list[Share]:
    """`request`'s plans profiled once more, their outputs checked like the first profile's (a
    mismatch is the verdict); the shares, or none when profiling failed or the outputs differ."""
    reply = profile(worker, request, 4 * ctx.opts.run_timeout_s)
    report = reply.report if reply.ok else None
    second = report.shares if report is not None and not report.fatal else []
    if not second or any(share.error is not None for share in second):
        return []
    if not profiled_outputs_agree(ctx, result, second, "the profiled calls (again)"):
        return []
    return second


def profile(worker: WorkerProcess, request: WorkShareRequest, timeout_s: float) -> Reply[WorkShareReport]:
    """The candidate's worker profiles `request`'s plans; a profile is a measurement too: the
    next worker and builds wait (`live.quiet`)."""
    with live.quiet(keep=worker):
        return CandidateClient(worker).workshare(request, timeout_s)


def profiled_outputs_agree(ctx: Context, result: EvalResult, shares: list[Share], what: str) -> bool:
    """The profiled calls' outputs compared with the reference (a mismatch is the verdict)."""
    checks = [ctx.compare(s.plan, Path(s.file)) for s in shares if s.file is not None]
    decision = judge.judge_measured_outputs(checks, Reason.PROFILED_OUTPUT_MISMATCH, what)
    apply(result, decision)
    return decision is None


def profile_again(
    ctx: Context, worker: WorkerProcess, result: EvalResult, request: WorkShareRequest, shares: list[Share]
) -> list[Share]:
    """The default shapes profiled once more, the profile being slower than the timing (a busy
    machine slows a profile; a candidate that works less when not watched is slower when profiled
    every time): its outputs are checked like the first profile's, and the faster of the two
    profiles is the one judged (`faster_profile`: on the CPU each extension function's fastest
    call too). The shares to judge (the first ones if the second profile failed)."""
    second = profile_shapes(ctx, worker, result, request.model_copy(update={"plans": request.plans[:1]}))
    judged, flag = with_second_default_profile(shares, second)
    if flag is not None:
        result.flags.append(flag)
    return judged


def with_second_default_profile(first: list[Share], second: list[Share]) -> tuple[list[Share], Flag | None]:
    """The shares to judge the timing against once the default shapes were profiled again
    (`second`, empty when that failed: the first stand), and the flag that says so."""
    if not first or not second:
        return first, None
    first_ms, second_ms = share_rules.profiled_ms(first[0]), share_rules.profiled_ms(second[0])
    flag = Flag(
        code="profiled_again",
        message=f"profiled at {first_ms:.4f} ms per call, which the timing disagrees with: profiled again, "
        f"{second_ms:.4f} ms per call",
    )
    return [share_rules.faster_profile(first[0], second[0]), *first[1:]], flag


def one_thread_look(
    ctx: Context, worker: WorkerProcess, result: EvalResult, request: WorkShareRequest, median_ms: float
) -> OneThreadReport | None:
    """The CPU's one-thread look (`judge.one_thread`): the default shapes profiled and the candidate
    timed alone, both with one intra-op thread, everything else paused; both calls' outputs are
    checked like any other (a mismatch, a crash or a hang is the verdict). The report, or None
    when the evaluation ended here or the worker sent none."""
    look = OneThreadRequest(shapes=request.model_copy(update={"plans": request.plans[:1]}), median_ms=median_ms)
    with live.quiet(keep=worker):
        reply = CandidateClient(worker).one_thread(look, 4 * ctx.opts.run_timeout_s)
    result.phase_seconds["one_thread_look"] = reply.outcome.seconds
    early = judge.run_failure(reply.outcome, Reason.TIMING_TIMEOUT)
    if early is not None:
        apply(result, early)
        return None
    report = reply.report
    if report is None:
        return None
    apply(result, judge.judge_trials(result.trials, [], report.rejections))
    if result.verdict != Verdict.CORRECT:
        return None
    shares = [report.share] if report.share is not None and report.share.file is not None else []
    if shares and not profiled_outputs_agree(ctx, result, shares, "the profiled calls (one thread)"):
        return None
    if report.timed_output is not None:
        check = ctx.compare(report.timed_output.plan, Path(report.timed_output.file))
        mismatch = judge.judge_measured_outputs([check], Reason.TIMED_OUTPUT_MISMATCH, "the timed calls (one thread)")
        if mismatch is not None:
            apply(result, mismatch)
            return None
    return report
