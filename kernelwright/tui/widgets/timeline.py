"""The step timeline: one row per step of every round (plan → code → evaluate → profile →
review), with its status (a symbol and a word's first letters, never colour alone), time and
tokens. Highlighting a row shows the step's detail (the app listens for `StepChosen`)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message
from textual.widgets import DataTable

from kernelwright.agent.progress import RunProgress, Step

STATUS = {"running": "… run", "done": "✓ ok", "failed": "✗ fail", "skipped": "– skip"}


def _time(step: Step) -> str:
    if step.seconds is None:
        return ""
    return f"{step.seconds:.1f}s" if step.seconds < 100 else f"{step.seconds / 60:.1f}m"


def _tokens(step: Step) -> str:
    if not step.tokens:
        return ""
    return f"{step.tokens / 1000:.1f}k" if step.tokens >= 1000 else str(step.tokens)


class Timeline(DataTable[str]):
    @dataclass
    class StepChosen(Message):
        position: int

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_column("R", key="round", width=2)
        self.add_column("step", key="step", width=8)
        self.add_column("", key="status", width=6)
        self.add_column("time", key="time", width=6)
        self.add_column("tok", key="tokens", width=5)
        self._shown = 0
        self._follow = True

    def show(self, progress: RunProgress) -> None:
        """Add the new steps and update the rows that changed; follow the newest step unless the
        person moved the cursor up."""
        steps = progress.steps
        for position, step in enumerate(steps):
            key = str(position)
            cells = (str(step.round), step.label, STATUS[step.status], _time(step), _tokens(step))
            if position < self._shown:
                for column, value in zip(("round", "step", "status", "time", "tokens"), cells, strict=True):
                    if self.get_cell(key, column) != value:
                        self.update_cell(key, column, value)
            else:
                self.add_row(*cells, key=key)
        added = len(steps) > self._shown
        self._shown = len(steps)
        if added and self._follow and steps:
            self.move_cursor(row=len(steps) - 1, animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._follow = event.cursor_row >= self.row_count - 1
        self.post_message(self.StepChosen(event.cursor_row))
