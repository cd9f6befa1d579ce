"""Batch plumbing that needs no harness: candidate layouts and matching, the problem set, the
results file (torn lines, final and retried keys), the manifest's refusal to mix options, the
plan's resume rules, worker slots, exit codes, and the missing-Ray error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.batch.engine import exit_code_of, plan_judge
from kernelwright.batch.layout import match_candidates, parse_candidate
from kernelwright.batch.problem_set import parse_ids, resolve_problem_set
from kernelwright.batch.results import BatchRecord, Manifest, ResultsFile, done_keys
from kernelwright.batch.spec import JudgeSpec, plan_slots, visible_gpus
from kernelwright.cli import main
from kernelwright.errors import UsageError
from kernelwright.harness.checks.static.analysis import analyze_candidate
from kernelwright.harness.reasons import lookup
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import SOLUTIONS

RELU_FAST = SOLUTIONS / "relu" / "cpp_fast.py"
LEVEL1_CUDA = Path(__file__).resolve().parents[2] / "benchmarks" / "level1_cuda"


def run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return int(exited.value.code or 0)


def _write(root: Path, rel: str, text: str = "class ModelNew: pass\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("rel", "level", "pid", "stem", "sample"),
    [
        ("level_1/problem_19/sample_0.py", 1, 19, None, 0),
        ("level1/problem19/3.py", 1, 19, None, 3),
        ("LEVEL-2/Problem_4/Sample_1.py", 2, 4, None, 1),
        ("level_1_problem_19_sample_2_kernel.py", 1, 19, None, 2),
        ("run_a/level_3_problem_5_sample_0.py", 3, 5, None, 0),
        ("problem_7/sample_1.py", None, 7, None, 1),
        ("level1/problem_7/sample_1.py", 1, 7, None, 1),
        ("19_ReLU.py", None, None, "19_ReLU", None),
        ("level2/gemm_bias_relu.py", 2, None, "gemm_bias_relu", None),
    ],
)
def test_candidate_layouts(
    tmp_path: Path, rel: str, level: int | None, pid: int | None, stem: str | None, sample: int | None
) -> None:
    parsed = parse_candidate(_write(tmp_path, rel), tmp_path)
    assert parsed is not None
    assert (parsed.level, parsed.problem_id, parsed.stem, parsed.sample) == (level, pid, stem, sample)


def test_candidates_are_matched_by_level_id_or_name_and_the_rest_reported(tmp_path: Path) -> None:
    problems = resolve_problem_set(["level1", "level2"]).problems
    for rel in (
        "level_1/problem_1/sample_0.py",
        "level_1/problem_1/sample_1.py",
        "level_1_problem_7_sample_0_kernel.py",
        "gelu.py",  # by name
        "11_softmax.py",  # by stem
        "level2/1.py",  # by id within a level
        "level_1/problem_999/sample_0.py",  # no such problem
        "problem_1/sample_0.py",  # id 1 exists in level 1 and level 2: ambiguous
        "somewhere/else/kernel.py",  # no layout
        "_private/level_1/problem_1/sample_9.py",  # ignored
    ):
        _write(tmp_path, rel)
    matched = match_candidates(problems, tmp_path)
    assert {k: [c.rel for c in v] for k, v in matched.by_problem.items()} == {
        "level1/1_relu": ["level_1/problem_1/sample_0.py", "level_1/problem_1/sample_1.py"],
        "level1/7_sum_reduction": ["level_1_problem_7_sample_0_kernel.py"],
        "level1/2_gelu": ["gelu.py"],
        "level1/11_softmax": ["11_softmax.py"],
        "level2/1_gemm_bias_relu": ["level2/1.py"],
    }
    why = dict(matched.unmatched)
    assert set(why) == {"level_1/problem_999/sample_0.py", "problem_1/sample_0.py", "somewhere/else/kernel.py"}
    assert "no level 1 problem id 999" in why["level_1/problem_999/sample_0.py"]
    assert "ambiguous" in why["problem_1/sample_0.py"]


def test_level1_cuda_slice_matches_its_manifest() -> None:
    """benchmarks/level1_cuda: every file is listed in expected.json (and every listed file
    exists), the layout matcher gives each the manifest's built-in problem with nothing
    unmatched, and the expected verdicts and reasons are the harness's own values."""
    entries = json.loads((LEVEL1_CUDA / "expected.json").read_text())
    listed = [e["file"] for e in entries]
    assert len(listed) == len(set(listed)), "a file listed twice"
    on_disk = sorted(p.relative_to(LEVEL1_CUDA).as_posix() for p in LEVEL1_CUDA.rglob("*.py"))
    assert sorted(listed) == on_disk
    matched = match_candidates(resolve_problem_set(["level1"]).problems, LEVEL1_CUDA)
    assert matched.unmatched == []
    got = {c.rel: problem for problem, files in matched.by_problem.items() for c in files}
    assert got == {e["file"]: e["problem"] for e in entries}
    for e in entries:
        verdict = Verdict(e["expected"])
        assert verdict in (Verdict.CORRECT, Verdict.INCORRECT, Verdict.REJECTED), e["file"]
        if verdict == Verdict.CORRECT:
            assert e["reason"] is None, e["file"]
        else:
            assert lookup(Reason(e["reason"]).value).verdict == verdict, e["file"]
        assert e["note"].strip(), e["file"]
    assert len({e["problem"] for e in entries if e["expected"] == "correct"}) >= 25


