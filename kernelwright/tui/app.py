"""The Textual app: `make_app(settings, ...)` builds it; screens do the work (start, run, report
chat). Long work runs off the event loop: a run in its own thread (`launch.RunThread`), report
reading and chat answers in Textual thread workers. Leaving the app mid-run leaves the run
resumable; the terminal is restored on every exit (Textual's driver does that, exceptions
included)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from kernelwright.agent import runs
from kernelwright.config import Settings
from kernelwright.tui.launch import HarnessBackend, RunBackend, RunRequest
from kernelwright.tui.screens.report import ReportScreen
from kernelwright.tui.screens.run import RunScreen
from kernelwright.tui.screens.start import StartChoices, StartScreen, start_choices

if TYPE_CHECKING:
    from kernelwright.agent.ask import AskChat, ReportSet

ChatFactory = Callable[["ReportSet"], "AskChat"]


class KernelwrightApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "kernelwright"
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", show=False, priority=True)]

    def __init__(
        self,
        settings: Settings,
        *,
        request: RunRequest | None = None,
        report: Path | None = None,
        compare: Path | None = None,
        backend: RunBackend | None = None,
        choices: StartChoices | None = None,
        chat_factory: ChatFactory | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.backend: RunBackend = backend or HarnessBackend()
        self.request, self.report, self.compare = request, report, compare
        self.choices = choices
        self.chat_factory = chat_factory

    def on_mount(self) -> None:
        if self.report is not None:
            self.push_screen(ReportScreen(self.report, compare=self.compare))
        elif self.request is not None:
            self.open_run(self.request)
        else:
            self.push_screen(StartScreen(self.choices or start_choices(self.settings)))

    # -- what screens ask of the app ---------------------------------------------------------------
    def open_run(self, request: RunRequest) -> None:
        self.push_screen(RunScreen(request))

    def open_earlier_run(self, run_id: str) -> None:
        """Resume an unfinished run; browse a finished one, read-only."""
        config = runs.load_config(Path(self.settings.runs_dir), run_id).with_credentials(self.settings)
        done = runs.read_summary(config.run_dir) or {}
        finished = bool(done.get("finished"))
        self.open_run(RunRequest(config=config, resume=not finished, read_only=finished))

    def open_report(self, path: Path, compare: Path | None = None) -> None:
        self.push_screen(ReportScreen(path, compare=compare))

    def open_chat(self, path: Path, compare: Path | None) -> AskChat:
        """The report chat for a file (called from a worker thread): a file that is no report or
        a machine that cannot read one is a KernelwrightError the screen shows."""
        from kernelwright.agent.ask import chat_from_settings, open_reports

        reports = open_reports(path, compare=compare)
        if self.chat_factory is not None:
            return self.chat_factory(reports)
        return chat_from_settings(self.settings, reports)

    # -- commands ---------------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if isinstance(screen, RunScreen):
            for title, help_text, action in screen.commands():
                yield SystemCommand(title, help_text, action)

    def runs_in_flight(self) -> list[RunScreen]:
        return [s for s in self.screen_stack if isinstance(s, RunScreen) and s.thread is not None and s.thread.alive]

    async def action_quit(self) -> None:
        for screen in self.runs_in_flight():
            screen.leave()  # unfinished and resumable: `kernelwright tui --resume RUN_ID`
        self.exit(0)


def make_app(
    settings: Settings,
    *,
    request: RunRequest | None = None,
    report: Path | None = None,
    compare: Path | None = None,
    backend: RunBackend | None = None,
    choices: StartChoices | None = None,
    chat_factory: ChatFactory | None = None,
) -> KernelwrightApp:
    """The app: a run to open (`request`), or a report to chat about (`report`, `compare`), else
    the start screen; its dependencies (`backend`, `choices`, `chat_factory`) swappable for tests."""
    return KernelwrightApp(
        settings,
        request=request,
        report=report,
        compare=compare,
        backend=backend,
        choices=choices,
        chat_factory=chat_factory,
    )
