"""Chat with an Nsight Compute report beside its digest (the TUI side of `kernelwright ask`).

Left, the digest of the kernel in focus (the longest-running one by default); right, the
conversation: each answer streams in as the model writes it, the tool calls it makes show as
they happen, and its citations are checked against the report when it ends (a citation that
does not match is marked ✗). Reports are read without a GPU; a file that is no report, or a
machine that cannot read one, is a notification, not a crash.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, RichLog, Static

from kernelwright.errors import KernelwrightError
from kernelwright.tui.host import AppHost

if TYPE_CHECKING:
    from kernelwright.agent.ask import AskAnswer, AskChat


class _ToLog:
    """The chat's listener: text and tool calls go to the screen, from the worker thread."""

    def __init__(self, screen: ReportScreen) -> None:
        self.screen = screen
        self.buffer = ""

    def on_text(self, text: str) -> None:
        self.buffer += text
        if "\n" in self.buffer:
            *lines, self.buffer = self.buffer.split("\n")
            for line in lines:
                self.screen.app.call_from_thread(self.screen.write, Text(line))

    def on_tool(self, name: str, args: dict[str, Any]) -> None:
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        self.screen.app.call_from_thread(self.screen.write, Text(f"  · {name}({shown})", style="dim"))

    def flush(self) -> None:
        if self.buffer:
            self.screen.app.call_from_thread(self.screen.write, Text(self.buffer))
            self.buffer = ""


def citations_text(answer: AskAnswer) -> Text:
    if not answer.citations:
        return Text("citations: none (the answer cites no report metric)", style="dim")
    text = Text(f"citations: {len(answer.citations)} checked against the report", style="bold")
    for c in answer.citations:
        mark = "✓" if c.ok else "✗"
        note = f": {c.status.replace('_', ' ')}" + (f" ({c.note})" if c.note else "") if not c.ok else ""
        text.append(f"\n  {mark} {c.text}{note}", style=None if c.ok else "bold red")
    return text


class ReportScreen(Screen[None]):
    BINDINGS = [Binding("escape", "back", "Back")]

    def __init__(self, path: Path, *, compare: Path | None = None) -> None:
        super().__init__()
        self.path, self.compare = path, compare
        self.chat: AskChat | None = None
        self.busy = False

    @property
    def kw_app(self) -> AppHost:
        return cast("AppHost", self.app)

    def compose(self) -> ComposeResult:
        yield Header(icon="⚙")
        with Horizontal(id="report-body"):
            with VerticalScroll(id="report-digest"):
                yield Static("reading the report…", id="digest-text")
            with Vertical(id="report-chat"):
                yield RichLog(id="chat-log", wrap=True, markup=False, highlight=False)
                yield Input(placeholder="Ask about this report (Enter sends)", id="question")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "kernelwright · report chat"
        self.sub_title = self.path.name + (f" vs {self.compare.name}" if self.compare else "")
        self.query_one(Input).disabled = True
        self.open_reports()

    def write(self, line: Text | str) -> None:
        self.query_one(RichLog).write(line)

    @work(thread=True, exclusive=True, group="report")
    def open_reports(self) -> None:
        try:
            chat = self.kw_app.open_chat(self.path, self.compare)
            digest = next(t for t in chat.tools if t.name == "kernel_digest").invoke({})
        except KernelwrightError as exc:
            self.app.call_from_thread(self._failed, exc.one_line())
            return
        self.app.call_from_thread(self._ready, chat, str(digest))

    def _failed(self, line: str) -> None:
        self.query_one("#digest-text", Static).update(Text(line, style="bold red"))
        self.notify(line, title="cannot open the report", severity="error", timeout=15)

    def _ready(self, chat: AskChat, digest: str) -> None:
        self.chat = chat
        self.query_one("#digest-text", Static).update(Text(digest))
        for r in chat.reports.reports:
            self.write(Text(f"{r.label}: {r.path} — in focus: {r.ref(r.focus)} {r.focus.name[:80]}", style="dim"))
        self.write(Text(f"model: {chat.model_name}. Ask a question below.", style="dim"))
        box = self.query_one(Input)
        box.disabled = False
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        question = event.value.strip()
        if not question or self.chat is None or self.busy:
            return
        event.input.value = ""
        self.busy = True
        event.input.disabled = True
        self.write(Text(f"\n> {question}", style="bold cyan"))
        self.ask(question)

    @work(thread=True, exclusive=True, group="report")
    def ask(self, question: str) -> None:
        assert self.chat is not None
        listener = _ToLog(self)
        try:
            answer = self.chat.ask(question, listener)
        except KernelwrightError as exc:
            listener.flush()
            self.app.call_from_thread(self._answered, None, exc.one_line())
            return
        listener.flush()
        self.app.call_from_thread(self._answered, answer, "")

    def _answered(self, answer: AskAnswer | None, error: str) -> None:
        self.busy = False
        if answer is None:
            self.write(Text(error, style="bold red"))
            self.notify(error, severity="error", timeout=15)
        else:
            self.write(citations_text(answer))
        box = self.query_one(Input)
        box.disabled = False
        box.focus()

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:
            self.app.exit(0)
