"""Statistics of timing samples: robust summaries, a distribution-free CI of the median, and speedups.

Kernel timings are skewed (a floor set by the hardware, a long tail of interruptions), so we report
the median and give it a confidence interval that assumes nothing about the distribution: the
binomial order-statistic interval. Speedup CIs come from a deterministic bootstrap of medians, so the
same samples always give the same verdict.

A bootstrap of one timing phase's samples only knows the noise between calls of that phase. The
same kernel timed again later (another phase, another process) lands elsewhere: clocks, the host's
state and other tenants drift slower than one phase (relu at the small size on an H100: 1.67x to
2.87x vs torch.compile over 17 runs, each run's bootstrap interval ±5%). So a phase is timed in
consecutive blocks (`TimingStats.block_sizes`) and the speedup's interval is the union of the
bootstrap interval and a t-interval over the blocks' ratios, which is as wide as the drift the blocks
saw (`block_interval`); and where a call is short enough that per-call host overheads decide its
time, which differ from process to process more than any one phase can see, the interval is at least
a stated floor (`HOST_BOUND_MS`, `HOST_BOUND_FACTOR`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20_241_105
# Below this many samples no order-statistic interval reaches 95% coverage; [min, max] is all we have.
MIN_SAMPLES_FOR_CI = 6
# Floor for medians in ratios: a CUDA event pair around nothing can read 0.0 ms.
_MIN_MS = 1e-9
# Cap on the elements of one bootstrap index block, so large runs do not allocate gigabytes.
_BOOTSTRAP_BLOCK_ELEMENTS = 4_000_000
# Fewer timing blocks than this give no block interval (two blocks' t-interval is 12.7 spreads wide).
MIN_BLOCKS = 3
# Two-sided 97.5% quantiles of Student's t by degrees of freedom (numpy has no t quantile function).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
_T975_LARGE = 2.0  # df > 10: between 2.228 and 1.96; rounded up
HOST_BOUND_MS = 0.1
"""A median call under this is decided by per-call host overheads (Python, dispatch, guards, the
launch), not by the kernel: on a GPU the device sits idle waiting for the host. Those overheads
differ from one process to the next by more than one timing phase can see."""
HOST_BOUND_FACTOR = 1.4
"""The floor on a speedup's interval when either side's median is under `HOST_BOUND_MS`: at least
ratio / 1.4 to ratio x 1.4. Measured: relu's fast-form kernel at the small size on an idle H100
(candidate ~0.04 ms, torch.compile ~0.1 ms), 17 runs in fresh processes: 1.67x to 2.87x vs
torch.compile, i.e. x/÷ 1.31 around their geometric middle; 1.4 adds a margin. Not applied to
longer calls: relu at the default size (0.53 ms) is stable to well under 1% between runs."""
TRUSTED_SPREAD = 4.0
"""The widest speedup interval still reported, as its upper end over its lower end (4: x/÷2 around
its middle). Wider, the run could not tell a 2x speedup from none, so no figure of it is trusted
(`judge.timing.untrusted_timing`: `device_contended`, the verdict stands). Measured on honest runs
(the CPU at the small size, 168 evaluations, 336 intervals, 2026-11-26): every interval the
host-bound floor set spans exactly 1.96 (1.4 squared), every other one at most 1.61; the only
wider ones, 250 to 5101, were 3 evaluations whose blocks disagreed wildly (one read 100x [2.79,
697] vs torch.compile on a loaded machine). On a GPU the floor plus a ±5% bootstrap is ~2.2. To
pass 4 with 4 blocks, one block's ratio must sit 2.4x off the other three's: the machine changed
under the timing, which noise on an idle one does not do."""


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
    block_sizes: list[int] = Field(default_factory=list)
    """How many of `samples_ms`, in order, each timing block took (consecutive stretches of the
    phase, every block interleaving the candidate and its baselines); empty: one block."""


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
    block_ratios: list[float] = Field(default_factory=list)
    """The ratio of medians within each timing block (empty: fewer than `MIN_BLOCKS` blocks)."""
    floor_factor: float = 1.0
    """`HOST_BOUND_FACTOR` where the host-bound floor applied (the interval is at least ratio / it
    to ratio x it), else 1."""


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


def summarize(samples_ms: Sequence[float], block_sizes: Sequence[int] = ()) -> TimingStats:
    """Summarise per-call times (ms), taken in consecutive blocks of `block_sizes` samples (empty:
    one block). Raises ValueError on empty input, non-finite/negative samples, or block sizes that
    do not add up to the samples."""
    if len(samples_ms) == 0:
        raise ValueError("summarize needs at least one timing sample")
    if block_sizes and (sum(block_sizes) != len(samples_ms) or min(block_sizes) < 1):
        raise ValueError("block sizes must be positive and add up to the number of samples")
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
        block_sizes=[int(b) for b in block_sizes] if len(block_sizes) > 1 else [],
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


def _t975(df: int) -> float:
    return _T975.get(df, _T975_LARGE)


def block_medians(stats: TimingStats) -> list[float]:
    """The median of each timing block's samples (empty when there are no blocks or no samples)."""
    if not stats.block_sizes or not stats.samples_ms:
        return []
    edges = np.cumsum([0, *stats.block_sizes])
    x = np.asarray(stats.samples_ms, dtype=np.float64)
    return [float(np.median(x[a:b])) for a, b in itertools.pairwise(edges.tolist())]


