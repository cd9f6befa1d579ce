"""The work-share rules: whose kernels did the work on every shape profiled (the candidate's own,
or PyTorch's library ops), on which streams, in which precision; and whether what was profiled
is what was timed (a candidate that works less when not watched)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from kernelwright.harness.checks.static.analysis import CandidateAnalysis
from kernelwright.harness.judge.decision import Decision, ending
from kernelwright.harness.result import Flag
from kernelwright.harness.timing.stats import TimingStats
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.messages import Share, TimingReport
from kernelwright.problems.candidate.kernel_names import base_name

# Library ops (aten, cuBLAS, cuDNN) inside the candidate's forward may take at most this share of
# the reference's whole forward: more, and PyTorch is doing the main computation.
MAX_LIBRARY_SHARE = 0.5
# Policy engineering: the candidate's own kernels must take at least this share of one copy of the
# output per call (an epilogue over a cuBLAS GEMM's output does; a kernel run on one element
# beside PyTorch's op does not), or of the candidate's whole time, whichever is less.
ENGINEERING_MIN_OUTPUT_PASS = 0.25
ENGINEERING_MIN_OWN_SHARE = 0.05

# A candidate whose timed calls are this much faster than the kernels the profiler saw per call
# is doing something else when it is not watched (profiled device time excludes launch gaps and
# runs with a warm L2, so an honest kernel is timed slower than profiled, not faster).
PROFILE_MISMATCH_RATIO = 0.5
PROFILE_MISMATCH_MIN_MS = {"cuda": 0.005, "cpu": 1.0}
"""Below this per call, profiler overhead (and on the CPU, a loaded machine) dominates what the
profile reads, so the rule does not judge. The GPU reads it on the profiled side (device time,
which host load does not inflate). The CPU reads it on the timed side: a busy CPU inflates a
profile, so a floor read there is crossed by noise (#28: an honest mse_loss timed at 0.30 ms a
call, both profiles 1.72 ms on a 6-fold oversubscribed 2-core CPU, was rejected). What the CPU
gives up below the floor is covered by rules that need no floor: a candidate that works less when
not profiled calls its extension fewer times per forward (counted exactly: `skipped_calls`)
or its functions' fastest calls shrink (`_own_work_shrank`), both judged at any size."""
# The extension's calls per forward while timed must reach this share of those while profiled.
PROFILE_OWN_SHARE_RATIO = 0.5
# On the CPU: an extension function's fastest timed call must take at least this share of its
# fastest profiled call (honest: about 1; the profiler's overhead on ATen ops the function calls
# inside can lower it, which the absolute floor below absorbs)...
OWN_WORK_RATIO = 0.25
# ...judged only for functions whose fastest profiled call took this long, and only when the
# work missing while timed is at least this much (below it, call overhead and timer noise)...
OWN_WORK_MIN_S = 5e-6
# ...after taking off the profiler's cost of each ATen op called inside (measured 1-3 us on a
# loaded 2-core CPU; counted generously).
PROFILER_OP_OVERHEAD_S = 10e-6
WORK_SHARE_NOISE = 1.5
"""How far a profiled time may be off by noise alone: a library share judged against its
threshold within this factor (strict: 50% to 75% of the reference; engineering: own work between
the minimum / 1.5 and the minimum) is profiled once more before it is rejected, and rejected only
when the second profile says so too. Each profile already keeps the fastest of 5 rounds of ~2 ms,
so noise must slow all of them; a loaded 2-core CPU was seen slowing a round by 1.3x. A fallback
that does PyTorch's whole job reads about 1.0 of the reference (x2 the threshold) and is rejected
at once."""


