"""The batch report's arithmetic: KernelBench's fast_p and the geometric mean (see report.py for
the definitions in words)."""

from __future__ import annotations

import math

THRESHOLDS = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


def fast_p(best: list[tuple[bool, float | None]], total: int, p: float) -> float:
    """The share of `total` problems that are correct with a speedup > p. `best` holds, per problem
    with results, (has a correct candidate, its best speedup or None when untimed); problems
    without results are in `total` only. At p = 0 a correct problem counts even untimed."""
    if total <= 0:
        return 0.0
    hits = sum(1 for correct, ratio in best if correct and (p == 0 or (ratio is not None and ratio > p)))
    return hits / total


def geomean(values: list[float]) -> float | None:
    positive = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in positive) / len(positive)) if positive else None
