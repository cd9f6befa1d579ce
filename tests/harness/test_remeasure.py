"""Rules that compare timings re-measure when the evidence is within noise, and decide on the
second look (#28): noise inflating one profile passes on the second; a hack past the threshold in
both profiles, or beyond noise in the first, is still rejected. The re-measure is a fake (a
function returning recorded profiler figures), the rules and the merge are the harness's own."""

from __future__ import annotations

from typing import Any

import pytest

from kernelwright.harness import judge
from kernelwright.harness.checks.static.analysis import analyze_candidate
from kernelwright.harness.judge import Decision
from kernelwright.harness.options import TrialPlan
from kernelwright.harness.phases.context import apply
from kernelwright.harness.phases.work_share import judged_twice_if_noisy, with_second_default_profile
from kernelwright.harness.result import EvalResult
from kernelwright.harness.timing.stats import TimingStats, summarize
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.messages import Share, TimedRun, TimingReport
from tests.harness.test_judge_work_share import _share
from tests.harness.test_static_analysis import cuda_candidate


def _shares(library_ms: float, reference_ms: float = 1.0, own_ms: float = 0.5, **extra: Any) -> list[Share]:
    return [Share.model_validate(_share(own_ms=own_ms, library_ms=library_ms, reference_ms=reference_ms, **extra))]


class FakeProfiler:
    """The second profile: recorded shares handed back for the plans asked, counted."""

    def __init__(self, shares: list[Share]) -> None:
        self.shares = shares
        self.asked: list[list[int]] = []

    def __call__(self, plans: list[TrialPlan]) -> list[Share]:
        self.asked.append([p.index for p in plans])
        return self.shares


def _work_share(
    first: list[Share], again: FakeProfiler, policy: str = "strict", source: str | None = None
) -> EvalResult:
    analysis = analyze_candidate(source or cuda_candidate())

    def decide(shares: Any) -> Decision:
        return judge.judge_work_share(shares, analysis, policy, 5)

    decision, _ = judged_twice_if_noisy(first, policy, decide, again)
    result = EvalResult(problem="p", candidate="c.py", verdict=Verdict.CORRECT, device=first[0].device or "cuda")
    return apply(result, decision)


def test_a_library_share_within_noise_of_the_threshold_is_profiled_again_and_passes() -> None:
    # an honest candidate with a small library op: 40% of the reference, read once at 55% on a busy machine
    again = FakeProfiler(_shares(library_ms=0.40))
    result = _work_share(_shares(library_ms=0.55), again)
    assert result.verdict == Verdict.CORRECT, result.message
    assert again.asked == [[0]]
    assert any(f.code == "profiled_again" and "within it" in f.message for f in result.flags)


def test_a_fallback_past_the_threshold_in_both_profiles_is_rejected() -> None:
    again = FakeProfiler(_shares(library_ms=0.60))
    result = _work_share(_shares(library_ms=0.55), again)
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.TORCH_FALLBACK)
    assert again.asked == [[0]] and any(f.code == "profiled_again" for f in result.flags)


def test_a_fallback_beyond_noise_is_rejected_without_a_second_profile() -> None:
    # PyTorch doing the whole job reads ~1.0 of the reference: twice the threshold
    again = FakeProfiler(_shares(library_ms=0.0))
    result = _work_share(_shares(library_ms=0.95, own_ms=0.01), again)
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.TORCH_FALLBACK)
    assert again.asked == []


def test_a_failed_second_profile_leaves_the_first_decision() -> None:
    again = FakeProfiler([])
    result = _work_share(_shares(library_ms=0.55), again)
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.TORCH_FALLBACK)


def test_engineering_own_work_within_noise_is_profiled_again() -> None:
    # own kernels needed: a quarter of one output pass (0.05 ms) = 0.0125 ms; read 0.010 once, 0.02 again
    def eng(own_ms: float) -> list[Share]:
        return _shares(library_ms=0.85, own_ms=own_ms)

    honest = _work_share(eng(0.010), FakeProfiler(eng(0.020)), policy="engineering")
    assert honest.verdict == Verdict.CORRECT, honest.message
    token = FakeProfiler(eng(0.0))
    hack = _work_share(eng(0.0001), token, policy="engineering")  # a kernel on one element: far past noise
    assert (hack.verdict, hack.reason) == (Verdict.REJECTED, Reason.TORCH_FALLBACK) and token.asked == []


