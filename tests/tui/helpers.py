"""Helpers of the TUI tests: a backend with the scripted chat model and the fake evaluator (or one
that raises), the app built on it, and waiting for the run's thread from a Pilot."""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.config import Settings, load_settings
from kernelwright.harness.workers import live
from kernelwright.tui.app import KernelwrightApp, make_app
from kernelwright.tui.launch import RunRequest
from kernelwright.tui.screens.run import RunScreen
from tests.agent.helpers import FakeEvaluator, code, config, plan, review

SCRIPT = {
    "planner": [plan("one pass over the data"), plan("vectorise the loop")],
    "coder": [code("correct none 0.8"), code("correct none 1.6")],
    "reviewer": [review(lesson="one pass wins"), review(lesson="vector loads help")],
}


class FakeBackend:
    """The scripted model and the fake evaluator; `fail_with` makes the evaluator raise (a
    harness that crashes on a candidate)."""

    def __init__(self, script: dict[str, list[Any]] | None = None, fail_with: BaseException | None = None) -> None:
        self.session = ScriptedSession(script or SCRIPT)  # type: ignore[arg-type]
        self.fake = FakeEvaluator()
        self.fail_with = fail_with

    def models(self, config: AgentConfig) -> tuple[dict[str, Any], ScriptedSession | None]:
        return {r: self.session.model(r) for r in ("planner", "coder", "reviewer")}, self.session

    @contextlib.contextmanager
    def evaluator(self, config: AgentConfig, settings: Settings) -> Iterator[Any]:  # type: ignore[override]
        if self.fail_with is not None:
            failing = self.fail_with

            class Broken:
                def evaluate(self, candidates: list[Any]) -> list[Any]:
                    raise failing

            yield Broken()
        else:
            yield self.fake

    def profiler(self, config: AgentConfig, settings: Settings) -> tuple[None, str]:
        return None, "no profiler in tests"

    def memory(self, config: AgentConfig) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


def fake_app(
    backend: FakeBackend | None = None, approve: bool = False, **flags: object
) -> tuple[KernelwrightApp, FakeBackend]:
    backend = backend or FakeBackend()
    flags.setdefault("memory", False)
    cfg = config(**flags)
    app = make_app(load_settings(), request=RunRequest(config=cfg, approve_plans=approve), backend=backend)
    return app, backend


def run_screen(app: KernelwrightApp) -> RunScreen:
    screen = next(s for s in reversed(app.screen_stack) if isinstance(s, RunScreen))
    return screen


async def wait_for(pilot: Any, check: Any, timeout: float = 20.0) -> None:
    """Let the app work until `check()` is true (the run's thread posts its events)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        await pilot.pause(0.05)
        if check():
            await pilot.pause()
            return
    raise AssertionError("timed out waiting for the app")


class GatedEvaluator(FakeEvaluator):
    """The fake evaluator, held until the test lets each evaluation through (`allow`), so a test
    can act while a step runs. Like the harness, it raises on an interrupt (the app leaving)."""

    def __init__(self) -> None:
        super().__init__()
        self.allowed = threading.Semaphore(0)
        self.waiting = 0

    def allow(self, count: int = 1) -> None:
        for _ in range(count):
            self.allowed.release()

    def evaluate(self, candidates: list[Any]) -> list[Any]:
        self.waiting += 1
        while not self.allowed.acquire(timeout=0.05):
            if live.interrupted():
                raise KeyboardInterrupt("interrupted: the worker was ended")
        self.waiting -= 1
        return super().evaluate(candidates)


def gated_app(script: dict[str, list[Any]] | None = None, approve: bool = False, **flags: object):
    backend = FakeBackend(script)
    backend.fake = GatedEvaluator()
    app, _ = fake_app(backend, approve=approve, **flags)
    return app, backend, backend.fake


RECORDED = Path(__file__).parent.parent / "data" / "tui" / "run"


def recorded_run(runs_dir: Path) -> AgentConfig:
    """The recorded run of tests/data/tui (see make_run.py there) copied into `runs_dir`, with its
    paths put back; returns its config."""
    from kernelwright.agent import runs

    run_id = json.loads((RECORDED / "config.json").read_text())["run_id"]
    target = runs_dir / run_id
    shutil.copytree(RECORDED, target)
    for path in target.glob("*.json"):
        text = path.read_text().replace("$RUN_DIR", str(target)).replace("$RUNS_DIR", str(runs_dir))
        path.write_text(text)
    return runs.load_config(runs_dir, run_id)
