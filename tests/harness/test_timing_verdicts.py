"""How the timing phase's evidence turns into a verdict: hidden work, a shared GPU, speedups."""

from __future__ import annotations

from typing import Any

from kernelwright.harness.judge import judge_timing
from kernelwright.harness.phases.context import apply
from kernelwright.harness.result import EvalResult
from kernelwright.harness.timing.stats import summarize
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.messages import TimingReport


def _fn(median_ms: float, hidden: str | None = None) -> dict[str, Any]:
    stats = summarize([median_ms * f for f in (0.99, 1.0, 1.0, 1.01, 1.0)])
    return {
        "stats": stats.model_dump(mode="json"),
        "converged": True,
        "wall_median_ms": median_ms,
        "hidden_work": hidden,
    }


def _judge(**fns: dict[str, Any]) -> EvalResult:
    result = EvalResult(problem="relu", candidate="c.py", verdict=Verdict.CORRECT, message="correct on 7 trials")
    report = TimingReport.model_validate({"result": {"fns": fns}, "compile_time_s": 1.0})
    return apply(result, judge_timing(report))


def test_clean_timing_reports_speedups() -> None:
    result = _judge(candidate=_fn(0.5), eager=_fn(1.0))
    assert result.verdict is Verdict.CORRECT and result.speedups["eager"].ratio > 1.9
    assert "speedup vs eager 2.00x" in result.message


def test_hidden_work_in_the_candidate_alone_is_rejected() -> None:
    result = _judge(candidate=_fn(0.1, "fastest synchronised wall time ..."), eager=_fn(1.0))
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.SIDE_STREAM)
    assert not result.speedups


def test_a_shared_gpu_keeps_the_verdict_but_reports_no_speedup() -> None:
    result = _judge(candidate=_fn(0.5, "slow walls"), eager=_fn(1.0, "slow walls"), compile=_fn(0.9))
    assert result.verdict is Verdict.CORRECT and result.reason is None
    assert not result.speedups
    flag = next(f for f in result.flags if f.code == "device_contended")
    assert "eager" in flag.message and "idle GPU" in result.message


def test_a_baseline_alone_with_slow_walls_is_flagged() -> None:
    result = _judge(candidate=_fn(0.5), eager=_fn(1.0, "slow walls"))
    assert result.verdict is Verdict.CORRECT and "eager" in result.speedups
    assert [f.code for f in result.flags] == ["baseline_wall_mismatch"]


def test_a_call_of_a_few_microseconds_is_reported_with_a_warning_and_unchanged() -> None:
    """Under 10 µs a call is mostly overhead: the speedup is kept as measured, with a warning that
    it says little about the kernel (and nothing about larger inputs)."""
    short = _judge(candidate=_fn(0.005), eager=_fn(0.006), compile=_fn(0.030))
    assert short.verdict is Verdict.CORRECT and round(short.speedups["compile"].ratio, 1) == 6.0
    flag = next(f for f in short.flags if f.code == "short_calls")
    assert "5.0 µs" in flag.message and "default size" in flag.message
    # just above the line, and a real-size call: no warning
    for median in (0.0101, 0.5):
        assert "short_calls" not in {f.code for f in _judge(candidate=_fn(median), eager=_fn(1.0)).flags}


def test_host_bound_speedups_carry_the_stated_floor_in_the_interval_and_the_message() -> None:
    """Calls under 0.1 ms: the interval is at least ratio / 1.4 to ratio x 1.4 (run-to-run spread
    of per-call overheads), said in the message; the ratio itself is unchanged."""
    small = _judge(candidate=_fn(0.044), compile=_fn(0.107))
    sp = small.speedups["compile"]
    assert round(sp.ratio, 2) == 2.43 and sp.floor_factor == 1.4
    assert round(sp.ci_low, 2) == round(sp.ratio / 1.4, 2) and round(sp.ci_high, 2) == round(sp.ratio * 1.4, 2)
    assert "x/÷1.4" in small.message and "0.1 ms" in small.message
    big = _judge(candidate=_fn(0.5), compile=_fn(1.0))
    assert big.speedups["compile"].floor_factor == 1.0 and "x/÷" not in big.message
