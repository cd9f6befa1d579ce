"""When the timing itself says the machine could not tell (#28): a speedup interval wider than
`TRUSTED_SPREAD`, or a timing stopped before it had enough calls for an interval, is
`device_contended`: the verdict stands, no speedup is reported, never a rejection."""

from __future__ import annotations

from typing import Any

import pytest

from kernelwright.harness.judge import judge_timing
from kernelwright.harness.judge.timing import untrusted_timing
from kernelwright.harness.phases.context import apply
from kernelwright.harness.result import EvalResult
from kernelwright.harness.timing.stats import TRUSTED_SPREAD, Speedup, interval_spread, summarize
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.messages import TimedFunction, TimingReport
from tests.harness.test_timing_verdicts import _judge

STEADY = (0.99, 1.0, 1.0, 1.01, 1.0, 0.995, 1.005, 1.0, 1.0, 1.0, 0.99, 1.01)  # 4 blocks of 3


def _fn(
    median_ms: float,
    *,
    factors: tuple[float, ...] = STEADY,
    converged: bool = False,
    hidden: str | None = None,
    blocks: bool = True,
) -> dict[str, Any]:
    """One function's figures as the worker reports them: `median_ms` times `factors`, in 4 blocks."""
    sizes = [len(factors) // 4] * 4 if blocks and len(factors) % 4 == 0 and len(factors) >= 8 else []
    stats = summarize([median_ms * f for f in factors], sizes)
    return {
        "stats": stats.model_dump(mode="json"),
        "converged": converged,
        "wall_median_ms": None,
        "hidden_work": hidden,
    }


def _contended(result: EvalResult) -> str:
    assert result.verdict is Verdict.CORRECT and result.reason is None
    assert result.speedups == {}
    return next(f.message for f in result.flags if f.code == "device_contended")


# One block of the baseline's timing slowed `x` times (a busy quarter of the phase): the four blocks'
# ratios are 1, 1, 1, x, and the block t-interval widens with x.
def _one_slow_block(x: float) -> tuple[float, ...]:
    return (*STEADY[:9], x, x, x)


def test_a_wide_interval_is_contended_with_a_readable_reason() -> None:
    """The issue's case: a relu at ~0.01 ms, a baseline's blocks wildly apart (100x [2.79, 697])."""
    result = _judge(candidate=_fn(0.01), eager=_fn(0.012, factors=_one_slow_block(200.0)), compile=_fn(0.03))
    message = _contended(result)
    assert "eager" in message and "wider than 4-fold" in message and "idle machine" in message
    assert "timing not trusted" in result.message and "speedup vs" not in result.message
    assert result.timings["candidate"].median_ms == pytest.approx(0.01)  # the raw figures are kept as evidence


def test_narrow_intervals_are_reported_even_when_not_converged() -> None:
    """Honest CPU runs mostly stop at their cap (157 of 168 at the small size) with honest
    intervals: not converging alone withholds nothing."""
    result = _judge(candidate=_fn(0.5), eager=_fn(1.0), compile=_fn(0.8))
    assert result.verdict is Verdict.CORRECT and set(result.speedups) == {"eager", "compile"}
    assert "device_contended" not in {f.code for f in result.flags}
    assert "not_converged" in {f.code for f in result.flags}
    assert "speedup vs eager 2.00x" in result.message


def test_the_host_bound_floor_alone_stays_under_the_threshold() -> None:
    """Every honest host-bound interval spans the floor's 1.4 squared = 1.96: well under 4."""
    result = _judge(candidate=_fn(0.01), compile=_fn(0.025))
    sp = result.speedups["compile"]
    assert sp.floor_factor == 1.4 and interval_spread(sp) == pytest.approx(1.96, rel=0.01)


@pytest.mark.parametrize(("slow", "contended"), [(1.5, False), (2.0, False), (2.6, True), (5.0, True)])
def test_one_slowed_block_of_four_tips_it_past_about_2_4x(slow: float, contended: bool) -> None:
    """The boundary in terms of the machine: with 4 blocks the interval passes 4-fold once one
    block's ratio sits about 2.4x off the other three's (see `TRUSTED_SPREAD`)."""
    result = _judge(candidate=_fn(0.5), eager=_fn(1.0, factors=_one_slow_block(slow)))
    assert result.verdict is Verdict.CORRECT
    assert ("device_contended" in {f.code for f in result.flags}) is contended
    assert bool(result.speedups) is not contended


def _speedup(low: float, high: float) -> Speedup:
    ratio = (low * high) ** 0.5
    return Speedup(
        baseline="compile",
        ratio=ratio,
        ci_low=low,
        ci_high=high,
        significant=low > 1.0,
        baseline_median_ms=ratio,
        candidate_median_ms=1.0,
    )


def test_the_threshold_itself_is_reported_and_just_past_it_is_not() -> None:
    timed = {"candidate": TimedFunction.model_validate(_fn(1.0)), "compile": TimedFunction.model_validate(_fn(2.0))}
    assert untrusted_timing(timed, {"compile": _speedup(1.0, TRUSTED_SPREAD)}) is None
    assert untrusted_timing(timed, {"compile": _speedup(1.0, TRUSTED_SPREAD * 1.001)}) is not None
    # scale-free: a 0.1x figure as wide is as untrusted as a 100x one
    assert untrusted_timing(timed, {"compile": _speedup(0.05, 0.05 * TRUSTED_SPREAD * 1.01)}) is not None
    assert untrusted_timing(timed, {"compile": _speedup(50.0, 50.0 * TRUSTED_SPREAD * 1.01)}) is not None


def test_too_few_calls_for_an_interval_is_contended_and_says_how_many() -> None:
    """A timing stopped at its cap before a function had 6 calls has no 95% interval at all."""
    five = (1.0, 1.0, 1.0, 1.0, 1.0)
    result = _judge(candidate=_fn(400.0, factors=five[:3]), eager=_fn(900.0, factors=five[:3]))
    message = _contended(result)
    assert "candidate 3" in message and "eager 3" in message and "at least 6" in message
    # the same counts when the worker reports convergence (it cannot: too few samples) are judged on width
    assert _judge(
        candidate=_fn(0.5, factors=five, converged=True), eager=_fn(1.0, factors=five, converged=True)
    ).speedups
    # six calls are enough for an interval
    six = (*five, 1.0)
    assert set(_judge(candidate=_fn(0.5, factors=six), eager=_fn(1.0, factors=six)).speedups) == {"eager"}


def test_rejections_are_decided_before_trust() -> None:
    """A kernel cannot trade a rejection for `device_contended` by making its timing noisy: work
    hidden from the timer is rejected even when every interval is wide."""
    noisy = _one_slow_block(300.0)
    result = _judge(candidate=_fn(0.1, factors=noisy, hidden="fastest synchronised wall time ..."), eager=_fn(1.0))
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.SIDE_STREAM)
    assert "device_contended" not in {f.code for f in result.flags}


def test_a_wide_interval_never_rejects_and_withholds_every_figure() -> None:
    """Contended is not a verdict: an incorrect result stays incorrect, a correct one correct, and
    a narrow baseline's figure beside a wide one is withheld too (the candidate's timing is shared)."""
    result = _judge(candidate=_fn(0.5), eager=_fn(1.0, factors=_one_slow_block(50.0)), compile=_fn(0.9))
    _contended(result)
    wrong = EvalResult(problem="relu", candidate="c.py", verdict=Verdict.INCORRECT, message="wrong on trial 2")
    fns = {"candidate": _fn(0.5), "eager": _fn(1.0, factors=_one_slow_block(50.0))}
    report = TimingReport.model_validate({"result": {"fns": fns}, "compile_time_s": 1.0})
    decision = judge_timing(report)
    assert decision.verdict is None and not decision.ends
    assert apply(wrong, decision).verdict is Verdict.INCORRECT