def judge_work_share(
    shares: Sequence[Share], analysis: CandidateAnalysis, policy: str, trials: int, flagged: Collection[str] = ()
) -> Decision:
    """Judge the work share on every shape profiled (the default shapes and each variant): the
    worst one decides, so a fallback keyed on shape cannot hide behind the default inputs.
    `trials`: how many trials it passed (for the message); `flagged`: the flag codes the result
    has already.

    `strict`: library ops may not take half the reference's time. `engineering`: they may do
    part of the work, but on every shape the candidate's own kernels must take a quarter of one
    copy of the output, or 5% of its profiled time if that is less (a kernel run on one element
    beside a library call is not on the hot path); the library share is reported."""
    flags: list[Flag] = []
    library_share: float | None = None

    def decided(verdict: Verdict | None = None, reason: Reason | None = None, message: str | None = None) -> Decision:
        updates: dict[str, object] = {"policy": policy}
        if library_share is not None:
            updates["library_share"] = library_share
        return Decision(verdict, reason, message, flags=tuple(flags), updates=updates)

    if not shares or any(s.error is not None for s in shares):
        why = next((s.error for s in shares if s.error is not None), "no data")
        flags.append(Flag(code="work_share_unknown", message=f"could not profile the forward pass: {why}"))
        return decided()
    shares = [_count_not_work(share) for share in shares]
    worst = shares[0]
    for share in shares:
        library, reference = share.library_ms, share.reference_ms
        where = "" if share is shares[0] else f" (on shape variant {share.plan.variant})"
        top = ", ".join(f"{name} {ms:.2f} ms" for name, ms in share.top_library_ops)
        entered = _entered_otherwise(share, analysis)
        if entered is not None and entered.code not in {f.code for f in flags}:
            flags.append(entered)
        if analysis.backend in ("cpp", "cuda") and share.ext_calls == 0 and entered is None:
            cache = next((f for f in analysis.findings if f.code == Reason.INPUT_CACHE.value), None)
            if cache is not None and not share.top_library_ops:
                # Called again on inputs it had seen (the profile repeats its calls), forward did no
                # work at all: the cache the source was flagged for replayed a stored result.
                line = f" (line {cache.line})" if cache.line else ""
                message = (
                    f"forward never called the candidate's extension{where} and no library op did the work: called "
                    f"again with inputs it had seen, it returned a stored result; flagged in the source{line}: "
                    f"{cache.message}"
                )
                return decided(Verdict.REJECTED, Reason.INPUT_CACHE, message)
            message = f"forward never called the candidate's extension{where}; the work was done by {top or 'PyTorch'}"
            return decided(Verdict.REJECTED, Reason.KERNEL_NOT_LAUNCHED, message)
        side = sorted(set(share.streams) - set(share.reference_streams))
        if side and share.reference_streams:
            message = (
                f"the candidate's kernels ran on device stream(s) {side}{where}, where the reference's run on "
                f"{sorted(share.reference_streams)} (the current stream): work on another stream escapes the timer"
            )
            return decided(Verdict.REJECTED, Reason.SIDE_STREAM, message)
        disowned = share.disowned_kernels
        seen = set(flagged) | {f.code for f in flags}
        if disowned and "kernel_named_like_reference" not in seen:
            flags.append(
                Flag(
                    code="kernel_named_like_reference",
                    message=f"counted as library time: the reference launches kernels of the same name ({', '.join(disowned[:3])})",
                )
            )
        if share.device == "cuda" and not share.own_kernels and analysis.backend in ("cuda", "triton"):
            named = f" (named like the reference's: {', '.join(disowned[:3])})" if disowned else ""
            message = (
                f"none of the candidate's kernels ran on the GPU{where}{named}; the kernels that ran: {top or 'none'}"
            )
            return decided(Verdict.REJECTED, Reason.KERNEL_NOT_LAUNCHED, message)
        low = _reduced_precision_kernels(share, analysis)
        if low:
            message = f"the candidate's kernel ran in reduced precision in a float32 problem{where}: {low[0]}"
            return decided(Verdict.REJECTED, Reason.PRECISION_DOWNGRADE, message)
        own = share.own_ms
        share_of_library = library / (own + library) if own + library > 0 else 0.0
        library_share = max(library_share or 0.0, share_of_library)
        if policy == "engineering":
            need = min(
                ENGINEERING_MIN_OUTPUT_PASS * share.output_pass_ms,
                ENGINEERING_MIN_OWN_SHARE * (own + library),
            )
            # On the CPU a call's fixed costs (the profiler's region, a loaded machine's wake-ups) can
            # pass for work: what the extension's functions did at their fastest counts instead.
            fastest = _own_work_at_fastest_ms(share) if share.device == "cpu" else None
            own_work = min(own, fastest) if fastest is not None else own
            if own + library > 0 and own_work < need:
                message = (
                    f"the candidate's own kernels took {own_work:.4f} ms per call{where}, less than policy engineering's "
                    f"{need:.4f} ms (a quarter of one pass over the output, or 5% of its time): they are not on the "
                    f"hot path; {top}"
                )
                return decided(Verdict.REJECTED, Reason.TORCH_FALLBACK, message)
        elif reference > 0 and library >= MAX_LIBRARY_SHARE * reference:
            message = (
                f"PyTorch/library ops in the candidate took {library:.3f} ms, {library / reference:.0%} of the "
                f"reference's whole forward ({reference:.3f} ms){where}: the main computation is not the candidate's own: {top}"
            )
            return decided(Verdict.REJECTED, Reason.TORCH_FALLBACK, message)
        if reference > 0 and library / reference > worst.library_ms / max(worst.reference_ms, 1e-12):
            worst = share
    library, reference = worst.library_ms, worst.reference_ms
    message = (
        f"correct on {trials} trials; library ops took {library:.3f} ms against the "
        f"reference's {reference:.3f} ms (the worst of {len(shares)} shapes profiled)"
    )
    if policy == "engineering" and library_share:
        message += f"; library share {library_share:.0%} (policy engineering)"
    return decided(message=message)


