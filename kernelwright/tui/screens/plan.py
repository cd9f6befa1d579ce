"""Approve or edit the planner's plan before the coder runs (the graph waits at a LangGraph
interrupt until the answer). Ctrl+S sends the text as it stands (edited or not), Escape approves
the plan as written, Ctrl+X stops the run."""

from __future__ import annotations

from typing import Literal

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, TextArea

PlanAnswer = tuple[Literal["approve", "edit", "stop"], str | None]


class PlanScreen(ModalScreen[PlanAnswer]):
    BINDINGS = [
        Binding("ctrl+s", "send", "Send (edited) plan"),
        Binding("escape", "approve", "Approve as written"),
        Binding("ctrl+x", "stop", "Stop the run"),
    ]

    def __init__(self, plan: str, round_: int) -> None:
        super().__init__()
        self.plan, self.round = plan, round_

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog plan-dialog"):
            yield Label(f"Round {self.round}: the plan awaits your approval", classes="dialog-title")
            yield TextArea(self.plan, id="plan-text", soft_wrap=True)
            yield Label("Ctrl+S: send as edited · Escape: approve as written · Ctrl+X: stop", classes="dialog-help")

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_send(self) -> None:
        text = self.query_one(TextArea).text.strip()
        if not text or text == self.plan.strip():
            self.dismiss(("approve", None))
        else:
            self.dismiss(("edit", text))

    def action_approve(self) -> None:
        self.dismiss(("approve", None))

    def action_stop(self) -> None:
        self.dismiss(("stop", None))
