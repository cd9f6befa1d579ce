"""The live objects a run's nodes use, beside its configuration: the chat model per role, the
evaluator, the event stream and the human hint queue. Small protocols, so tests and the demo
swap in fakes without monkeypatching."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from kernelwright.agent.events import EventStream
from kernelwright.harness.result import EvalResult


class Evaluator(Protocol):
    """What the evaluate node needs of the harness (an `EvalSession` is one)."""

    def evaluate(self, candidates: list[Path]) -> list[EvalResult]: ...


@dataclass
class Deps:
    models: dict[str, BaseChatModel]
    evaluator: Evaluator
    events: EventStream = field(default_factory=EventStream)
    hints: deque[str] = field(default_factory=deque)
    started: float = field(default_factory=time.monotonic)
    has_profiler: bool = False

    @classmethod
    def from_runnable_config(cls, config: RunnableConfig | None) -> Deps:
        value = (config or {}).get("configurable", {}).get("deps")
        if not isinstance(value, cls):
            raise TypeError("the graph was invoked without configurable.deps (a Deps)")
        return value