def _entered_otherwise(share: Share, analysis: CandidateAnalysis) -> Flag | None:
    """How the candidate's own code ran when forward called none of its extension's functions
    (the recorder counts only those): through an operator it registered itself (`own_ops`,
    validated statically: its implementation reaches the candidate's extension or kernel), or,
    on the GPU, as its own kernels replayed from a CUDA graph it captured. The flag that says so,
    or None. What ran is then judged like any call: the same rules of who did the work follow."""
    if share.ext_calls > 0:
        return None
    if share.own_op_calls > 0 and analysis.own_ops:
        return Flag(
            code="own_operator",
            message=f"forward entered the candidate's code through operators it registered ({', '.join(analysis.own_ops[:3])})",
        )
    if share.device == "cuda" and share.graph_kernels:
        return Flag(
            code="graph_replayed_kernels",
            message=f"the candidate's own kernels ran from a CUDA graph replay ({', '.join(share.graph_kernels[:3])}); "
            "its outputs on fresh inputs are checked like any call",
        )
    return None


def fallback_margin(share: Share, policy: str) -> float | None:
    """How far one shape's profile is past the torch_fallback threshold of `policy`, as a factor
    (at least 1: rejected; under 1: within it); None where the rule does not apply (no time
    measured). Strict: the library share of the reference over `MAX_LIBRARY_SHARE`; engineering:
    the minimum own work over the own work measured."""
    share = _count_not_work(share)
    own, library, reference = share.own_ms, share.library_ms, share.reference_ms
    if policy == "engineering":
        need = min(ENGINEERING_MIN_OUTPUT_PASS * share.output_pass_ms, ENGINEERING_MIN_OWN_SHARE * (own + library))
        if own + library <= 0 or need <= 0:
            return None
        fastest = _own_work_at_fastest_ms(share) if share.device == "cpu" else None
        own_work = min(own, fastest) if fastest is not None else own
        return need / own_work if own_work > 0 else float("inf")
    if reference <= 0:
        return None
    return library / reference / MAX_LIBRARY_SHARE


def fallback_within_noise(shares: Sequence[Share], policy: str) -> list[int]:
    """The shapes to profile once more before a `torch_fallback` from the work share stands: those
    past the threshold by less than `WORK_SHARE_NOISE`. Empty when none is past it, or when one is
    past it by more (that evidence is beyond noise: rejected at once)."""
    margins = [fallback_margin(share, policy) for share in shares]
    past = [i for i, m in enumerate(margins) if m is not None and m >= 1.0]
    if any((margins[i] or 0.0) >= WORK_SHARE_NOISE for i in past):
        return []
    return past


def with_second_profile(first: Sequence[Share], second: Sequence[Share], policy: str) -> list[Share]:
    """Per shape, the first profile or the second (matched by trial index), whichever is further
    from the torch_fallback threshold: a noisy round inflates a profile, and the judgement stands
    only where both profiles are past the threshold."""
    again = {share.plan.index: share for share in second if share.error is None}
    merged = []
    for share in first:
        other = again.get(share.plan.index)
        if other is None:
            merged.append(share)
            continue
        mine, theirs = fallback_margin(share, policy), fallback_margin(other, policy)
        merged.append(other if mine is not None and theirs is not None and theirs < mine else share)
    return merged


