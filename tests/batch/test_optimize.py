"""`batch optimize --scripted` on two built-in problems with the real graph and harness on the
CPU: relu runs the shipped relu-cpu script (one round, correctness only, to stay quick and
independent of this machine's load), gelu has no script and ends as `no_script`, cleanly; a rerun
skips both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.batch.results import read_records
from kernelwright.cli import main

pytestmark = pytest.mark.slow  # real builds and harness workers


def run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return int(exited.value.code or 0)


def test_scripted_batch_optimize_on_two_problems(tmp_path: Path) -> None:
    out = tmp_path / "batch"
    events = tmp_path / "events.jsonl"
    argv = ["batch", "optimize", "relu", "gelu", "--out", str(out), "--scripted", "--device", "cpu"]
    argv += ["--size", "small", "--rounds", "1", "--no-timing", "--threads", "1", "--quiet"]
    assert run_cli([*argv, "--events-json", str(events)]) == 1  # neither problem reached its target
    records = {r.problem: r for r in read_records(out / "results.jsonl")}
    relu, gelu = records["level1/1_relu"], records["level1/2_gelu"]
    assert (relu.kind, relu.verdict, relu.accepted, relu.run_id) == (
        "optimize",
        "correct",
        False,
        "batch-level1-1_relu",
    )
    assert relu.stop_reason and "1 round" in relu.stop_reason
    summary = json.loads((out / relu.evidence).read_text()) if relu.evidence else {}
    assert summary["scripted"] == "relu-cpu" and [c["verdict"] for c in summary["candidates"]] == ["correct"]
    assert (gelu.reason, gelu.verdict, gelu.exit_code, gelu.final) == ("no_script", None, 1, True)
    assert "relu-cpu" in gelu.message
    assert not (out / "runs" / "batch-level1-2_gelu").exists()
    report = json.loads((out / "report.json").read_text())
    assert report["mode"] == "optimize" and report["correctness"]["correct_problems"] == 1
    assert report["reasons"] == {"no_script": 1}
    kinds = [json.loads(line)["kind"] for line in events.read_text().splitlines()]
    assert kinds.count("result") == 2 and "worker_status" in kinds

    assert run_cli(argv) == 1  # rerun: both done, nothing runs
    assert len(read_records(out / "results.jsonl")) == 2
