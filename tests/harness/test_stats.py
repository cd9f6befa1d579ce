"""Timing statistics: the median's distribution-free CI, convergence, and bootstrap speedups."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelwright.harness.timing.stats import TimingStats, converged, median_ci_ranks, speedup, summarize


def test_summarize_known_data() -> None:
    s = summarize([float(v) for v in range(11, 0, -1)])  # 11..1, unsorted on purpose
    assert s.n == 11
    assert s.median_ms == 6.0
    assert s.mean_ms == 6.0
    assert (s.min_ms, s.max_ms) == (1.0, 11.0)
    assert (s.q25_ms, s.q75_ms, s.iqr_ms) == (3.5, 8.5, 5.0)
    # n=11 at 95%: ranks 2 and 10 (1-based), coverage 1 - 2*12/2048 = 98.8%.
    assert (s.ci_low_ms, s.ci_high_ms) == (2.0, 10.0)
    assert s.rel_ci_halfwidth == pytest.approx(4.0 / 6.0)
    assert s.samples_ms == [float(v) for v in range(11, 0, -1)]  # kept in call order


def _exact_ranks(n: int) -> tuple[int, int]:
    """Brute force with exact integer binomials: largest k with 2 * P(B <= k) <= 5%."""
    k, cum = 0, 0
    for j in range(n // 2 + 1):
        cum += math.comb(n, j)
        if 2 * cum * 20 > 2**n:  # 2 * cum / 2^n > 0.05
            break
        k = j
    return k, n - 1 - k


@pytest.mark.parametrize("n", [6, 7, 10, 11, 20, 31, 100, 257, 1000])
def test_median_ci_ranks_match_exact_binomial(n: int) -> None:
    assert median_ci_ranks(n) == _exact_ranks(n)


def test_ci_contains_median_and_covers_true_median_about_95_percent() -> None:
    rng = np.random.default_rng(1)
    true_median = math.log(2.0)  # of Exp(1)
    hits = 0
    trials = 1000
    for _ in range(trials):
        s = summarize(rng.exponential(1.0, size=25).tolist())
        assert s.ci_low_ms <= s.median_ms <= s.ci_high_ms
        hits += s.ci_low_ms <= true_median <= s.ci_high_ms
    assert hits / trials >= 0.93  # exact coverage for n=25 is 95.7%


def test_ci_narrows_as_n_grows() -> None:
    rng = np.random.default_rng(2)
    small = summarize((1.0 + rng.lognormal(0, 0.3, size=20)).tolist())
    large = summarize((1.0 + rng.lognormal(0, 0.3, size=2000)).tolist())
    assert large.rel_ci_halfwidth < small.rel_ci_halfwidth / 4
    assert converged(large, 0.02)
    assert not converged(small, 0.02)


def test_fewer_than_six_samples_give_min_max_ci_and_never_converge() -> None:
    s = summarize([1.0, 1.1, 0.9, 1.05, 1.0])
    assert (s.ci_low_ms, s.ci_high_ms) == (0.9, 1.1)
    assert not converged(s, target_rel_ci=0.5)
    flat = summarize([2.0] * 5)
    assert flat.rel_ci_halfwidth == 0.0
    assert not converged(flat)  # too few samples for a 95% interval
    assert converged(summarize([2.0] * 6))


def test_summarize_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one"):
        summarize([])
    with pytest.raises(ValueError, match="finite"):
        summarize([1.0, float("nan")])
    with pytest.raises(ValueError, match="non-negative"):
        summarize([1.0, -0.5])


def test_zero_median_is_handled() -> None:
    assert summarize([0.0] * 8).rel_ci_halfwidth == 0.0
    assert summarize([0.0] * 8 + [1.0]).median_ms == 0.0


def test_timing_stats_round_trips_through_json() -> None:
    s = summarize([0.0] * 7 + [1.0, 2.0])
    assert TimingStats.model_validate_json(s.model_dump_json()) == s


def test_speedup_of_twice_slower_baseline() -> None:
    rng = np.random.default_rng(3)
    candidate = summarize((1.0 + 0.05 * rng.random(200)).tolist())
    baseline = summarize((2.0 + 0.10 * rng.random(200)).tolist())
    sp = speedup("eager", baseline, candidate)
    assert sp.baseline == "eager"
    assert sp.ratio == pytest.approx(2.0, rel=0.02)
    assert 1.9 < sp.ci_low < sp.ratio < sp.ci_high < 2.1
    assert sp.significant
    assert sp.baseline_median_ms == baseline.median_ms
    # the slower direction is significant too, with ratio < 1
    back = speedup("candidate", candidate, baseline)
    assert back.ratio == pytest.approx(0.5, rel=0.02)
    assert back.significant and back.ci_high < 1.0


def test_speedup_of_identical_distributions_is_not_significant_and_deterministic() -> None:
    rng = np.random.default_rng(4)
    a = summarize(rng.lognormal(0, 0.2, size=150).tolist())
    b = summarize(rng.lognormal(0, 0.2, size=150).tolist())
    sp = speedup("compile", a, b)
    assert sp.ci_low < 1.0 < sp.ci_high
    assert not sp.significant
    assert speedup("compile", a, b) == sp  # fixed seed: same samples, same verdict


def test_speedup_without_samples_falls_back_to_ci_ends() -> None:
    a = summarize([2.0, 2.1, 1.9, 2.0, 2.05, 1.95, 2.0]).model_copy(update={"samples_ms": []})
    b = summarize([1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0]).model_copy(update={"samples_ms": []})
    sp = speedup("eager", a, b)
    assert sp.ci_low == pytest.approx(a.ci_low_ms / b.ci_high_ms)
    assert sp.ci_high == pytest.approx(a.ci_high_ms / b.ci_low_ms)
    assert sp.significant