def test_other_work_share_rejections_are_never_re_measured() -> None:
    again = FakeProfiler(_shares(library_ms=0.0))
    first = [
        Share.model_validate(
            {**_share(own_ms=0.5, library_ms=0.0, reference_ms=1.0), "streams": [7, 13], "reference_streams": [7]}
        )
    ]
    result = _work_share(first, again)
    assert result.reason == Reason.SIDE_STREAM and again.asked == []


# --- the timing against the profile ---


def _timed(median_ms: float) -> dict[str, TimingStats]:
    return {"candidate": summarize([median_ms] * 12)}


def _timing(**figures: Any) -> TimingReport:
    return TimingReport(result=TimedRun(fns={}), **figures)


def _consistency(
    timed_ms: float, first: list[Share], second: list[Share], device: str = "cuda", timing: TimingReport | None = None
) -> tuple[EvalResult, bool]:
    """What the timing phase does: a second profile when the first disagrees, then the judgement."""
    timings = _timed(timed_ms)
    asked = judge.profile_disagrees_with_timing(timings, device, first, timing)
    shares = with_second_default_profile(first, second)[0] if asked else first
    result = EvalResult(problem="p", candidate="c.py", verdict=Verdict.CORRECT, device=device)
    return apply(result, judge.judge_profile_consistency(timings, device, shares, timing)), asked


def test_a_profile_slowed_by_noise_is_profiled_again_and_the_timing_accepted() -> None:
    # timed at 0.40 ms; the first profile read 1.0 ms per call (a busy machine), the second 0.45 ms
    result, asked = _consistency(0.40, _shares(0.0, own_ms=1.0), _shares(0.0, own_ms=0.45))
    assert asked and result.verdict == Verdict.CORRECT


def test_a_candidate_that_works_less_when_not_profiled_is_still_rejected() -> None:
    result, asked = _consistency(0.10, _shares(0.0, own_ms=1.0), _shares(0.0, own_ms=0.98))
    assert asked and (result.verdict, result.reason) == (Verdict.REJECTED, Reason.PROFILE_MISMATCH)


def _cpu_share(fastest_s: float) -> list[Share]:
    return _shares(
        0.0,
        own_ms=0.02,
        reference_ms=0.02,
        device="cpu",
        forward_calls=40,
        ext_calls=40,
        extension_fastest_s={"k.relu": fastest_s},
    )


def test_cpu_own_work_read_high_once_is_profiled_again_and_accepted() -> None:
    # honest: 12 us per call timed; the first profile's fastest call 64 us (every round slowed), the second 14 us
    timing = _timing(extension_calls=70, candidate_calls=70, extension_fastest_s={"k.relu": 12e-6})
    result, asked = _consistency(0.02, _cpu_share(64e-6), _cpu_share(14e-6), device="cpu", timing=timing)
    assert asked and result.verdict == Verdict.CORRECT, result.message


def test_cpu_own_work_missing_when_timed_in_both_profiles_is_rejected() -> None:
    timing = _timing(extension_calls=70, candidate_calls=70, extension_fastest_s={"k.relu": 2.2e-6})
    result, asked = _consistency(0.02, _cpu_share(64e-6), _cpu_share(62e-6), device="cpu", timing=timing)
    assert asked and (result.verdict, result.reason) == (Verdict.REJECTED, Reason.PROFILE_MISMATCH)


def test_call_counts_are_exact_and_never_re_measured() -> None:
    timing = _timing(extension_calls=0, candidate_calls=70, extension_fastest_s={})
    first = _cpu_share(64e-6)
    assert not judge.profile_disagrees_with_timing(_timed(0.02), "cpu", first, timing)
    result, _ = _consistency(0.02, first, [], device="cpu", timing=timing)
    assert result.reason == Reason.PROFILE_MISMATCH


def test_faster_profile_keeps_each_functions_fastest_call() -> None:
    a, b = _cpu_share(64e-6)[0], _cpu_share(14e-6)[0].model_copy(update={"own_ms": 0.03})
    merged = judge.faster_profile(a, b)
    assert merged.own_ms == pytest.approx(0.02) and merged.extension_fastest_s == {"k.relu": 14e-6}
