"""Records the run the TUI's snapshot tests replay (tests/data/tui/run/): the real graph with the
scripted chat model and the tests' fake evaluator (verdicts and speedups from a marker comment in
each candidate), four rounds as the CPU demo has them (a slow correct kernel, a build error fixed
on retry, a rejected hack, a fast kernel accepted), then normalised so replays are deterministic:
a fixed run id, timestamps 1.5 s apart, step times rounded, and the run folder written as
$RUN_DIR (its parent as $RUNS_DIR): `tests/tui_helpers.recorded_run` puts them back.

    python tests/data/tui/make_run.py      # rewrites tests/data/tui/run/
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))

RUN_ID = "20261124-120000-relu-demo"


def main() -> None:
    scratch = Path(tempfile.mkdtemp())
    os.environ.update(
        KERNELWRIGHT_HOME=str(scratch / "home"),
        KERNELWRIGHT_RUNS_DIR=str(scratch / "runs"),
        KERNELWRIGHT_MEMORY_DB=str(scratch / "memory.sqlite"),
    )
    from kernelwright.agent import runner
    from kernelwright.agent.scripted import ScriptedSession
    from tests.agent.helpers import FakeEvaluator, code, config, models, plan, review

    script = {
        "planner": [
            plan("Start with a straightforward C++ loop to get a correct baseline kernel.", 0.5),
            plan("Cut the redundant passes and name the zero constant.", 0.9),
            plan("Let torch.relu handle the bulk and keep the kernel for the first element.", 3.0),
            plan("One vectorised pass over the data; OpenMP only for large tensors.", 1.5),
        ],
        "coder": [
            code("correct none 0.21"),
            code("build_error compile_error"),
            code("correct none 0.81"),
            code("rejected torch_fallback"),
            code("correct none 1.42"),
        ],
        "reviewer": [
            review(
                feedback="Correct but 64 passes over the data: do the work once.",
                lesson="An elementwise op needs one pass.",
            ),
            review(feedback="16 passes are still 16x the traffic.", lesson="Read the compiler's first error line."),
            review(
                decision="abandon",
                feedback="torch.relu did the work: a fallback.",
                lesson="Calling the PyTorch op is a hack.",
            ),
            review(feedback="One pass, correct on every trial.", lesson="One vectorised pass is the whole game."),
        ],
    }
    session = ScriptedSession(script, name="relu-cpu (scripted)")  # type: ignore[arg-type]
    cfg = dataclasses.replace(config(max_rounds=4, coder_retries=1, memory=False, scripted="relu-cpu"), run_id=RUN_ID)
    runner.run(cfg, runner.RunParts(models(session), FakeEvaluator(), scripted=session))  # type: ignore[arg-type]

    out = HERE / "run"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(cfg.run_dir, out, ignore=shutil.ignore_patterns("checkpoints.sqlite*", "results", ".lock"))
    run_dir = str(cfg.run_dir)
    base = dt.datetime(2026, 11, 24, 12, 0, 0, tzinfo=dt.UTC)
    trajectory = json.loads((out / "trajectory.json").read_text())
    for position, event in enumerate(trajectory["events"]):
        event["ts"] = (base + dt.timedelta(seconds=1.5 * position)).isoformat(timespec="milliseconds")
        if "seconds" in event:
            event["seconds"] = 1.5
    text = json.dumps(trajectory, indent=1).replace(run_dir, "$RUN_DIR")
    (out / "trajectory.json").write_text(text + "\n")
    for name in ("summary.json", "config.json"):
        text = (out / name).read_text().replace(run_dir, "$RUN_DIR").replace(str(cfg.runs_dir), "$RUNS_DIR")
        (out / name).write_text(text.replace(str(scratch / "memory.sqlite"), "$RUNS_DIR/memory.sqlite"))
    print(f"recorded {len(trajectory['events'])} events into {out}")


if __name__ == "__main__":
    main()
