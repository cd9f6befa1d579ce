"""The CPU's one-thread look at the rules that compare the timed candidate with its profile (#28).

On an oversubscribed CPU every parallel region of a multi-threaded call waits at its barrier for
a thread the machine has not scheduled, so even a call's fastest run is inflated, and a profile
of a few calls can fall wholly in a busy window while a timing of hundreds of calls finds a
quiet moment. Measured on the 2-core machine, another evaluation starting beside: the honest
`relu_styled` (its `zeros_like` on torch's two threads) took at least 8.24 ms a call while
profiled and as little as 1.45 ms while timed, and was rejected `profile_mismatch`; a 16x16384
OpenMP relu takes 0.05 ms alone and 8-20 ms a call under such load. So before those rules reject
on a comparison of times (the call counts are exact: they decide at once), the CPU looks once
more with one intra-op thread on both sides (`OneThreadReport`): the default shapes profiled and
the candidate timed alone, neither waiting at a barrier.

- The rules, judged on the look's profile and timing, still reject: the rejection stands. A
  candidate that works less when not watched does so at one thread too.
- They agree: the first disagreement was the load's, if the candidate at one thread is no
  slower than the configured threads explain: each extension function's fastest call in the
  look at most `threads x ONE_THREAD_SCALING` times its fastest call timed (plus
  `OWN_WORK_MIN_S`), and the candidate's fastest call likewise (plus `ONE_THREAD_MARGIN_MS`): N
  threads make a call at most about N times faster. The timing then stands. Slower than that,
  the timing with N threads is not what the candidate does at one thread: a candidate that
  works less only while several threads are configured and it is not profiled (its kernel on a
  slice, PyTorch doing the rest), or a look slowed by a machine too busy to tell. Either way
  `device_contended`: no speedup reported, the verdict stands, never a rejection (noise alone
  can slow the look, never speed the timing up).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kernelwright.harness.judge.decision import Decision, ending
from kernelwright.harness.judge.work_share import OWN_WORK_MIN_S, judge_profile_consistency, skipped_calls
from kernelwright.harness.result import Flag
from kernelwright.harness.timing.stats import TimingStats
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.messages import OneThreadReport, Share, TimedRun, TimingReport

ONE_THREAD_SCALING = 1.5
"""How much faster than linear in its threads a CPU call may seem before the first timing is not
trusted: a share of each core's cache, and a look slowed by a busy moment, are within it."""
ONE_THREAD_MARGIN_MS = 0.05  # a call's fixed costs (Python, dispatch), which threads do not divide


def needs_one_thread_look(
    decision: Decision | None,
    device: str,
    shares: Sequence[Share],
    timing: TimingReport | None,
    untold: bool = False,
) -> bool:
    """Whether the one-thread look decides the timed-vs-profiled rules after `decision`
    (`judge_profile_consistency`'s, with several CPU threads): when it is a rejection on a
    comparison of times, or when it found nothing but the timing was one the machine could not
    tell (`untold`: its speedups withheld for the load). Oversubscribed, every parallel region
    waits for a descheduled thread, a kernel's one-element call as long as its whole one: CI once
    judged a kernel that runs on one element unless profiled (PyTorch doing the work) `correct`
    that way, its timing withheld as a thread-pool stall. At one thread nothing waits."""
    if device != "cpu" or timing is None or timing.threads <= 1 or not shares or shares[0].error is not None:
        return False
    if decision is None:
        if not untold:
            return False
    elif decision.verdict != Verdict.REJECTED or decision.reason != Reason.PROFILE_MISMATCH:
        return False
    return skipped_calls(shares[0], timing) is None


