"""`batch judge --ray local`: problems judged by Ray actors (two here) of a local Ray instance
(recent Ray has no local_mode), results streamed back into the same resumable file, evidence
written into the batch folder. Kept light: one problem, one candidate rejected before anything
builds, correctness only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.batch.results import read_records
from kernelwright.cli import main
from kernelwright.problems.solutions_index import SOLUTIONS

pytestmark = pytest.mark.slow


def test_judge_on_a_local_ray_instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # no token file written into the user's home
    cands = tmp_path / "c"
    cands.mkdir()
    (cands / "sum_reduction.py").write_text((SOLUTIONS / "sum_reduction" / "cpp_wrong_half_accum.py").read_text())
    out = tmp_path / "batch"
    argv = ["batch", "judge", "sum_reduction", "--candidates", str(cands), "--out", str(out), "--device", "cpu"]
    argv += ["--size", "small", "--baselines", "eager", "--no-timing", "--quiet", "--ray", "local", "--workers", "2"]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 1
    [record] = read_records(out / "results.jsonl")
    assert (record.verdict, record.reason) == ("rejected", "precision_downgrade")
    assert record.worker.startswith("ray:")
    assert record.evidence and json.loads((out / record.evidence).read_text())["reason"] == "precision_downgrade"
    assert json.loads((out / "batch.json").read_text())["invocations"][-1]["status"] == "finished"
