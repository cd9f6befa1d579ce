"""Messages from the run's thread to the app (Textual's `post_message` is thread-safe)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from kernelwright.agent.events import _Event
from kernelwright.agent.runner import RunOutcome
from kernelwright.errors import KernelwrightError


def one_line(error: BaseException) -> str:
    """How an error that ended a run shows: a KernelwrightError's line, else its type and first line."""
    if isinstance(error, KernelwrightError):
        return error.one_line()
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


@dataclass
class AgentEvent(Message):
    """One event of the run's stream."""

    event: _Event


@dataclass
class RunEnded(Message):
    """The run's thread ended: with an outcome, or with the error that ended it."""

    outcome: RunOutcome | None
    error: BaseException | None