def judge_at_one_thread(
    first: Decision | None, look: OneThreadReport | None, timing: TimingReport, timed: TimingStats
) -> Decision | None:
    """`first` (a `profile_mismatch` with `timing.threads` threads, or None: nothing found by a
    timing the load withheld) decided again on the one-thread `look` (None, or without its
    profile or timing: the look failed and `first` stands); `timed`: the candidate's figures in
    the timing phase."""
    if look is None or look.fatal or look.share is None or look.share.error is not None or look.timed is None:
        if first is None:  # the speedups are withheld already; the verdict stands unconfirmed
            note = f"; the one-thread look after a timing the load withheld failed: {_missing(look)}"
            return Decision(note=note)
        return replace(first, note=f"{first.note} (the one-thread look failed: {_missing(look)})")
    at_one = TimingReport(
        result=TimedRun(fns={}),
        extension_fastest_s=look.extension_fastest_s,
        extension_calls=look.extension_calls,
        candidate_calls=look.candidate_calls,
        threads=1,
    )
    again = judge_profile_consistency({"candidate": look.timed}, "cpu", [look.share], at_one)
    threads = timing.threads
    if first is None:  # after a withheld timing: only a rejection at one thread changes anything
        if again is None or again.verdict != Verdict.REJECTED:
            return None
        message = (
            f"with {threads} threads the machine was too busy to compare the timed calls with the profiled ones "
            f"(the timing's speedups withheld); with one intra-op thread: {again.message}"
        )
        return ending(Verdict.REJECTED, Reason.PROFILE_MISMATCH, message, clear_speedups=True)
    if again is not None:
        message = f"{first.message} (with {threads} threads); with one intra-op thread as well: {again.message}"
        return ending(Verdict.REJECTED, Reason.PROFILE_MISMATCH, message, clear_speedups=True)
    beyond = _beyond_threads(look, timing, timed)
    if beyond is not None:
        note = (
            f"speedups not reported: with {threads} threads the profile disagreed with the timing ({first.message}); "
            f"with one thread they agree, but there {beyond}: more than {threads} threads explain, so the timing is "
            "not what the candidate does at one thread (a machine too busy to tell, or work skipped only with "
            "several threads)"
        )
        return Decision(note=f"; {note}", flags=(Flag(code="device_contended", message=note),), clear_speedups=True)
    note = (
        f"with {threads} threads the profile disagreed with the timing ({first.message}); profiled and timed again "
        f"with one intra-op thread they agree (the candidate's fastest call {look.timed.min_ms:.4f} ms there, "
        f"{timed.min_ms:.4f} ms timed with {threads} threads): the load slowed the profiled calls' parallel regions, "
        "the timing stands"
    )
    return Decision(flags=(Flag(code="profiled_at_one_thread", message=note),))


def _beyond_threads(look: OneThreadReport, timing: TimingReport, timed: TimingStats) -> str | None:
    """Where the look at one thread took longer than `timing.threads` threads can explain: an
    extension function's fastest call (what `_own_work_shrank` compares) or the candidate's
    fastest call, each against the same in the timing phase. Why, or None."""
    threads = timing.threads
    for name, alone in sorted(look.extension_fastest_s.items()):
        before = timing.extension_fastest_s.get(name, 0.0)  # not called while timed: no work at all
        if alone > threads * ONE_THREAD_SCALING * before + OWN_WORK_MIN_S:
            return (
                f"its extension function {name} took {alone * 1e3:.4f} ms at its fastest, against "
                f"{before * 1e3:.4f} ms timed with {threads} threads"
            )
    assert look.timed is not None
    alone_ms, before_ms = look.timed.min_ms, timed.min_ms
    if alone_ms > threads * ONE_THREAD_SCALING * before_ms + ONE_THREAD_MARGIN_MS:
        return f"its fastest call took {alone_ms:.4f} ms, against {before_ms:.4f} ms timed with {threads} threads"
    return None


def _missing(look: OneThreadReport | None) -> str:
    if look is None:
        return "no report"
    if look.fatal:
        return look.fatal
    if look.share is None or look.share.error is not None:
        return f"no profile ({look.share.error if look.share is not None else 'none taken'})"
    return "no timing"
