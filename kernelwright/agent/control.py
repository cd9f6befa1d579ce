"""Steering a running graph from another thread: the seam between a frontend (the TUI) and a run.

The graph runs in a worker thread (`runner.run(..., control=...)`); a frontend calls these methods
from its own thread. Each takes effect at a step boundary, where LangGraph has checkpointed the
state, so whatever happens next (a quit, a crash, a kill) leaves a run that `--resume` continues:

- `hint(text)`: queued into the next planner prompt;
- `pause()` / `resume()`: the runner stops streaming the graph once the step that is running ends,
  and nothing runs until `resume()` (or `stop()`, or `detach()`);
- `stop()`: the next step routes to the end; the best candidate so far is kept, and is accepted
  only if it beats the target (computed in code, as always);
- `answer_plan(text)`: the answer to a plan-approval interrupt (`approve_plans`, or
  `require_approval(True)` from the frontend): None or empty approves, text replaces the plan;
- `detach()`: the frontend is leaving: the run ends at the next boundary, unfinished and resumable.

A headless run has no control: it never pauses, and plan approval is off.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

Wake = Literal["resume", "stop", "detach"]


@dataclass
class PlanAnswer:
    """What a person said of a plan: approve it as it is (`text` None) or replace it."""

    text: str | None = None
    detached: bool = False


@dataclass
class RunControl:
    hints: deque[str] = field(default_factory=deque)
    approval: bool = False
    """Ask for approval of every plan before the coder runs (the frontend's toggle)."""
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _pause: bool = False
    _stop: bool = False
    _detach: bool = False
    _answer: PlanAnswer | None = None

    # -- the frontend's side ---------------------------------------------------------------------
    def hint(self, text: str) -> None:
        text = text.strip()
        if text:
            self.hints.append(text)

    def pause(self) -> None:
        with self._cond:
            self._pause = True
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._pause = False
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._pause = False
            self._cond.notify_all()

    def detach(self) -> None:
        with self._cond:
            self._detach = True
            self._cond.notify_all()

    def require_approval(self, on: bool) -> None:
        self.approval = on

    def answer_plan(self, text: str | None = None) -> None:
        with self._cond:
            self._answer = PlanAnswer(text=text.strip() if text and text.strip() else None)
            self._cond.notify_all()

    # -- what the run reads ----------------------------------------------------------------------
    @property
    def pause_requested(self) -> bool:
        return self._pause

    @property
    def stop_requested(self) -> bool:
        return self._stop

    @property
    def detached(self) -> bool:
        return self._detach

    def should_break(self) -> bool:
        """After a step: should the runner stop streaming (pause or detach)?"""
        with self._cond:
            return (self._pause or self._detach) and not self._stop

    def wait_resume(self, poll_s: float | None = None) -> Wake:
        """Block while paused; why the run may go on (or must end, unfinished)."""
        with self._cond:
            while self._pause and not self._stop and not self._detach:
                self._cond.wait(poll_s)
            if self._detach:
                return "detach"
            return "stop" if self._stop else "resume"

    def wait_plan_answer(self) -> PlanAnswer:
        """Block until the plan is answered (a stop approves it: the next step ends the run)."""
        with self._cond:
            while self._answer is None and not self._detach and not self._stop:
                self._cond.wait()
            if self._detach:
                return PlanAnswer(detached=True)
            answer, self._answer = self._answer or PlanAnswer(), None
            return answer
