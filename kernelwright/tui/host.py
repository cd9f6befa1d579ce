"""What the screens ask of the app they run in: its settings and run backend, and opening a run,
an earlier run, a report or a report chat. A protocol, so the screens never import `app.py`
(which imports them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kernelwright.config import Settings
from kernelwright.tui.launch import RunBackend, RunRequest

if TYPE_CHECKING:  # the report chat (LangChain) is imported only when a chat opens
    from kernelwright.agent.ask import AskChat


class AppHost(Protocol):
    settings: Settings
    backend: RunBackend

    def open_run(self, request: RunRequest) -> None: ...

    def open_earlier_run(self, run_id: str) -> None: ...

    def open_report(self, path: Path, compare: Path | None = None) -> None: ...

    def open_chat(self, path: Path, compare: Path | None) -> AskChat: ...
