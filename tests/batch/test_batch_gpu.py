"""`batch judge` on a GPU host: bundled CUDA oracles laid out as KernelBench generations, judged by
a worker pinned to one GPU (CUDA_VISIBLE_DEVICES), with their manifest's verdicts; the correct
one is timed against eager. Then a KernelBench level-1 slice with our own candidates
(benchmarks/level1_cuda) judged at the default size against its expected.json. Skips without a
GPU."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernelwright.batch.results import read_records
from kernelwright.cli import main
from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import SOLUTIONS, all_solutions

pytestmark = pytest.mark.gpu

LEVEL1_CUDA = Path(__file__).resolve().parents[2] / "benchmarks" / "level1_cuda"
WRONG_OUTPUT = {"output_mismatch", "nonfinite_output"}  # a wrong kernel may give either, depending on the inputs

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


@pytest.mark.timeout(1200)
def test_judge_level1_cuda_slice_against_its_manifest(tmp_path: Path) -> None:
    """Every file of benchmarks/level1_cuda judged on one GPU at the default size (fuzzed trials,
    shape variants, work share, timing against eager and torch.compile) gets the verdict and
    reason expected.json gives it. KERNELWRIGHT_TEST_SLICE_OUT (an absolute path) names a batch
    folder that outlives the test: a run cut short (a device lease ending) is resumed by running
    the test again."""
    entries = json.loads((LEVEL1_CUDA / "expected.json").read_text())
    ids = sorted({resolve_problem(e["problem"]).id for e in entries})
    kept = os.environ.get("KERNELWRIGHT_TEST_SLICE_OUT")
    out = Path(kept) if kept else tmp_path / "batch"
    argv = ["batch", "judge", "level1", "--ids", ",".join(map(str, ids)), "--candidates", str(LEVEL1_CUDA)]
    argv += ["--out", str(out), "--device", "cuda", "--workers", "1", "--size", "default"]
    argv += ["--baselines", "eager,compile", "--quiet"]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    records = {r.candidate: r for r in read_records(out / "results.jsonl") if r.kind == "candidate"}
    wrong = []
    for e in entries:
        record = records.get(e["file"])
        if record is None:
            wrong.append(f"{e['file']}: no result")
            continue
        want, got = (e["expected"], e["reason"]), (record.verdict, record.reason)
        same = got == want or (want[0] == got[0] == "incorrect" and want[1] in WRONG_OUTPUT and got[1] in WRONG_OUTPUT)
        if not same:
            wrong.append(f"{e['file']} ({e['problem']}): {got}, expected {want}: {record.message[:300]}")
    assert not wrong, "\n".join(wrong)
    assert exited.value.code == 1  # the known-wrong and the rejected ones; nothing crashed
    report = json.loads((out / "report.json").read_text())
    correct = {e["problem"] for e in entries if e["expected"] == "correct"}
    assert report["correctness"]["correct_problems"] == len(correct)