def _own_work_at_fastest_ms(share: Share) -> float | None:
    """Per forward, the time the extension's functions took at their fastest profiled call, times
    their calls, less the profiler's cost of the ATen ops they called inside; None without data."""
    fastest, calls, forwards = share.extension_fastest_s, share.ext_calls_by_function, share.forward_calls
    if not fastest or not calls or forwards <= 0:
        return None
    seconds = sum(fastest.get(name, 0.0) * n for name, n in calls.items()) / forwards
    overhead = PROFILER_OP_OVERHEAD_S * share.ops_inside_per_call
    return max(0.0, seconds - overhead) * 1e3


def _count_not_work(share: Share) -> Share:
    """Fills, copies and views do no arithmetic and are left out of the library time, unless the
    reference's forward is mostly such ops: then they are its work, and the candidate's count too
    (a `.contiguous()` is no kernel for a problem whose whole job is a copy)."""
    if share.reference_not_work_ms <= share.reference_ms:
        return share
    return share.model_copy(
        update={
            "library_ms": share.library_ms + share.not_work_ms,
            "reference_ms": share.reference_ms + share.reference_not_work_ms,
        }
    )


_HALF_SIGNATURE_WORDS = ("__half", "c10::Half", "__nv_bfloat16", "c10::BFloat16", "__nv_fp8", "half2")


def _reduced_precision_kernels(share: Share, analysis: CandidateAnalysis) -> list[str]:
    """Own kernels that ran with half/bf16/fp8 in their signature (template arguments included),
    in a float32 problem: what runs decides, not what the source mentions."""
    if not analysis.fp32:
        return []

    def signature(name: str) -> str:  # template arguments and parameters, not the kernel's own name
        cut = [i for i in (name.find("<"), name.find("(")) if i >= 0]
        return name[min(cut) :] if cut else ""

    return [
        name
        for name in share.own_kernels
        if base_name(name) in analysis.half_kernels or any(w in signature(name) for w in _HALF_SIGNATURE_WORDS)
    ]


def profiled_ms(share: Share) -> float:
    """A work-share profile's time per call on its shapes (own kernels and library ops)."""
    return share.own_ms + share.library_ms


def profile_slower_than_timed(timings: Mapping[str, TimingStats], device: str, shares: Sequence[Share]) -> bool:
    """Whether the timed median is under PROFILE_MISMATCH_RATIO of the profiled time per call on
    the default shapes (judged only above `PROFILE_MISMATCH_MIN_MS`: on the CPU the timed median,
    on the GPU the profiled time): what `judge_profile_consistency` rejects unless a second profile agrees
    with the timing (the harness profiles once more before judging: a busy machine only slows a
    profile down, while a candidate that works less when not watched is slower when profiled
    every time)."""
    cand = timings.get("candidate")
    if cand is None or not shares or shares[0].error is not None:
        return False
    profiled = profiled_ms(shares[0])
    floor = PROFILE_MISMATCH_MIN_MS.get(device, 1.0)
    gated = cand.median_ms if device == "cpu" else profiled  # see PROFILE_MISMATCH_MIN_MS
    return gated >= floor and cand.median_ms < PROFILE_MISMATCH_RATIO * profiled


def profile_disagrees_with_timing(
    timings: Mapping[str, TimingStats], device: str, shares: Sequence[Share], timing: TimingReport | None = None
) -> bool:
    """Whether `judge_profile_consistency` would reject on a comparison of times (the timed median
    under half the profiled time, or on the CPU an extension function's fastest timed call under a
    quarter of its fastest profiled one): the harness profiles once more before judging (a busy
    machine only slows a profile; a candidate that works less when not watched is slower when
    profiled every time). The call counts (`skipped_calls`) are exact, not noisy: not here."""
    if not shares or shares[0].error is not None:
        return False
    if timing is not None and skipped_calls(shares[0], timing) is not None:
        return False  # rejected on the counts, which a second profile would not change
    if profile_slower_than_timed(timings, device, shares):
        return True
    return device == "cpu" and timing is not None and _own_work_shrank(shares[0], timing) is not None


