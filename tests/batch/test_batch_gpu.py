"""`batch judge` on a GPU host: bundled CUDA oracles laid out as KernelBench generations, judged by
a worker pinned to one GPU (CUDA_VISIBLE_DEVICES), with their manifest's verdicts; the correct
one is timed against eager. Then a KernelBench level-1 slice with our own candidates
(benchmarks/level1_cuda) judged at the default size against its expected.json. Skips without a
GPU. Then the agent's evaluation pool (`batch/eval_pool.py`) with one session per visible GPU."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernelwright.batch.eval_pool import EvalPool, device_slots
from kernelwright.batch.results import read_records
from kernelwright.batch.spec import JudgeSpec
from kernelwright.cli import main
from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import SOLUTIONS, all_solutions
from kernelwright.vocabulary import Device, Size

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


def test_eval_pool_judges_on_every_visible_gpu_at_the_default_size(tmp_path: Path, shared_home: Path) -> None:
    """One warm session per visible GPU (one on a one-GPU host), each pinned: the bundled fast
    relu, a variant of it and the wrong-tail oracle, in the caller's order, each with its
    manifest's verdict, the correct ones timed on the slot that judged them."""
    fast = (SOLUTIONS / "relu" / "cuda_fast.py").read_text()
    body = "if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;"
    assert body in fast
    sources = {
        "cuda_fast.py": fast,
        "cuda_fast_variant.py": fast.replace(body, "if (i < n) y[i] = fmaxf(x[i], 0.f);").replace(
            "kw_relu_cuda_fast", "kw_relu_pool_gpu_variant"
        ),
        "cuda_wrong_tail64.py": (SOLUTIONS / "relu" / "cuda_wrong_tail64.py").read_text(),
    }
    paths = []
    for name, source in sources.items():
        (tmp_path / name).write_text(source)
        paths.append(tmp_path / name)
    spec = JudgeSpec(
        device=Device.CUDA,
        size=Size.DEFAULT,
        baselines=["eager", "compile"],
        timing=True,
        build_cache=shared_home / "build-cache",
        inductor_cache=shared_home / "inductor-cache",
        run_timeout_s=300,
        build_timeout_s=300,
    )
    slots = device_slots(Device.CUDA)
    assert slots and all(s.label.startswith("gpu") for s in slots)
    with EvalPool(resolve_problem("relu"), spec, slots, tmp_path / "logs", out_dir=tmp_path / "evidence") as pool:
        baselines = pool.baseline_ms()
        results = pool.evaluate(paths)
    assert set(baselines) == {"eager", "compile"} and all(ms > 0 for ms in baselines.values())
    assert [Path(r.candidate).name for r in results] == list(sources)
    wrong = next(s for s in all_solutions() if s.path.name == "cuda_wrong_tail64.py")
    got = [(r.verdict.value, r.reason.value if r.reason else None) for r in results]
    assert got[:2] == [("correct", None), ("correct", None)], [r.message for r in results]
    assert wrong.accepts(*got[2]), results[2].message
    assert {r.hardware["slot"] for r in results} <= {s.label for s in slots}
    for r in results[:2]:
        assert r.phase_seconds.get("timing", 0) > 0
        assert r.speedups or r.flags, r.message  # timed, or said why no speedup is reported
    judged = ", ".join(f"{Path(r.candidate).name} {r.verdict.value} on {r.hardware['slot']}" for r in results)
    print(f"\n{len(slots)} GPU slot(s): {judged}")
