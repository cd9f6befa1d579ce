"""Messages from the run's thread to the app (Textual's `post_message` is thread-safe)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from kernelwright.agent.events import _Event
from kernelwright.agent.runner import RunOutcome


@dataclass
class AgentEvent(Message):
    """One event of the run's stream."""

    event: _Event


@dataclass
class RunEnded(Message):
    """The run's thread ended: with an outcome, or with the error that ended it."""

    outcome: RunOutcome | None
    error: BaseException | None
