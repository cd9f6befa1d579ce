"""Steering a run from another thread (what the TUI does): hints, pause at a checkpoint and resume,
stop keeping the best, plan approval and edits, leaving a run resumable, the GPU-time budget, and
step timings. The graph runs in a thread with the scripted model and a fake evaluator."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from kernelwright.agent import runner
from kernelwright.agent.control import RunControl
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.harness.result import EvalResult
from tests.agent.helpers import FakeEvaluator, code, config, models, plan, review

TIMEOUT = 30


class Watch:
    """A subscriber that records events and lets the test wait for one kind (or act on it)."""

    def __init__(self, on: dict[str, Any] | None = None) -> None:
        self.events: list[Any] = []
        self.seen: dict[str, threading.Event] = {}
        self.on = on or {}
        self.lock = threading.Lock()

    def __call__(self, event: Any) -> None:
        with self.lock:
            self.events.append(event)
            self.seen.setdefault(event.kind, threading.Event()).set()
        action = self.on.pop(event.kind, None)
        if action is not None:
            action(event)

    def wait(self, kind: str) -> None:
        with self.lock:
            flag = self.seen.setdefault(kind, threading.Event())
        assert flag.wait(TIMEOUT), f"no {kind} event"

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


def _start(script: dict[str, list[object]], control: RunControl, watch: Watch, **flags: object):
    session = ScriptedSession(script)  # type: ignore[arg-type]
    cfg = config(**flags)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["outcome"] = runner.run(
                cfg,
                runner.RunParts(models(session), FakeEvaluator(), scripted=session),
                runner.RunSteering(subscribers=(watch,), control=control),
            )
        except BaseException as exc:  # the test reads it
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box, session, cfg


def _join(thread: threading.Thread, box: dict[str, Any]) -> runner.RunOutcome:
    thread.join(TIMEOUT)
    assert not thread.is_alive(), "the run did not end"
    if "error" in box:
        raise box["error"]
    return box["outcome"]


TWO_ROUNDS = {
    "planner": [plan("first idea"), plan("second idea")],
    "coder": [code("correct none 0.8"), code("correct none 1.6")],
    "reviewer": [review(), review()],
}


def test_a_hint_given_while_running_reaches_the_next_planner_prompt_and_its_event() -> None:
    control = RunControl()
    watch = Watch(on={"review_written": lambda e: control.hint("use 128-bit loads")})
    thread, box, session, _ = _start(TWO_ROUNDS, control, watch, max_rounds=2)
    _join(thread, box)
    assert "use 128-bit loads" not in session.prompts["planner"][0][-1].content
    assert "use 128-bit loads" in session.prompts["planner"][1][-1].content
    plans = [e for e in watch.events if e.kind == "plan_written"]
    assert plans[0].hints == [] and plans[1].hints == ["use 128-bit loads"]


def test_pause_stops_at_a_checkpoint_and_resume_carries_on() -> None:
    control = RunControl()
    watch = Watch(on={"candidate_evaluated": lambda e: control.pause()})
    thread, box, _, _cfg = _start(TWO_ROUNDS, control, watch, max_rounds=2)
    watch.wait("run_paused")
    paused = next(e for e in watch.events if e.kind == "run_paused")
    assert paused.next_steps == ["profile"]  # evaluate has finished and been checkpointed
    assert "review_written" not in watch.kinds()  # nothing ran while paused
    control.resume()
    outcome = _join(thread, box)
    assert outcome.accepted and [c["index"] for c in outcome.candidates] == [1, 2]
    kinds = watch.kinds()
    assert kinds.index("run_paused") < kinds.index("run_resumed") < kinds.index("review_written")


def test_stop_keeps_the_best_and_ends_the_run_finished() -> None:
    control = RunControl()
    script = {
        "planner": [plan(), plan()],
        "coder": [code("correct none 0.8"), code("correct none 1.6")],
        "reviewer": [review(), review()],
    }
    watch = Watch(on={"candidate_evaluated": lambda e: control.stop()})
    thread, box, session, cfg = _start(script, control, watch, max_rounds=5)
    outcome = _join(thread, box)
    assert outcome.finished and not outcome.accepted  # 0.8x does not beat the target
    assert outcome.stop_reason == "stopped by the user (candidate 1 is the best so far)"
    assert outcome.best is not None and outcome.best["index"] == 1
    assert "reviewer" not in session.prompts  # the next step ended the run
    assert (cfg.run_dir / "best.py").exists()
    summary = json.loads((cfg.run_dir / "summary.json").read_text())
    assert summary["finished"] and summary["stop_reason"].startswith("stopped by the user")


def test_stop_while_paused_ends_the_run() -> None:
    control = RunControl()
    watch = Watch(on={"plan_written": lambda e: control.pause()})
    thread, box, session, _ = _start(TWO_ROUNDS, control, watch, max_rounds=2)
    watch.wait("run_paused")
    control.stop()
    outcome = _join(thread, box)
    assert outcome.finished and outcome.candidates == [] and "coder" not in session.prompts
    assert outcome.stop_reason == "stopped by the user (no correct candidate yet)"


def test_plan_approval_waits_then_an_edited_plan_reaches_the_coder() -> None:
    control = RunControl(approval=True)
    watch = Watch(on={"plan_awaiting_approval": lambda e: control.answer_plan("fuse the two loops instead")})
    thread, box, session, _ = _start(TWO_ROUNDS, control, watch, max_rounds=1)
    outcome = _join(thread, box)
    assert "fuse the two loops instead" in session.prompts["coder"][0][-1].content
    assert "first idea" not in session.prompts["coder"][0][-1].content
    decided = next(e for e in watch.events if e.kind == "plan_decided")
    assert decided.edited and decided.plan == "fuse the two loops instead"
    assert outcome.state["plan"] == "fuse the two loops instead"


def test_an_approved_plan_goes_to_the_coder_unchanged() -> None:
    control = RunControl(approval=True)
    watch = Watch(on={"plan_awaiting_approval": lambda e: control.answer_plan(None)})
    thread, box, session, _ = _start(TWO_ROUNDS, control, watch, max_rounds=1)
    _join(thread, box)
    assert "first idea" in session.prompts["coder"][0][-1].content
    assert not next(e for e in watch.events if e.kind == "plan_decided").edited


def test_leaving_while_paused_leaves_a_resumable_run() -> None:
    control = RunControl()
    watch = Watch(on={"candidate_evaluated": lambda e: control.pause()})
    thread, box, _, cfg = _start(TWO_ROUNDS, control, watch, max_rounds=2)
    watch.wait("run_paused")
    control.detach()
    outcome = _join(thread, box)
    assert not outcome.finished and outcome.stop_reason == "left by the user before profile"
    # later, headless: --resume finishes it without re-evaluating candidate 1
    session = ScriptedSession(TWO_ROUNDS)  # type: ignore[arg-type]
    evaluator = FakeEvaluator()
    again = runner.run(
        cfg, runner.RunParts(models(session), evaluator, scripted=session), runner.RunSteering(resume=True)
    )  # type: ignore[arg-type]
    assert again.finished and again.accepted and len(evaluator.calls) == 1


def test_step_finished_events_time_every_step() -> None:
    control = RunControl()
    watch = Watch()
    thread, box, _, _ = _start(TWO_ROUNDS, control, watch, max_rounds=1)
    _join(thread, box)
    steps = [e.step for e in watch.events if e.kind == "step_finished"]
    assert steps == ["planner", "coder", "evaluate", "profile", "reviewer"]
    assert all(e.seconds >= 0 for e in watch.events if e.kind == "step_finished")


class GpuEvaluator(FakeEvaluator):
    def evaluate(self, candidates: list[Any]) -> list[EvalResult]:
        results = super().evaluate(candidates)
        for r in results:
            r.phase_seconds.update({"build": 50.0, "correctness": 30.0, "work_share": 10.0, "timing": 25.0})
        return results


def test_the_gpu_time_budget_counts_device_phases_and_stops_the_run() -> None:
    session = ScriptedSession(
        {
            "planner": [plan()] * 3,
            "coder": [code("correct none 0.8"), code("correct none 0.9"), code("correct none 0.95")],
            "reviewer": [review()] * 3,
        }  # type: ignore[dict-item]
    )
    cfg = config(device="cuda", backend="cuda", max_gpu_s=100.0, max_rounds=3)
    outcome = runner.run(cfg, runner.RunParts(models(session), GpuEvaluator(), scripted=session))  # type: ignore[arg-type]
    assert outcome.stop_reason == "budget: GPU time 130 s used (limit 100 s)"  # build time is not GPU time
    assert outcome.state["round"] == 2 and outcome.state["usage"]["gpu_s"] == pytest.approx(130.0)


def test_a_bad_gpu_budget_is_a_usage_error() -> None:
    from kernelwright.errors import UsageError

    with pytest.raises(UsageError, match="--max-gpu-time must be positive"):
        config(max_gpu_s=0.0)


def test_a_second_process_cannot_drive_a_run_in_progress() -> None:
    """Two drivers of one run's checkpoints (an `optimize --resume` beside a `tui --resume`) would
    interleave their steps: the second is refused while the first holds the run."""
    from kernelwright.errors import UsageError
    from tests.tui.helpers import GatedEvaluator

    gate = GatedEvaluator()
    session = ScriptedSession(TWO_ROUNDS)  # type: ignore[arg-type]
    cfg = config(max_rounds=1)
    box: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: box.setdefault(
            "outcome", runner.run(cfg, runner.RunParts(models(session), gate, scripted=session))
        ),  # type: ignore[arg-type]
        daemon=True,
    )
    thread.start()
    for _ in range(600):  # until the first run is inside its evaluation (30 s at most)
        if gate.waiting:
            break
        threading.Event().wait(0.05)
    other = ScriptedSession(TWO_ROUNDS)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=f"run {cfg.run_id} is in progress in process"):
        runner.run(
            cfg, runner.RunParts(models(other), FakeEvaluator(), scripted=other), runner.RunSteering(resume=True)
        )  # type: ignore[arg-type]
    gate.allow()
    thread.join(TIMEOUT)
    assert box["outcome"].finished
