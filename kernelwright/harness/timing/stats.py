"""Statistics of timing samples: robust summaries, a distribution-free CI of the median, and speedups.

Kernel timings are skewed (a floor set by the hardware, a long tail of interruptions), so we report
the median and give it a confidence interval that assumes nothing about the distribution: the
binomial order-statistic interval. Speedup CIs come from a deterministic bootstrap of medians, so the
same samples always give the same verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, ConfigDict

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20_241_105
# Below this many samples no order-statistic interval reaches 95% coverage; [min, max] is all we have.
MIN_SAMPLES_FOR_CI = 6
# Floor for medians in ratios: a CUDA event pair around nothing can read 0.0 ms.
_MIN_MS = 1e-9
# Cap on the elements of one bootstrap index block, so large runs do not allocate gigabytes.
_BOOTSTRAP_BLOCK_ELEMENTS = 4_000_000


class TimingStats(BaseModel):
    """Summary of per-call times in milliseconds; the raw samples are kept so evidence can be re-analysed."""

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="constants")

    n: int
    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    q25_ms: float
    q75_ms: float
    iqr_ms: float
    ci_low_ms: float
    """Lower end of the 95% CI of the median (binomial order statistics, distribution-free)."""
    ci_high_ms: float
    rel_ci_halfwidth: float
    """(ci_high - ci_low) / 2 / median: 0.01 means the median is known to about ±1%."""
    samples_ms: list[float]


class Speedup(BaseModel):
    """How many times faster the candidate is than one baseline, by medians, with a bootstrap CI."""

    model_config = ConfigDict(frozen=True)

    baseline: str
    ratio: float
    """baseline median / candidate median: above 1 means the candidate is faster."""
    ci_low: float
    ci_high: float
    significant: bool
    """The 95% CI of the ratio excludes 1.0."""
    baseline_median_ms: float
    candidate_median_ms: float


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the sorted samples bounding a CI of the median with at least `confidence`.

    The count of samples below the true median is Binomial(n, 1/2), so [x_(k), x_(n-1-k)] covers the
    median with probability 1 - 2 P(B <= k). We take the largest k that keeps that at or above
    `confidence`; when even k = 0 cannot (n < 6 at 95%), the interval is [min, max].
    """
    if n < 1:
        raise ValueError("median_ci_ranks needs at least one sample")
    tail = (1.0 - confidence) / 2.0
    log_half_n = n * math.log(0.5)
    log_n_fact = math.lgamma(n + 1)
    cdf = 0.0
    k = 0
    for j in range((n - 1) // 2 + 1):
        pmf = math.exp(log_n_fact - math.lgamma(j + 1) - math.lgamma(n - j + 1) + log_half_n)
        if cdf + pmf > tail:
            break
        cdf += pmf
        k = j
    return k, n - 1 - k


def summarize(samples_ms: Sequence[float]) -> TimingStats:
    """Summarise per-call times (ms). Raises ValueError on empty input or non-finite/negative samples."""
    if len(samples_ms) == 0:
        raise ValueError("summarize needs at least one timing sample")
    x = np.asarray(samples_ms, dtype=np.float64)
    if not np.all(np.isfinite(x)) or np.any(x < 0):
        raise ValueError("timing samples must be finite and non-negative")
    s = np.sort(x)
    n = int(s.size)
    median = float(np.median(s))
    q25, q75 = (float(v) for v in np.percentile(s, [25.0, 75.0]))
    lo, hi = median_ci_ranks(n) if n >= MIN_SAMPLES_FOR_CI else (0, n - 1)
    ci_low, ci_high = float(s[lo]), float(s[hi])
    return TimingStats(
        n=n,
        median_ms=median,
        mean_ms=float(s.mean()),
        min_ms=float(s[0]),
        max_ms=float(s[-1]),
        q25_ms=q25,
        q75_ms=q75,
        iqr_ms=q75 - q25,
        ci_low_ms=ci_low,
        ci_high_ms=ci_high,
        rel_ci_halfwidth=_relative_halfwidth(ci_low, ci_high, median),
        samples_ms=[float(v) for v in x],
    )


def _relative_halfwidth(ci_low: float, ci_high: float, median: float) -> float:
    width = ci_high - ci_low
    if median > 0:
        return width / 2.0 / median
    return 0.0 if width == 0 else math.inf


def converged(stats: TimingStats, target_rel_ci: float = 0.01) -> bool:
    """True when the median's 95% CI is within ±target_rel_ci of it (and there are enough samples for a CI)."""
    return stats.n >= MIN_SAMPLES_FOR_CI and stats.rel_ci_halfwidth <= target_rel_ci


def _bootstrap_medians(samples: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    n = samples.size
    rows = max(1, _BOOTSTRAP_BLOCK_ELEMENTS // n)
    out = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = np.median(samples[idx], axis=1)
    return out


def speedup(
    baseline_name: str,
    baseline: TimingStats,
    candidate: TimingStats,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Speedup:
    """Speedup of `candidate` over `baseline` (ratio of medians) with a 95% percentile-bootstrap CI.

    The two sample sets are resampled independently with a fixed seed, so the result is reproducible.
    Stats without raw samples fall back to the conservative ratio of the medians' CI ends.
    """
    ratio = max(baseline.median_ms, _MIN_MS) / max(candidate.median_ms, _MIN_MS)
    if baseline.samples_ms and candidate.samples_ms:
        rng = np.random.default_rng(seed)
        b = _bootstrap_medians(np.asarray(baseline.samples_ms, dtype=np.float64), rng, resamples)
        c = _bootstrap_medians(np.asarray(candidate.samples_ms, dtype=np.float64), rng, resamples)
        ratios = np.maximum(b, _MIN_MS) / np.maximum(c, _MIN_MS)
        tail = (1.0 - CONFIDENCE) / 2.0 * 100.0
        ci_low, ci_high = (float(v) for v in np.percentile(ratios, [tail, 100.0 - tail]))
    else:
        ci_low = max(baseline.ci_low_ms, _MIN_MS) / max(candidate.ci_high_ms, _MIN_MS)
        ci_high = max(baseline.ci_high_ms, _MIN_MS) / max(candidate.ci_low_ms, _MIN_MS)
    return Speedup(
        baseline=baseline_name,
        ratio=ratio,
        ci_low=ci_low,
        ci_high=ci_high,
        significant=ci_low > 1.0 or ci_high < 1.0,
        baseline_median_ms=baseline.median_ms,
        candidate_median_ms=candidate.median_ms,
    )
