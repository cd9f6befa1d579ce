"""A run killed with SIGKILL in the middle of an evaluation resumes from its SQLite checkpoint
with --resume semantics: finished candidates are not evaluated again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kernelwright.agent import runner
from kernelwright.agent.scripted import ScriptedSession
from tests.agent.helpers import FakeEvaluator, code, config, models, plan, review

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = {
    "planner": [plan(), plan()],
    "coder": [code("correct none 0.9"), code("correct none 1.6")],
    "reviewer": [review(), review()],
}
CHILD = """
import sys, time
from pathlib import Path
from kernelwright.agent import runner
from kernelwright.agent.scripted import ScriptedSession
from tests.agent.helpers import FakeEvaluator, config, models
from tests.agent.test_kill_resume import SCRIPT

class Hangs(FakeEvaluator):
    def evaluate(self, candidates):
        if self.calls:  # the second candidate: say so, then hang until killed
            Path(sys.argv[2]).write_text("evaluating")
            time.sleep(120)
        return super().evaluate(candidates)

session = ScriptedSession(SCRIPT)
runner.run(config(run_id=sys.argv[1], max_rounds=3), runner.RunParts(models(session), Hangs(), scripted=session))
"""


def test_kill_9_mid_evaluation_then_resume(tmp_path: Path) -> None:
    cfg = config(max_rounds=3)
    marker = tmp_path / "marker"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, cfg.run_id, str(marker)], env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, "the child run ended before its second evaluation"
            assert time.monotonic() < deadline, "the child never reached its second evaluation"
            time.sleep(0.1)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert len(list((cfg.run_dir / "results").glob("*.json"))) == 1
    evaluator = FakeEvaluator()
    session = ScriptedSession(SCRIPT)  # type: ignore[arg-type]
    outcome = runner.run(
        cfg, runner.RunParts(models(session), evaluator, scripted=session), runner.RunSteering(resume=True)
    )  # type: ignore[arg-type]
    assert len(evaluator.calls) == 1 and "1.6" in evaluator.calls[0]  # candidate 1 was not evaluated again
    assert outcome.accepted and [c["index"] for c in outcome.candidates] == [1, 2]
    assert session.position == {"planner": 2, "coder": 2, "reviewer": 2}
