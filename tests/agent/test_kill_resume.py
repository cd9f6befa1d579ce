"""A run killed with SIGKILL in the middle of an evaluation resumes from its SQLite checkpoint
with --resume semantics: finished candidates are not evaluated again, with one idea a round or
with several ideas and samples judged as one batch; a checkpoint written slowly (a slow disk, a
loaded machine) is still written before the next step starts; a run killed in its first step
resumes as a whole run, not as one that ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelwright.agent import runner
from kernelwright.agent.events import CandidateEvaluated
from kernelwright.agent.scripted import ScriptedSession, keyed
from tests.agent.helpers import FakeEvaluator, code, config, models, plan, review

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = {
    "planner": [plan(), plan()],
    "coder": [code("correct none 0.9"), code("correct none 1.6")],
    "reviewer": [review(), review()],
}
SLOW_DISK = """
import time
from langgraph.checkpoint.sqlite import SqliteSaver
_put = SqliteSaver.put
def put(self, *args, **kwargs):
    time.sleep(0.2)  # each checkpoint write takes 0.2 s
    return _put(self, *args, **kwargs)
SqliteSaver.put = put
"""
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


def _kill_when_marked(code: str, run_id: str, marker: Path, what: str) -> None:
    """Run `code` in a child with (run_id, marker) as its arguments; SIGKILL it once it writes
    the marker (`what` it is doing then)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", code, run_id, str(marker)], env=env, cwd=marker.parent)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, f"the child run ended before {what}"
            assert time.monotonic() < deadline, f"the child never reached {what}"
            time.sleep(0.1)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)


@pytest.mark.parametrize("disk", ["plain", "slow"])
def test_kill_9_mid_evaluation_then_resume(tmp_path: Path, disk: str) -> None:
    """Killed while judging its second candidate; with a slow disk too: LangGraph's default
    writes a step's checkpoint beside the next step, and a kill then lost every step of the
    run but its input (CI, once: the resumed run judged nothing and said it had ended)."""
    cfg = config(max_rounds=3)
    marker = tmp_path / "marker"
    _kill_when_marked((SLOW_DISK if disk == "slow" else "") + CHILD, cfg.run_id, marker, "its second evaluation")
    assert len(list((cfg.run_dir / "results").glob("*.json"))) == 1
    evaluator = FakeEvaluator()
    session = ScriptedSession(SCRIPT)  # type: ignore[arg-type]
    outcome = runner.run(
        cfg, runner.RunParts(models(session), evaluator, scripted=session), runner.RunSteering(resume=True)
    )  # type: ignore[arg-type]
    assert len(evaluator.calls) == 1 and "1.6" in evaluator.calls[0]  # candidate 1 was not evaluated again
    assert outcome.accepted and [c["index"] for c in outcome.candidates] == [1, 2]
    assert session.position == {"planner": 2, "coder": 2, "reviewer": 2}
    judged = {e.index: e.cached for e in outcome.events if isinstance(e, CandidateEvaluated)}
    assert judged == {2: False}  # resumed at round 2's evaluation: round 1 was not replayed from the cache


def _ideas(*plans: str) -> dict[str, object]:
    return {"ideas": [{"plan": p, "expected_speedup": 1.5} for p in plans]}


SPEEDS = {1: ("0.5", "0.6", "0.7", "0.8"), 2: ("0.9", "1.1", "1.2", "1.6")}
SEARCH_SCRIPT = {  # 2 rounds of 2 ideas x 2 samples; the coder's replies keyed, so any order gives the same
    "planner": [_ideas("vectorise", "a row loop"), _ideas("unroll it", "block the rows")],
    "coder": [
        keyed(r, idea, sample, code(f"correct none {SPEEDS[r][2 * (idea - 1) + sample - 1]}"))
        for r in (1, 2)
        for idea in (1, 2)
        for sample in (1, 2)
    ],
    "reviewer": [review(), review()],
}
SEARCH_CHILD = """
import sys, time
from pathlib import Path
from kernelwright.agent import runner
from kernelwright.agent.scripted import ScriptedSession
from tests.agent.helpers import FakeEvaluator, config, models
from tests.agent.test_kill_resume import SEARCH_SCRIPT

class OneByOne(FakeEvaluator):
    '''Reports each result as it is decided (as EvalSession and EvalPool do); in the second round's
    batch it hangs on the third candidate, the first two decided and kept, until killed.'''

    def evaluate(self, candidates, on_result=None):
        out = []
        for i, path in enumerate(candidates):
            if len(self.calls) == 6:
                Path(sys.argv[2]).write_text("evaluating")
                time.sleep(120)
            [result] = super().evaluate([path])
            out.append(result)
            on_result(i, result)
        return out

session = ScriptedSession(SEARCH_SCRIPT)
cfg = config(run_id=sys.argv[1], ideas=2, width=2, max_rounds=2)
runner.run(cfg, runner.RunParts(models(session), OneByOne(), scripted=session))
"""


