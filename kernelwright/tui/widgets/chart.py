"""Speedup per round, drawn in the terminal (plotext): each correct candidate's speedup against
torch.compile (eager where compile was not timed) at its round, the best so far as a step line,
and the 1.0x line a kernel must beat. Candidates that are not correct have no speedup to plot.
"""

from __future__ import annotations

from textual_plotext import PlotextPlot

from kernelwright.agent.progress import RunProgress


def series(progress: RunProgress) -> tuple[list[float], list[float], list[float], list[float]]:
    """(round, speedup) of every correct candidate, and the best so far after each round with one,
    as a step line (held level until the round that beat it)."""
    xs: list[float] = []
    ys: list[float] = []
    best_after: dict[int, float] = {}
    best = 0.0
    for cand in sorted(progress.ordered_candidates(), key=lambda c: (c.round, c.index)):
        ratio = cand.target_speedup if cand.verdict == "correct" else None
        if ratio is None:
            continue
        xs.append(cand.round)
        ys.append(ratio)
        best = max(best, ratio)
        best_after[cand.round] = best
    bx: list[float] = []
    by: list[float] = []
    for round_, value in sorted(best_after.items()):
        if by:
            bx.append(round_)
            by.append(by[-1])
        bx.append(round_)
        by.append(value)
    return xs, ys, bx, by


class SpeedupChart(PlotextPlot):
    def show(self, progress: RunProgress) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        xs, ys, bx, by = series(progress)
        plt.title("speedup vs torch.compile (eager if not timed)")
        plt.xlabel("round")
        if xs:
            plt.plot(bx, by, label="best so far", marker="braille")
            plt.scatter(xs, ys, label="candidate", marker="dot")
            plt.xticks(sorted(set(xs)))
            plt.text("1.0x: to beat", x=xs[0], y=1.0)
        plt.hline(1.0)
        plt.ylim(0, max([1.5, *[y * 1.15 for y in ys]]))
        self.refresh()
