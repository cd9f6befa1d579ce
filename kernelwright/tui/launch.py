"""What the TUI runs and how: a `RunRequest` (a new run, a resumed one, a finished one to browse),
the `RunBackend` that supplies a run's chat models, evaluator, profiler and memory (the real
harness by default; tests pass a fake one, as posting's `make_app(settings, deps)` does), and
`RunThread`, which runs the graph in a daemon thread with a `RunControl` for steering.

Leaving mid-run (`leave`) detaches the control and ends the harness's workers, as Ctrl-C does in
the headless commands: the graph stops at a checkpoint, nothing is judged from a killed worker,
and the run stays resumable.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.control import RunControl
from kernelwright.agent.deps import Evaluator, Memory, Profiler
from kernelwright.agent.events import _Event
from kernelwright.agent.runner import RunOutcome, harness_session, open_memory, run
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.config import Settings
from kernelwright.harness.workers import live


@dataclass(frozen=True)
class RunRequest:
    """A run for the main screen: new, resumed (`resume`), or finished and only browsed (`read_only`)."""

    config: AgentConfig
    resume: bool = False
    read_only: bool = False
    approve_plans: bool = False
    """Ask for every plan's approval from the start (the main screen can toggle it)."""
    replay_events: int | None = None
    """With `read_only`: show the run as it stood after this many of its recorded events (a
    picture of a run in progress, for tests and demos); None shows them all."""


class RunBackend(Protocol):
    """Where a run's live parts come from."""

    def models(self, config: AgentConfig) -> tuple[dict[str, Any], ScriptedSession | None]: ...

    def evaluator(self, config: AgentConfig, settings: Settings) -> contextlib.AbstractContextManager[Evaluator]: ...

    def profiler(self, config: AgentConfig, settings: Settings) -> tuple[Profiler | None, str]: ...

    def memory(self, config: AgentConfig) -> contextlib.AbstractContextManager[Memory | None]: ...


class HarnessBackend:
    """The real thing: the configured endpoint (or the package's scripted session), the warm
    EvalSession, Nsight Compute where there is a GPU, the memory database."""

    def models(self, config: AgentConfig) -> tuple[dict[str, Any], ScriptedSession | None]:
        from kernelwright.agent.models import make_models

        return make_models(config)

    def evaluator(self, config: AgentConfig, settings: Settings) -> contextlib.AbstractContextManager[Evaluator]:
        return harness_session(config, settings)

    def profiler(self, config: AgentConfig, settings: Settings) -> tuple[Profiler | None, str]:
        from kernelwright.agent.profiling import make_profiler

        return make_profiler(config, settings)

    def memory(self, config: AgentConfig) -> contextlib.AbstractContextManager[Memory | None]:
        return open_memory(config, None)


@dataclass
class RunThread:
    """One graph run in a daemon thread. `on_event` and `on_end` are called from that thread."""

    request: RunRequest
    settings: Settings
    backend: RunBackend
    on_event: Callable[[_Event], None]
    on_end: Callable[[RunOutcome | None, BaseException | None], None]
    control: RunControl = field(default_factory=RunControl)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.control.require_approval(self.request.approve_plans)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"run-{self.request.config.run_id}", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        config = self.request.config
        outcome: RunOutcome | None = None
        error: BaseException | None = None
        try:
            models, session = self.backend.models(config)
            subscribers: list[Callable[[_Event], None]] = [self.on_event]
            if session is not None and session.expected_verdicts:
                subscribers.append(session.watch)  # a scripted run stops where reality leaves its script
            profiler, missing = self.backend.profiler(config, self.settings)
            with self.backend.memory(config) as memory, self.backend.evaluator(config, self.settings) as evaluator:
                outcome = run(
                    config,
                    models,
                    evaluator,
                    resume=self.request.resume,
                    subscribers=tuple(subscribers),
                    scripted=session,
                    profiler=profiler,
                    profiler_missing=missing,
                    memory=memory,
                    control=self.control,
                )
        except BaseException as exc:  # shown in the app, never raised into it
            error = exc
        finally:
            self.on_end(outcome, error)

    def leave(self, wait_s: float = 5.0) -> bool:
        """End the run at its next checkpoint, unfinished and resumable; end the harness's workers
        now so an evaluation in flight does not hold the app. True when the thread ended in time
        (an LLM request in flight may outlast `wait_s`; the thread is a daemon, and the run's last
        checkpoint is what a resume starts from)."""
        self.control.detach()
        if not self.alive:
            return True
        live.interrupt()
        try:
            assert self._thread is not None
            self._thread.join(wait_s)
        finally:
            live.resume()
        return not self.alive
