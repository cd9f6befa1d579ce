"""Speedup per candidate, drawn in the terminal (plotext): each correct candidate's speedup
against torch.compile (eager where compile was not timed), the best so far as a line, and the
1.0x line that a kernel must beat. Candidates that are not correct have no speedup to plot."""

from __future__ import annotations

from textual_plotext import PlotextPlot

from kernelwright.agent.progress import RunProgress


def series(progress: RunProgress) -> tuple[list[float], list[float], list[float], list[float]]:
    """(x, speedup) of every correct candidate, and the best-so-far as a step line over the same x."""
    xs: list[float] = []
    ys: list[float] = []
    bx: list[float] = []
    by: list[float] = []
    best = 0.0
    for cand in progress.ordered_candidates():
        ratio = cand.target_speedup if cand.verdict == "correct" else None
        if ratio is None:
            continue
        xs.append(cand.index)
        ys.append(ratio)
        if bx:  # hold the best until this candidate, then step
            bx.append(cand.index)
            by.append(best)
        best = max(best, ratio)
        bx.append(cand.index)
        by.append(best)
    return xs, ys, bx, by


class SpeedupChart(PlotextPlot):
    def show(self, progress: RunProgress) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        xs, ys, bx, by = series(progress)
        plt.title("speedup vs torch.compile (eager if not timed)")
        plt.xlabel("candidate")
        if xs:
            plt.plot(bx, by, label="best so far", marker="braille")
            plt.scatter(xs, ys, label="candidate", marker="dot")
            plt.xticks(xs)
            plt.text("1.0x: to beat", x=xs[0], y=1.0)
        plt.hline(1.0)
        plt.ylim(0, max([1.5, *[y * 1.15 for y in ys]]))
        self.refresh()
