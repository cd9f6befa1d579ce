"""The TUI's report chat (issue #18's screen): a recorded Nsight Compute report opened beside its
digest, a question answered by the scripted model that calls a tool and cites what it returned
(checked: ✓), a wrong citation marked ✗, and a file that is no report reported, not fatal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from textual.widgets import Input, RichLog, Static

from kernelwright.agent.ask import AskChat
from kernelwright.agent.scripted import ScriptedSession, tool_calls
from kernelwright.config import load_settings
from kernelwright.tui.app import make_app
from kernelwright.tui.screens.report import ReportScreen
from tests.agent.ask.helpers import DATA, cited, needs_module
from tests.tui.helpers import FakeBackend, wait_for

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _log_text(screen: ReportScreen) -> str:
    return "\n".join(strip.text for strip in screen.query_one(RichLog).lines)


def _app(report: Path, replies: list[Any]):  # type: ignore[no-untyped-def]
    session = ScriptedSession({"ask": replies})

    def factory(reports: Any) -> AskChat:
        return AskChat(reports, session.model("ask"), model_name="scripted")

    return make_app(load_settings(), report=report, backend=FakeBackend(), chat_factory=factory), session


@needs_module
async def test_a_question_streams_its_answer_and_checks_its_citations() -> None:
    def answer(messages: list[BaseMessage]) -> str:
        return f"It is memory-bound: it runs {cited(messages, 'gpu__time_duration.sum')}."

    app, session = _app(DATA / "relu_candidate.ncu-rep", [tool_calls(("kernel_digest", {})), answer])
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, ReportScreen)
        await wait_for(pilot, lambda: screen.chat is not None)
        digest = str(screen.query_one("#digest-text", Static).render())
        assert "kw_relu_kernel" in digest
        box = screen.query_one(Input)
        box.value = "why is it as fast as it is?"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not screen.busy and "citations:" in _log_text(screen))
        text = _log_text(screen)
    assert "> why is it as fast as it is?" in text and "kernel_digest(" in text
    assert "It is memory-bound: it runs [[gpu__time_duration.sum" in text
    assert "citations: 1 checked against the report" in text and "✓ [[gpu__time_duration.sum" in text
    assert "why is it as fast as it is?" in str(session.prompts["ask"][0][-1].content)


@needs_module
async def test_a_wrong_citation_is_marked() -> None:
    app, _ = _app(
        DATA / "relu_candidate.ncu-rep",
        [tool_calls(("kernel_digest", {})), "It takes [[gpu__time_duration.sum = 999.9 msecond @ report:0]]."],
    )
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, ReportScreen)
        await wait_for(pilot, lambda: screen.chat is not None)
        screen.query_one(Input).value = "how long does it take?"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not screen.busy and "citations:" in _log_text(screen))
        assert "✗ [[gpu__time_duration.sum = 999.9 msecond @ report:0]]" in _log_text(screen)


async def test_a_file_that_is_no_report_is_a_notification(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.ncu-rep"
    bogus.write_text("not a report")
    app, _ = _app(bogus, [])
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, ReportScreen)
        await wait_for(
            pilot, lambda: "is not an Nsight Compute report" in str(screen.query_one("#digest-text", Static).render())
        )
        assert "notes.ncu-rep" in str(screen.query_one("#digest-text", Static).render())
        assert screen.chat is None and screen.query_one(Input).disabled and app.is_running
