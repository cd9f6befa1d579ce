"""The CPU's one-thread look at the timed-vs-profiled rules (#28): a multi-threaded kernel whose
profile a loaded CPU inflated (every parallel region waiting at its barrier for a descheduled
thread) is acquitted when profile and timing agree at one thread; a candidate that works less
when not watched is still rejected there; one that works less only while several threads are
configured gains nothing (no speedup). The rules are pure: recorded figures in, a decision out."""

from __future__ import annotations

from typing import Any

from kernelwright.harness.judge import Decision
from kernelwright.harness.judge.one_thread import ONE_THREAD_SCALING, judge_at_one_thread, needs_one_thread_look
from kernelwright.harness.judge.work_share import judge_profile_consistency
from kernelwright.harness.phases.context import apply
from kernelwright.harness.result import EvalResult
from kernelwright.harness.timing.stats import Speedup, TimingStats, summarize
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.messages import OneThreadReport, Share, TimedRun, TimingReport
from tests.harness.test_remeasure import _shares

FN = "kw.relu_styled"


def _calls(fastest_ms: float, n: int = 30) -> TimingStats:
    return summarize([fastest_ms * (1 + 0.02 * i) for i in range(n)])


def _profile(fastest_s: float, own_ms: float | None = None) -> Share:
    share = _shares(
        0.0,
        own_ms=own_ms if own_ms is not None else fastest_s * 1e3,
        reference_ms=0.05,
        device="cpu",
        forward_calls=20,
        ext_calls=20,
        ext_calls_by_function={FN: 20},
        extension_fastest_s={FN: fastest_s},
    )
    return share[0]


def _timing(fastest_s: float | None, threads: int = 2, calls: int = 200) -> TimingReport:
    return TimingReport(
        result=TimedRun(fns={}),
        extension_fastest_s={FN: fastest_s} if fastest_s is not None else {},
        extension_calls=calls if fastest_s is not None else 0,
        candidate_calls=calls,
        threads=threads,
    )


def _look(profiled_s: float, timed_s: float | None, call_ms: float, **extra: Any) -> OneThreadReport:
    return OneThreadReport(
        threads=2,
        share=_profile(profiled_s),
        timed=_calls(call_ms),
        extension_fastest_s={FN: timed_s} if timed_s is not None else {},
        extension_calls=31 if timed_s is not None else 0,
        candidate_calls=31,
        **extra,
    )


def _first(
    profiled_s: float, timing: TimingReport, call_ms: float, own_ms: float | None = None
) -> tuple[Decision, dict[str, TimingStats]]:
    timings = {"candidate": _calls(call_ms)}
    shares = [_profile(profiled_s, own_ms)]
    decision = judge_profile_consistency(timings, "cpu", shares, timing)
    assert decision is not None and decision.reason == Reason.PROFILE_MISMATCH
    assert needs_one_thread_look(decision, "cpu", shares, timing)
    return decision, timings


def _judged(decision: Decision, look: OneThreadReport | None, timing: TimingReport, call_ms: float) -> EvalResult:
    result = EvalResult(problem="relu", candidate="c.py", verdict=Verdict.CORRECT, device="cpu", message="correct")
    result.speedups = {
        "eager": Speedup(
            baseline="eager",
            ratio=1.2,
            ci_low=1.1,
            ci_high=1.3,
            significant=True,
            baseline_median_ms=1.2 * call_ms,
            candidate_median_ms=call_ms,
        )
    }
    return apply(result, judge_at_one_thread(decision, look, timing, _calls(call_ms)))


def test_an_openmp_kernel_profiled_under_load_is_acquitted_at_one_thread() -> None:
    """The issue's false rejection (honest_styles #14, another evaluation starting beside it):
    `relu_styled` at least 8.242 ms a call while profiled with 2 threads, as little as 1.4535 ms
    while timed. At one thread neither side waits at a barrier: profiled and timed agree, and the
    one-thread call is within what 2 threads explain. The timing and its speedup stand."""
    timing = _timing(1.4535e-3)
    first, _ = _first(8.242e-3, timing, 1.46)
    result = _judged(first, _look(2.61e-3, 2.55e-3, 2.57), timing, 1.46)
    assert result.verdict is Verdict.CORRECT and result.reason is None, result.message
    assert set(result.speedups) == {"eager"}
    flag = next(f for f in result.flags if f.code == "profiled_at_one_thread")
    assert "with one intra-op thread they agree" in flag.message and "8.242" in flag.message


def test_a_look_slowed_by_the_load_within_the_allowance_still_acquits() -> None:
    """Noise can slow the look too: a one-thread call up to 2 x ONE_THREAD_SCALING of the
    two-thread one is still explained by the threads."""
    timing = _timing(1.4535e-3)
    first, _ = _first(8.242e-3, timing, 1.46)
    slow = 2 * ONE_THREAD_SCALING * 1.4535 * 0.98
    result = _judged(first, _look(slow * 1.01e-3, slow * 1e-3, slow), timing, 1.46)
    assert result.verdict is Verdict.CORRECT and "device_contended" not in {f.code for f in result.flags}


def test_a_candidate_that_works_less_when_not_profiled_is_rejected_at_one_thread_too() -> None:
    """`slice_unless_profiled` (its kernel on one element while timed, PyTorch doing the work):
    the same disagreement at one thread, so the rejection stands. (One that skips its kernel
    altogether while timed is rejected on the call counts, which are exact: no look.)"""
    timing = _timing(2e-6)
    first, _ = _first(1.4e-3, timing, 0.02)
    result = _judged(first, _look(2.6e-3, 2e-6, 0.02), timing, 0.02)
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.PROFILE_MISMATCH)
    assert "with one intra-op thread as well" in result.message and "as little as" in result.message
    assert result.speedups == {}


