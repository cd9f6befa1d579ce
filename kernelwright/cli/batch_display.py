"""What `batch judge` / `batch optimize` show while they run: a rich progress bar for the whole
batch (done, correct so far, best speedups) and a line per worker (its problem and step). In a
pipe or a log it prints one line per result instead; `--quiet` shows nothing until the summary.
A consumer of the batch's events, like `--events-json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from kernelwright.batch.events import BatchEvent


class _WhenCounting(ProgressColumn):
    """A column shown once a row counts something: the batch's row always, a worker's row once it
    has a problem (its candidates done out of the problem's)."""

    def __init__(self, inner: ProgressColumn) -> None:
        super().__init__()
        self.inner = inner

    def render(self, task: Task) -> Any:
        return self.inner.render(task) if task.total is not None else Text("")


class BatchDisplay:
    def __init__(self, console: Console, *, quiet: bool = False) -> None:
        self.console, self.quiet = console, quiet
        self.live = console.is_terminal and not quiet
        self.progress: Progress | None = None
        self.overall: TaskID | None = None
        self.rows: dict[str, TaskID] = {}
        self.best: dict[str, float] = {}
        self.correct = 0

    def _info(self) -> str:
        best = ", ".join(f"best {r:.2f}x vs {b}" for b, r in sorted(self.best.items()))
        return f"correct {self.correct}" + (f"; {best}" if best else "")

    def _row(self, worker: str) -> TaskID:
        assert self.progress is not None
        if worker not in self.rows:
            self.rows[worker] = self.progress.add_task(f"  {worker}", total=None, info="", start=False)
        return self.rows[worker]

    def __call__(self, event: BatchEvent) -> None:
        if self.quiet:
            return
        if event.kind == "batch_started":
            done = f", {event.already_done} already done" if event.already_done else ""
            self.console.print(
                f"[bold]batch {event.mode}[/]: {event.problems} problems, {event.to_do} to do{done}, "
                f"on {', '.join(event.workers)} -> {event.out}",
                highlight=False,
            )
            if self.live:
                self.progress = Progress(
                    SpinnerColumn(),
                    TextColumn("{task.description}"),
                    _WhenCounting(BarColumn()),
                    _WhenCounting(MofNCompleteColumn()),
                    _WhenCounting(TimeElapsedColumn()),
                    TextColumn("{task.fields[info]}"),
                    console=self.console,
                )
                self.overall = self.progress.add_task("all", total=max(event.to_do, 1), info=self._info())
                for worker in event.workers:
                    self._row(worker)
                self.progress.start()
        elif event.kind == "problem_started":
            if self.progress is not None:
                row = self._row(event.worker)
                self.progress.reset(row, total=max(event.to_do, 1), start=True, info=event.problem)
        elif event.kind == "worker_status":
            if self.progress is not None:
                text = (
                    f"{event.problem}: {event.text}"
                    if event.problem and event.problem not in event.text
                    else event.text
                )
                self.progress.update(self._row(event.worker), info=text[:100])
        elif event.kind == "result":
            record = event.record
            self.correct = event.correct
            for baseline, figure in record.speedups.items():
                if record.correct:
                    self.best[baseline] = max(self.best.get(baseline, 0.0), figure.ratio)
            verdict = record.verdict or ("error" if record.kind == "problem_error" else "no result")
            reason = f" ({record.reason})" if record.reason else ""
            speed = ", ".join(f"{f.ratio:.2f}x vs {b}" for b, f in record.speedups.items())
            what = f"{record.problem} {record.candidate}" if record.candidate else record.problem
            line = f"{what}: {verdict}{reason} {speed}".rstrip()
            if self.progress is not None and self.overall is not None:
                self.progress.update(self.overall, completed=event.done, info=self._info())
                self.progress.update(self._row(record.worker), advance=1, info=line[:100])
            else:
                self.console.print(f"[{event.done}/{event.to_do}] {line}", highlight=False, markup=False)
        elif event.kind == "batch_finished":
            self.close()

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def print_summary(report_md: Path, console: Console) -> None:
    """The report's headline figures, and where the report is."""
    report: dict[str, Any] = json.loads(report_md.with_name("report.json").read_text())
    total = report["problems_total"]
    correctness = report["correctness"]
    console.print(
        f"correct: {correctness['correct_problems']}/{total} problems, "
        f"{correctness['correct_results']}/{report['results']} results",
        highlight=False,
    )
    timed = {b: f for b, f in report["fast_p"].items() if f is not None}
    if timed:
        console.print("fast_p: the share of all problems with a correct result faster than p x the baseline")
        table = Table()
        table.add_column("p")
        for baseline in timed:
            table.add_column(f"vs {baseline}")
        for p in next(iter(timed.values())):
            table.add_row(p, *[f"{100 * figures[p]:.1f}%" for figures in timed.values()])
        console.print(table)
    if report["reasons"]:
        console.print("not correct: " + ", ".join(f"{k} {v}" for k, v in report["reasons"].items()), highlight=False)
    if report["unmatched_candidates"]:
        console.print(
            f"{len(report['unmatched_candidates'])} candidate file(s) matched no problem (see the report)",
            highlight=False,
        )
    console.print(f"report: {report_md}", highlight=False)
