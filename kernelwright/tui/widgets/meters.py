"""Two lines above the panes: where the run stands and its budget meters (`tui/status.py`)."""

from __future__ import annotations

from textual.widgets import Static

from kernelwright.agent.progress import RunProgress
from kernelwright.tui.status import meters_text, status_text


class Meters(Static):
    def show(self, progress: RunProgress, *, read_only: bool = False, approval: bool = False) -> None:
        text = status_text(progress, read_only, approval)
        text.append("\n")
        text.append_text(meters_text(progress, self.size.width or 80))
        self.update(text)