def faster_profile(first: Share, second: Share) -> Share:
    """Of two profiles of the default shapes, the one to judge the timing against: the faster by
    profiled time, with each extension function's fastest call the faster of the two (noise only
    slows a call, so the faster reading is the closer one)."""
    chosen = second if profiled_ms(second) < profiled_ms(first) else first
    fastest = dict(first.extension_fastest_s)
    for name, seconds in second.extension_fastest_s.items():
        fastest[name] = min(seconds, fastest.get(name, seconds))
    return chosen.model_copy(update={"extension_fastest_s": fastest})


def judge_profile_consistency(
    timings: Mapping[str, TimingStats], device: str, shares: Sequence[Share], timing: TimingReport | None = None
) -> Decision | None:
    """The candidate's timed median against its profiled time per call on the default shapes;
    the extension's calls per forward, and on the CPU its functions' fastest calls, while timed
    against while profiled. None when they agree."""
    cand = timings.get("candidate")
    if cand is None or not shares or shares[0].error is not None:
        return None
    if timing is not None:
        skipped = skipped_calls(shares[0], timing)
        if skipped is not None:
            return ending(Verdict.REJECTED, Reason.PROFILE_MISMATCH, skipped, clear_speedups=True)
    why = _own_work_shrank(shares[0], timing) if device == "cpu" and timing is not None else None
    if why is not None:
        return ending(Verdict.REJECTED, Reason.PROFILE_MISMATCH, why, clear_speedups=True)
    if not profile_slower_than_timed(timings, device, shares):
        return None
    profiled = profiled_ms(shares[0])
    message = (
        f"timed at {cand.median_ms:.4f} ms per call, but its profiled calls took {profiled:.4f} ms each: "
        f"under {PROFILE_MISMATCH_RATIO:.0%} of what the profiler saw, so it does other work when not profiled"
    )
    return ending(Verdict.REJECTED, Reason.PROFILE_MISMATCH, message, clear_speedups=True)


def skipped_calls(share: Share, timing: TimingReport) -> str | None:
    """The extension's calls are counted always: a candidate that called it k times per forward
    while profiled and far fewer times while timed runs something else when not watched."""
    profiled_calls, profiled_forwards = share.ext_calls, share.forward_calls
    timed_calls, timed_forwards = timing.extension_calls, timing.candidate_calls
    if profiled_calls <= 0 or profiled_forwards <= 0 or timed_forwards <= 0:
        return None
    profiled, timed = profiled_calls / profiled_forwards, timed_calls / timed_forwards
    if timed >= PROFILE_OWN_SHARE_RATIO * profiled:
        return None
    return (
        f"while profiled, each forward called the candidate's extension {profiled:.1f} times; while timed, "
        f"{timed:.2f} times: it runs something else when not watched"
    )


def _own_work_shrank(share: Share, timing: TimingReport) -> str | None:
    """On the CPU, the fastest call of each extension function while profiled against while timed
    (the same clock, inside the function only, so profiler overhead around it does not count;
    the fastest call is what a loaded machine cannot inflate). A function that did its work while
    the profiler watched and much less of it when timed (a slice, a stub, not called at all) runs
    something else when not watched. Returns why, or None."""
    profiled, timed = share.extension_fastest_s, timing.extension_fastest_s
    # ATen ops called inside the functions are recorded by the profiler, at a cost inside their clock
    overhead = PROFILER_OP_OVERHEAD_S * share.ops_inside_per_call
    for name, clocked in sorted(profiled.items(), key=lambda kv: -kv[1]):
        seen = clocked - overhead
        if seen < OWN_WORK_MIN_S:
            continue  # too short to tell the work from the call's own overhead
        now = timed.get(name)
        if now is None:
            return f"its extension function {name} took {seen * 1e3:.3f} ms per call while profiled and was never called while timed"
        if now < OWN_WORK_RATIO * seen and seen - now >= OWN_WORK_MIN_S:
            return (
                f"its extension function {name} took at least {seen * 1e3:.3f} ms per call while profiled and as little as "
                f"{now * 1e3:.4f} ms while timed: it does less of its own work when not watched"
            )
    return None
