"""What the TUI runs and how: a `RunRequest` (a new run, a resumed one, a finished one to browse),
the `RunBackend` that supplies a run's chat models, evaluator, profiler and memory (the agent's
`assembly.PartsSource`: the real harness by default; tests pass a fake one, as posting's
`make_app(settings, deps)` does), and `RunThread`, which runs the graph in a daemon thread with a
`RunControl` for steering.

Leaving mid-run (`leave`) detaches the control and ends the harness's workers, as Ctrl-C does in
the headless commands: the graph stops at a checkpoint, nothing is judged from a killed worker,
and the run stays resumable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from kernelwright.agent.assembly import HarnessParts, PartsSource, assemble
from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.control import RunControl
from kernelwright.agent.events import _Event
from kernelwright.agent.runner import RunOutcome, RunSteering, run
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


RunBackend = PartsSource  # where a run's live parts come from (tests pass a fake one)
HarnessBackend = HarnessParts


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
            with assemble(config, self.settings, self.backend) as parts:
                # a scripted run stops where reality leaves its script (`script_watch`)
                steering = RunSteering(
                    resume=self.request.resume, subscribers=(self.on_event, *parts.script_watch()), control=self.control
                )
                outcome = run(config, parts, steering)
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