def test_a_candidate_that_cheats_only_with_several_threads_gets_no_speedup() -> None:
    """Full work while profiled or at one thread, its kernel on one element (PyTorch doing the
    rest) only when several threads are configured and it is not profiled: the look agrees with
    itself, but its one-thread kernel call (0.040 ms) is far beyond what 2 threads explain for the
    0.001 ms timed. No speedup, no rejection: noise can slow a look as well."""
    timing = _timing(1e-6)
    first, _ = _first(0.021e-3, timing, 0.02)
    result = _judged(first, _look(0.041e-3, 0.040e-3, 0.045), timing, 0.02)
    assert result.verdict is Verdict.CORRECT and result.speedups == {}
    message = next(f.message for f in result.flags if f.code == "device_contended")
    assert "more than 2 threads explain" in message and FN in message


def test_a_whole_call_beyond_the_threads_is_contended_too() -> None:
    """Where the timed median rule decided (1 ms and more a call), the candidate's fastest call is
    held to the same bound."""
    timing = _timing(1.0e-3)
    first, _ = _first(1.1e-3, timing, 1.1, own_ms=4.0)
    look = _look(2.5e-3, 2.45e-3, 9.0)  # its kernel agrees, but each call spends 9 ms around it
    result = _judged(first, look, timing, 1.1)
    assert result.verdict is Verdict.CORRECT and result.speedups == {}
    assert "its fastest call took 9.0000 ms" in next(f.message for f in result.flags if f.code == "device_contended")


def test_a_failed_look_leaves_the_rejection() -> None:
    timing = _timing(1.4535e-3)
    first, _ = _first(8.242e-3, timing, 1.46)
    failed = OneThreadReport(threads=2, fatal="ModelNew(*init_inputs) raised RuntimeError: boom")
    for look in (None, failed, _look(2.6e-3, 2.5e-3, 2.5).model_copy(update={"timed": None})):
        result = _judged(first, look, timing, 1.46)
        assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.PROFILE_MISMATCH)
        assert "the one-thread look failed" in result.message


def test_the_look_is_taken_only_for_times_compared_with_several_cpu_threads() -> None:
    timing = _timing(1.4535e-3)
    first, _ = _first(8.242e-3, timing, 1.46)
    share = [_profile(8.242e-3)]
    assert not needs_one_thread_look(first, "cuda", share, timing)
    assert not needs_one_thread_look(first, "cpu", share, _timing(1.4535e-3, threads=1))
    assert not needs_one_thread_look(None, "cpu", share, timing)
    # the call counts are exact: called 1 time per forward while profiled, 0.1 while timed
    skipped = _timing(1.4535e-3).model_copy(update={"extension_calls": 20, "candidate_calls": 200})
    counted = judge_profile_consistency({"candidate": _calls(1.46)}, "cpu", share, skipped)
    assert counted is not None and "times" in (counted.message or "")
    assert not needs_one_thread_look(counted, "cpu", share, skipped)


def test_after_a_timing_the_load_withheld_the_look_still_catches_work_skipped_when_not_profiled() -> None:
    """CI's false acceptance: `slice_unless_profiled` on a CPU oversubscribed 4-fold, its timing
    withheld as a thread-pool stall (eager 7.97 ms a call with 2 threads, 0.48 ms with one). Its
    one-element kernel call waited at the parallel region's barrier as long as the whole call
    profiled, so with 2 threads no rule found anything: `correct`, without a speedup. The look
    at one thread sees the kernel's one-element call for what it is."""
    timing = _timing(1.1e-3)  # the one-element call, waiting for the pool's second thread
    timings = {"candidate": _calls(8.0)}
    share = [_profile(1.4e-3)]
    assert judge_profile_consistency(timings, "cpu", share, timing) is None  # nothing to see with 2 threads
    assert needs_one_thread_look(None, "cpu", share, timing, untold=True)
    decision = judge_at_one_thread(None, _look(0.69e-3, 0.01e-3, 0.45), timing, timings["candidate"])
    assert decision is not None and (decision.verdict, decision.reason) == (Verdict.REJECTED, Reason.PROFILE_MISMATCH)
    assert "too busy to compare" in decision.message and "with one intra-op thread" in decision.message


def test_after_a_withheld_timing_an_honest_look_changes_nothing() -> None:
    """An honest kernel under the same load: at one thread profile and timing agree; the verdict
    stands, its speedups already withheld, and no acquittal is claimed. A look that failed leaves
    it so, with a note."""
    timing = _timing(1.4e-3)
    timings = {"candidate": _calls(8.0)}
    assert judge_at_one_thread(None, _look(0.7e-3, 0.68e-3, 0.7), timing, timings["candidate"]) is None
    failed = judge_at_one_thread(None, None, timing, timings["candidate"])
    assert failed is not None and failed.verdict is None and "look" in failed.note


def test_the_look_after_a_timing_is_taken_only_when_the_load_withheld_it() -> None:
    timing, share = _timing(1.1e-3), [_profile(1.4e-3)]
    assert not needs_one_thread_look(None, "cpu", share, timing, untold=False)  # a trusted timing: nothing to ask
    assert not needs_one_thread_look(None, "cpu", share, _timing(1.1e-3, threads=1), untold=True)  # one thread already
    assert not needs_one_thread_look(None, "cuda", share, timing, untold=True)  # no thread pool in a GPU's times
