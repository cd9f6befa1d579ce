"""The report's PNG plots, drawn with matplotlib's Agg backend (no display needed). Each
function returns what it plotted (axes limits, labels, the data) so the report keeps it in
report.json and the tests can check the axes without reading pixels."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from kernelwright.batch.metrics import THRESHOLDS, fast_p

CURVE_POINTS = 241


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_fast_p(best: dict[str, list[tuple[bool, float | None]]], total: int, path: Path) -> dict[str, Any]:
    """fast_p against p, one curve per baseline; the report's thresholds marked."""
    plt = _pyplot()
    largest = max((r for rows in best.values() for ok, r in rows if ok and r is not None), default=0.0)
    x_max = max(2.5, min(largest * 1.1, 10.0))
    xs = [x_max * i / (CURVE_POINTS - 1) for i in range(CURVE_POINTS)]
    curves = {name: [fast_p(rows, total, x) for x in xs] for name, rows in best.items()}
    marks = {name: [fast_p(rows, total, p) for p in THRESHOLDS] for name, rows in best.items()}
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for name, ys in curves.items():
        line = ax.step(xs, ys, where="post", label=f"vs {name}")[0]
        ax.plot(THRESHOLDS, marks[name], "o", color=line.get_color(), markersize=4)
    ax.set(xlim=(0.0, x_max), ylim=(0.0, 1.0), xlabel="speedup threshold p", ylabel="fast_p (share of problems)")
    ax.set_title(f"fast_p over {total} problems")
    ax.axvline(1.0, color="grey", linewidth=0.8, linestyle=":")
    ax.grid(alpha=0.3)
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return {
        "file": str(path),
        "xlabel": "speedup threshold p",
        "ylabel": "fast_p (share of problems)",
        "xlim": [0.0, x_max],
        "ylim": [0.0, 1.0],
        "x": xs,
        "curves": curves,
        "thresholds": list(THRESHOLDS),
        "at_thresholds": marks,
    }


def plot_speedups(baseline: str, values: list[float], path: Path) -> dict[str, Any]:
    """A histogram of the correct results' speedups over one baseline, on a log axis."""
    plt = _pyplot()
    positive = sorted(v for v in values if v > 0)
    lo = min(positive[0] if positive else 1.0, 1.0) / 1.25
    hi = max(positive[-1] if positive else 1.0, 1.0) * 1.25
    bins = 20
    step = (math.log10(hi) - math.log10(lo)) / bins
    edges = [10 ** (math.log10(lo) + step * i) for i in range(bins + 1)]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    counts, _, _ = ax.hist(positive, bins=edges, color="tab:blue", edgecolor="white")
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}x" if hi / lo < 20 else ""))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.axvline(1.0, color="grey", linewidth=1.0, linestyle="--", label=f"1x ({baseline})")
    top = max(1.0, float(max(counts, default=0.0))) * 1.1
    ax.set(xlim=(lo, hi), ylim=(0.0, top), xlabel=f"speedup over {baseline} (log scale)", ylabel="correct results")
    ax.set_title(f"speedup over {baseline}: {len(positive)} correct results")
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return {
        "file": str(path),
        "xlabel": f"speedup over {baseline} (log scale)",
        "ylabel": "correct results",
        "xlim": [lo, hi],
        "ylim": [0.0, top],
        "bin_edges": edges,
        "counts": [int(c) for c in counts],
        "values": positive,
    }
