"""`kernelwright demo` end to end on the CPU: the real graph, real builds, fuzzing and timing of
the scripted relu session, then `runs list` / `runs show` on what it left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent.helpers import run_cli


@pytest.mark.slow
def test_demo_runs_as_scripted_and_leaves_a_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = tmp_path / "events.jsonl"
    code = run_cli(["demo", "--device", "cpu", "--events-json", str(events)])
    shown = capsys.readouterr().out
    assert code == 0, shown
    assert "scripted" in shown and "the demo ran as scripted" in shown
    assert "torch_fallback" in shown and "was not declared" in shown
    [run_dir] = list((tmp_path / "runs").iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["scripted"] == "relu-cpu" and summary["accepted"]
    verdicts = ["correct", "build_error", "correct", "rejected", "correct", "correct"]
    assert [c["verdict"] for c in summary["candidates"]] == verdicts
    assert (run_dir / "best.py").read_text() == (run_dir / "candidates" / "006.py").read_text()
    assert len(list((run_dir / "results").glob("*.json"))) == 6
    # the repairs were edits to the coder's own failed drafts: only the edited lines changed
    fixed, unhacked = (run_dir / "candidates" / "003.py").read_text(), (run_dir / "candidates" / "005.py").read_text()
    assert "const float zero = 0.f;" in fixed and "torch.relu(x)" not in unhacked
    assert "lib.relu(x, y, x.numel())" in unhacked
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert lines[0]["kind"] == "run_started" and lines[0]["scripted"] == "relu-cpu"
    assert lines[-1]["kind"] == "run_finished" and lines[-1]["accepted"]

    assert run_cli(["runs", "list"]) == 0
    listed = capsys.readouterr().out
    assert run_dir.name in listed and "(scripted)" in listed
    assert run_cli(["runs", "list", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["run_id"] == run_dir.name and row["accepted"] and row["candidates"] == 6
    assert run_cli(["runs", "show", run_dir.name]) == 0
    assert "torch_fallback" in capsys.readouterr().out
    assert run_cli(["runs", "show", "no-such-run"]) == 2
    assert run_cli(["optimize", "--resume", run_dir.name]) == 2  # finished: nothing to resume
    assert "already finished" in capsys.readouterr().err