def test_problem_set_from_levels_lists_and_folders_with_a_malformed_file(tmp_path: Path) -> None:
    folder = tmp_path / "probs" / "level1"
    folder.mkdir(parents=True)
    (folder / "40_mine.py").write_text(resolve_problem("relu").source)
    (folder / "41_broken.py").write_text("import torch\n\ndef get_inputs():\n    return []\n")  # no Model
    listing = tmp_path / "set.txt"
    listing.write_text("# a list file\nrelu\nlevel1/2_gelu  # by qualified name\nprobs\n")
    found = resolve_problem_set([str(listing)])
    assert [p.qualified for p in found.problems] == ["level1/1_relu", "level1/2_gelu", "level1/40_mine"]
    assert len(found.errors) == 1 and "41_broken.py" in found.errors[0].message
    assert [p.id for p in resolve_problem_set(["level1"], ids=parse_ids("1-3,7")).problems] == [1, 2, 3, 7]
    assert parse_ids("2, 5-6") == {2, 5, 6}
    with pytest.raises(UsageError, match="unknown problem"):
        resolve_problem_set(["no_such_problem_name"])
    with pytest.raises(UsageError, match="empty"):
        resolve_problem_set(["level1"], ids={999})


def _record(key: str, final: bool = True, code: int = 0, **more: object) -> BatchRecord:
    return BatchRecord(kind="candidate", key=key, problem="level1/1_relu", final=final, exit_code=code, **more)  # type: ignore[arg-type]


def test_results_file_cuts_a_torn_line_and_keeps_the_latest_line_per_key(tmp_path: Path) -> None:
    results = ResultsFile(tmp_path)
    results.append(_record("a", final=False, code=5))
    results.append(_record("b", code=1))
    with open(results.path, "ab") as handle:
        handle.write(b'{"schema_version": 1, "kind": "cand')  # what a kill -9 mid-write leaves
    results = ResultsFile(tmp_path)  # a rerun opens it: the torn line goes
    results.append(_record("a", code=0))
    lines = results.path.read_text().splitlines()
    assert len(lines) == 3 and all(line.endswith("}") for line in lines)
    done = done_keys(results.read())
    assert set(done) == {"a", "b"} and done["a"].exit_code == 0


def test_a_folder_judged_with_other_options_is_refused(tmp_path: Path) -> None:
    first = Manifest(mode="judge", judged_with={"device": "cpu", "size": "small"})
    first.save(tmp_path)
    again = Manifest(mode="judge", judged_with={"device": "cpu", "size": "default"})
    with pytest.raises(UsageError, match="size"):
        again.check_compatible(Manifest.load(tmp_path), tmp_path)
    with pytest.raises(UsageError, match="batch judge"):
        Manifest(mode="optimize").check_compatible(Manifest.load(tmp_path), tmp_path)


def test_plan_skips_final_results_and_rejudges_changed_files(tmp_path: Path) -> None:
    candidates = tmp_path / "candidates"
    _write(candidates, "level_1/problem_1/sample_0.py", RELU_FAST.read_text())
    _write(candidates, "level_1/problem_1/sample_1.py", RELU_FAST.read_text() + "\n# changed\n")
    _write(candidates, "level_1/problem_2/sample_0.py", "broken(\n")
    out = tmp_path / "out"
    problems = resolve_problem_set(["relu", "gelu"])
    spec = JudgeSpec(device="cpu", size="small", baselines=["eager"], timing=False, build_cache=tmp_path / "bc")
    first = plan_judge(problems, candidates, spec, out)
    assert first.to_do == 3 and first.already_done == 0 and len(first.tasks) == 2
    relu = resolve_problem("relu")
    stubs = {**first.tasks[0]["stubs"], **first.tasks[1]["stubs"]}
    results = ResultsFile(out)
    for key, stub in stubs.items():
        record = BatchRecord.model_validate(stub)
        if key.endswith("problem_1/sample_1.py"):
            record = record.model_copy(update={"candidate_sha256": "an older version"})
        if key.startswith("level1/2_gelu"):
            record = record.model_copy(update={"final": False, "exit_code": 5})  # an environment error: retried
        results.append(record.model_copy(update={"verdict": "correct"}))
    again = plan_judge(problems, candidates, spec, out)
    assert again.already_done == 1
    assert sorted(k for t in again.tasks for k in t["stubs"]) == [
        "level1/1_relu::level_1/problem_1/sample_1.py",
        "level1/2_gelu::level_1/problem_2/sample_0.py",
    ]
    assert again.tasks[0]["problem_sha256"] == relu.sha256
    assert exit_code_of(again, results.read()) == 5