def block_interval(baseline: TimingStats, candidate: TimingStats) -> tuple[float, float, list[float]] | None:
    """A 95% t-interval of the speedup from the ratios of medians of the timing blocks the two were
    timed in together, on a log scale (ratios multiply): exp(mean ± t(B-1) · sd / √B) over the B
    blocks' log ratios, with the ratios. The blocks' ratios differ by the noise within a block and by
    whatever drifted between blocks, so this interval widens with the drift a single bootstrap misses,
    and stays tight when the blocks agree. None with fewer than `MIN_BLOCKS` common blocks."""
    b, c = block_medians(baseline), block_medians(candidate)
    if len(b) != len(c) or len(b) < MIN_BLOCKS:
        return None
    ratios = np.maximum(np.asarray(b), _MIN_MS) / np.maximum(np.asarray(c), _MIN_MS)
    logs = np.log(ratios)
    half = _t975(len(logs) - 1) * float(np.std(logs, ddof=1)) / math.sqrt(len(logs))
    centre = float(np.mean(logs))
    return math.exp(centre - half), math.exp(centre + half), [float(r) for r in ratios]


def host_bound(baseline: TimingStats, candidate: TimingStats, host_bound_ms: float = HOST_BOUND_MS) -> bool:
    """Either side's median call is short enough that host overheads decide it (`HOST_BOUND_MS`)."""
    return min(baseline.median_ms, candidate.median_ms) < host_bound_ms


def speedup(
    baseline_name: str,
    baseline: TimingStats,
    candidate: TimingStats,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    host_bound_ms: float = HOST_BOUND_MS,
    host_bound_factor: float = HOST_BOUND_FACTOR,
) -> Speedup:
    """Speedup of `candidate` over `baseline` (ratio of medians) with a 95% CI that covers run-to-run spread.

    The interval is the union of a percentile bootstrap of the medians (the two sample sets resampled
    independently with a fixed seed, so the result is reproducible; stats without raw samples fall
    back to the conservative ratio of the medians' CI ends), the `block_interval` when the two were
    timed in at least `MIN_BLOCKS` common blocks, and, when a median call is under `host_bound_ms`,
    a floor of ratio / `host_bound_factor` to ratio x `host_bound_factor`.
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
    blocks = block_interval(baseline, candidate)
    block_ratios: list[float] = []
    if blocks is not None:
        ci_low, ci_high, block_ratios = min(ci_low, blocks[0]), max(ci_high, blocks[1]), blocks[2]
    floor = 1.0
    if host_bound_factor > 1.0 and host_bound(baseline, candidate, host_bound_ms):
        floor = host_bound_factor
        ci_low, ci_high = min(ci_low, ratio / floor), max(ci_high, ratio * floor)
    ci_low, ci_high = min(ci_low, ratio), max(ci_high, ratio)
    return Speedup(
        baseline=baseline_name,
        ratio=ratio,
        ci_low=ci_low,
        ci_high=ci_high,
        significant=ci_low > 1.0 or ci_high < 1.0,
        baseline_median_ms=baseline.median_ms,
        candidate_median_ms=candidate.median_ms,
        block_ratios=block_ratios,
        floor_factor=floor,
    )


def interval_spread(s: Speedup) -> float:
    """How many times the interval's upper end is its lower end (1: a point; see `TRUSTED_SPREAD`)."""
    return s.ci_high / max(s.ci_low, _MIN_MS)