def test_kill_9_mid_round_of_a_search_then_resume_judges_only_what_was_not_decided(tmp_path: Path) -> None:
    """--ideas 2 --width 2: killed in round 2 with 2 of its 4 candidates decided; the resumed run
    judges the other 2 only (and none of round 1's 4), and ends as an unkilled run would."""
    cfg = config(ideas=2, width=2, max_rounds=2)
    _kill_when_marked(SEARCH_CHILD, cfg.run_id, tmp_path / "marker", "its second round's third candidate")
    assert len(list((cfg.run_dir / "results").glob("*.json"))) == 6  # round 1's four, round 2's first two
    evaluator = FakeEvaluator()  # one that returns its batch whole: the node keeps it when it returns
    session = ScriptedSession(SEARCH_SCRIPT)  # type: ignore[arg-type]
    outcome = runner.run(
        cfg, runner.RunParts(models(session), evaluator, scripted=session), runner.RunSteering(resume=True)
    )  # type: ignore[arg-type]
    assert evaluator.batches == [2] and ["1.2" in c or "1.6" in c for c in evaluator.calls] == [True, True]
    assert [c["index"] for c in outcome.candidates] == list(range(1, 9))
    assert outcome.accepted and outcome.best is not None and outcome.best["index"] == 8
    judged = {e.index: e.cached for e in outcome.events if isinstance(e, CandidateEvaluated)}
    assert judged == {5: True, 6: True, 7: False, 8: False}  # the resumed session: round 2's step again
    assert session.position == {"planner": 2, "coder": 8, "reviewer": 2}


FIRST_STEP_CHILD = """
import sys, time
from pathlib import Path
from langgraph.checkpoint.sqlite import SqliteSaver
from kernelwright.agent import runner
from kernelwright.agent.scripted import ScriptedSession
from tests.agent.helpers import FakeEvaluator, config, models
from tests.agent.test_kill_resume import SCRIPT

_put = SqliteSaver.put
def put(self, config, checkpoint, metadata, new_versions):
    if metadata.get("step") == 0:  # the input is written; the first step's checkpoint hangs
        Path(sys.argv[2]).write_text("checkpointing")
        time.sleep(120)
    return _put(self, config, checkpoint, metadata, new_versions)
SqliteSaver.put = put

session = ScriptedSession(SCRIPT)
runner.run(config(run_id=sys.argv[1], max_rounds=3), runner.RunParts(models(session), FakeEvaluator(), scripted=session))
"""


def test_kill_9_in_the_first_step_resumes_the_whole_run(tmp_path: Path) -> None:
    """Killed before its first step's checkpoint is written: the database holds the run's input
    alone (no next node, a pending start task). The resumed run is the whole run, not one that
    ended with nothing done (which it was: the runner read "no next node" as the end)."""
    cfg = config(max_rounds=3)
    _kill_when_marked(FIRST_STEP_CHILD, cfg.run_id, tmp_path / "marker", "its first checkpoint after the input")
    assert (cfg.run_dir / "checkpoints.sqlite").exists()
    evaluator = FakeEvaluator()
    session = ScriptedSession(SCRIPT)  # type: ignore[arg-type]
    outcome = runner.run(
        cfg, runner.RunParts(models(session), evaluator, scripted=session), runner.RunSteering(resume=True)
    )  # type: ignore[arg-type]
    assert outcome.finished and outcome.accepted
    assert [c["index"] for c in outcome.candidates] == [1, 2] and len(evaluator.calls) == 2
    assert session.position == {"planner": 2, "coder": 2, "reviewer": 2}