def test_worker_slots_split_the_cores_and_pin_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    slots = plan_slots("cpu", workers=2, gpus=None, cores=[0, 1, 2, 3, 4])
    assert [(s.label, s.cores, s.threads) for s in slots] == [("cpu0", [0, 1, 2], 3), ("cpu1", [3, 4], 2)]
    assert slots[0].build_jobs == 3 and slots[0].env() == {}
    crowded = plan_slots("cpu", workers=3, gpus=None, threads=1, cores=[0, 1])
    assert all(s.cores is None and s.threads == 1 for s in crowded)  # fewer cores than workers: no pinning
    gpu = plan_slots("cuda", workers=None, gpus=["2", "5"], cores=list(range(8)))
    assert [(s.label, s.env(), s.cores) for s in gpu] == [
        ("gpu2", {"CUDA_VISIBLE_DEVICES": "2"}, [0, 1, 2, 3]),
        ("gpu5", {"CUDA_VISIBLE_DEVICES": "5"}, [4, 5, 6, 7]),
    ]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert visible_gpus(2) == ["3", "1"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_gpus(2) == ["0", "1"]
    with pytest.raises(UsageError):
        plan_slots("cpu", workers=1, gpus=["0"])


def test_builds_ahead_keep_off_the_cores_judging_keeps_on_a_gpu(tmp_path: Path) -> None:
    [h100] = plan_slots("cuda", workers=None, gpus=["0"], cores=list(range(16)))
    assert h100.build_cores("cuda") == list(range(4, 16))  # a quarter (4) kept for judging
    spec = JudgeSpec(device="cuda", build_cache=tmp_path)
    assert spec.builds_ahead(h100) == 6 and spec.open_ahead  # one per two build cores
    assert JudgeSpec(device="cuda", build_cache=tmp_path, build_ahead=0).builds_ahead(h100) == 0
    small = plan_slots("cuda", workers=None, gpus=["0", "1"], cores=list(range(6)))
    assert [s.build_cores("cuda") for s in small] == [[0, 1, 2], [3, 4, 5]]  # too few to keep any
    assert spec.builds_ahead(small[0]) == 1
    [cpu] = plan_slots("cpu", workers=1, gpus=None, cores=list(range(8)))
    assert cpu.build_cores("cpu") == list(range(8))  # the CPU times on every core: builds pause instead
    assert JudgeSpec(device="cpu", build_cache=tmp_path).builds_ahead(cpu) == 1


def test_ray_missing_is_an_environment_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    _write(tmp_path / "c", "level_1/problem_1/sample_0.py", RELU_FAST.read_text())
    argv = ["batch", "judge", "relu", "--candidates", str(tmp_path / "c"), "--out", str(tmp_path / "o")]
    assert run_cli([*argv, "--device", "cpu", "--ray", "local", "--quiet"]) == 5
    assert "pip install 'kernelwright[ray]'" in capsys.readouterr().err
    assert run_cli([*argv, "--ray", "local", "--device", "auto"]) == 2  # with --ray the device must be named


def test_a_bad_optimize_flag_ends_the_command_before_any_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["batch", "optimize", "relu", "--out", str(tmp_path / "o"), "--device", "cpu", "--backend", "cuda"]
    assert run_cli([*argv, "--quiet"]) == 2
    assert "--backend cuda needs --device cuda" in capsys.readouterr().err
    assert not (tmp_path / "o" / "logs").exists()


def test_load_inline_copies_of_the_slice_pass_static_analysis_as_their_originals(tmp_path: Path) -> None:
    """scripts/gen_inline_slice.py (issue #29's KernelBench-form slice): each copy calls its
    extension's functions directly, so the static analysis finds what it finds in the fast-form
    original, reject for reject; a copy that hid the calls behind a namespace object was
    `kernel_not_launched` for all 46 files on an H200 (2026-11-28)."""
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "inline"
    done = subprocess.run(
        [sys.executable, str(root / "scripts" / "gen_inline_slice.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    entries = json.loads((out / "expected.json").read_text())
    assert len(entries) == len(json.loads((LEVEL1_CUDA / "expected.json").read_text()))
    for e in entries:
        dtype = resolve_problem(e["problem"]).meta.dtype
        text = (out / e["file"]).read_text()
        assert "load_inline(" in text and "load_kernels" not in text and "\nlib." not in text, e["file"]

        def rejects(source: str, dtype: str = dtype) -> set[str]:
            return {f.code for f in analyze_candidate(source, problem_dtype=dtype).findings if f.severity == "reject"}

        assert rejects(text) == rejects((LEVEL1_CUDA / e["file"]).read_text()), e["file"]
        assert "kernel_not_launched" not in rejects(text), e["file"]
