"""`batch judge` on a GPU host: bundled CUDA oracles laid out as KernelBench generations, judged by
a worker pinned to one GPU (CUDA_VISIBLE_DEVICES), with their manifest's verdicts; the correct
one is timed against eager. Skips without a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.problems.solutions_index import SOLUTIONS, all_solutions
from kernelwright.tools.batch.results import read_records

pytestmark = pytest.mark.gpu

ORACLES = {
    "sample_0.py": SOLUTIONS / "relu" / "cuda_fast.py",
    "sample_1.py": SOLUTIONS / "relu" / "cuda_wrong_tail64.py",
}


def test_judge_cuda_oracles_on_one_pinned_gpu(tmp_path: Path) -> None:
    expected = {s.path: (s.expected, s.reason) for s in all_solutions()}
    cands = tmp_path / "generations" / "level_1" / "problem_1"
    cands.mkdir(parents=True)
    for name, source in ORACLES.items():
        (cands / name).write_text(source.read_text())
    out = tmp_path / "batch"
    argv = ["batch", "judge", "relu", "--candidates", str(tmp_path / "generations"), "--out", str(out)]
    argv += ["--device", "cuda", "--workers", "1", "--size", "small", "--baselines", "eager", "--quiet"]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 1  # the wrong one
    records = {Path(r.candidate or "").name: r for r in read_records(out / "results.jsonl")}
    for name, source in ORACLES.items():
        record = records[name]
        assert (record.verdict, record.reason) == expected[source], record.message
        assert record.worker.startswith("gpu") and record.device == "cuda" and record.hardware
    report = json.loads((out / "report.json").read_text())
    assert report["correctness"]["correct_problems"] == 1
    assert report["fast_p"]["eager"] is not None
