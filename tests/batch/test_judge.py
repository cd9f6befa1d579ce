"""`batch judge` with the real harness on the CPU: bundled oracles laid out as KernelBench
generations get their manifest's verdicts on two workers; a malformed candidate, a candidate for
no problem and a malformed problem file are reported while the rest goes on; a rerun skips what
is done; a results file left by a kill (done lines and a torn one) is resumed; building ahead and
opening the next problem's session ahead leave the verdicts as they are.

Kept cheap: --size small, correctness only (timing on a shared 2-core machine would make the
verdicts depend on its load; the speed figures are tested on a fixture in test_batch_report.py),
and oracles that build in the fast form or are rejected before anything builds."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kernelwright.batch.results import read_records
from kernelwright.cli import main
from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import SOLUTIONS, all_solutions
from tests.harness.test_prebuild import variant

RELU_FAST = SOLUTIONS / "relu" / "cpp_fast.py"
HALF_ACCUM = SOLUTIONS / "sum_reduction" / "cpp_wrong_half_accum.py"
COMMON = ["--device", "cpu", "--size", "small", "--baselines", "eager", "--no-timing", "--quiet"]


pytestmark = pytest.mark.slow  # real builds and harness workers


def run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return int(exited.value.code or 0)


def _expected(path: Path) -> tuple[str, str | None]:
    [entry] = [s for s in all_solutions() if s.path == path]
    return entry.expected, entry.reason


def _copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(src.read_text())


def test_judge_two_workers_expected_verdicts_malformed_files_and_a_rerun(tmp_path: Path) -> None:
    cands = tmp_path / "generations"
    _copy(RELU_FAST, cands / "level_1" / "problem_1" / "sample_0.py")
    (cands / "level_1" / "problem_1" / "sample_1.py").write_text("import torch\nclass ModelNew(\n")  # malformed
    _copy(HALF_ACCUM, cands / "level_1" / "problem_7" / "sample_0.py")
    _copy(RELU_FAST, cands / "level_1" / "problem_999" / "sample_0.py")  # no such problem
    broken = tmp_path / "more_problems" / "level1"
    broken.mkdir(parents=True)
    (broken / "50_broken.py").write_text("import torch\n\ndef get_inputs():\n    return []\n")  # no Model
    out = tmp_path / "batch"
    events = tmp_path / "events.jsonl"
    argv = ["batch", "judge", "relu", "sum_reduction", str(tmp_path / "more_problems"), "--candidates", str(cands)]
    argv += ["--out", str(out), *COMMON, "--workers", "2"]

    # malformed candidate and problem file: exit 2 (the highest code), after judging the rest
    assert run_cli([*argv, "--events-json", str(events)]) == 2
    records = {r.candidate: r for r in read_records(out / "results.jsonl")}
    assert set(records) == {
        "level_1/problem_1/sample_0.py",
        "level_1/problem_1/sample_1.py",
        "level_1/problem_7/sample_0.py",
    }
    got = {rel: (r.verdict, r.reason) for rel, r in records.items()}
    assert got["level_1/problem_1/sample_0.py"] == _expected(RELU_FAST)
    assert got["level_1/problem_7/sample_0.py"] == _expected(HALF_ACCUM)
    assert got["level_1/problem_1/sample_1.py"] == ("build_error", "malformed_candidate")
    assert records["level_1/problem_1/sample_1.py"].exit_code == 2
    assert {r.worker for r in records.values()} == {"cpu0", "cpu1"}  # one problem each
    relu = records["level_1/problem_1/sample_0.py"]
    assert relu.evidence and json.loads((out / relu.evidence).read_text())["verdict"] == "correct"

    kinds = [json.loads(line)["kind"] for line in events.read_text().splitlines()]
    assert kinds[0] == "batch_started" and kinds[-1] == "batch_finished" and kinds.count("result") == 3
    assert kinds.count("problem_started") == 2
    finished = json.loads(events.read_text().splitlines()[-1])
    assert finished["exit_code"] == 2 and finished["correct"] == 1

    report = json.loads((out / "report.json").read_text())
    assert report["problems_total"] == 3  # relu, sum_reduction and the broken file
    assert report["correctness"]["correct_problems"] == 1
    assert report["unmatched_candidates"][0][0] == "level_1/problem_999/sample_0.py"
    assert "50_broken.py" in report["problem_errors"][0]
    assert (out / "report.md").is_file() and not (out / "plots").exists()  # nothing timed: no plots

    # the same command again: everything is done, nothing runs, the same exit code
    lines_before = (out / "results.jsonl").read_text()
    assert run_cli(argv) == 2
    assert (out / "results.jsonl").read_text() == lines_before
    assert json.loads((out / "batch.json").read_text())["invocations"][-1]["already_done"] == 3

    # other options into the same folder are refused
    assert run_cli([*argv, "--trials", "6"]) == 2


def test_resume_after_a_kill_skips_done_lines_and_drops_a_torn_one(tmp_path: Path) -> None:
    cands = tmp_path / "one_per_problem"
    _copy(RELU_FAST, cands / "1_relu.py")
    _copy(HALF_ACCUM, cands / "sum_reduction.py")
    out = tmp_path / "batch"
    out.mkdir()
    relu = resolve_problem("relu")
    done = {
        "schema_version": 1,
        "kind": "candidate",
        "key": "level1/1_relu::1_relu.py",
        "problem": "level1/1_relu",
        "problem_sha256": relu.sha256,
        "candidate": "1_relu.py",
        "candidate_sha256": hashlib.sha256(RELU_FAST.read_text().encode()).hexdigest(),
        "verdict": "correct",
        "worker": "cpu0",
        "message": "judged before the kill",
    }
    (out / "results.jsonl").write_text(json.dumps(done) + "\n" + '{"schema_version": 1, "kind": "candidate", "ke')
    argv = ["batch", "judge", "relu", "sum_reduction", "--candidates", str(cands), "--out", str(out), *COMMON]
    assert run_cli(argv) == 1  # the rejected half-precision sum
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [line["candidate"] for line in lines] == ["1_relu.py", "sum_reduction.py"]
    assert lines[0]["message"] == "judged before the kill"  # not judged again
    assert (lines[1]["verdict"], lines[1]["reason"]) == _expected(HALF_ACCUM)


def test_builds_ahead_and_the_next_session_opened_ahead_keep_the_verdicts(tmp_path: Path) -> None:
    """One worker, two problems (relu, and a copy of it as problem 50): every candidate but the
    first is queued to build ahead, and problem 50's session opens while relu's candidates are
    judged. The verdicts are the oracles' (the one that fails to build ahead still gets its
    compile error when judged), a build done ahead is found cached, and the results say what
    was done ahead."""
    cands = tmp_path / "generations" / "level_1"
    for folder, name, broken in [
        ("problem_1", "sample_0", False),
        ("problem_1", "sample_1", False),
        ("problem_1", "sample_2", True),
        ("problem_50", "sample_0", False),
    ]:
        (cands / folder).mkdir(parents=True, exist_ok=True)
        variant(cands / folder, name, broken=broken)
    copy = tmp_path / "more_problems" / "level1" / "50_relu_copy.py"
    copy.parent.mkdir(parents=True)
    copy.write_text(resolve_problem("relu").path.read_text())
    out = tmp_path / "batch"
    argv = ["batch", "judge", "relu", str(tmp_path / "more_problems"), "--candidates", str(tmp_path / "generations")]
    assert run_cli([*argv, "--out", str(out), *COMMON]) == 3  # the compile error

    records = {f"{r.problem_id}/{Path(r.candidate or '').stem}": r for r in read_records(out / "results.jsonl")}
    got = {key: (r.verdict, r.reason) for key, r in records.items()}
    assert got == {
        "1/sample_0": _expected(RELU_FAST),
        "1/sample_1": _expected(RELU_FAST),
        "1/sample_2": ("build_error", "compile_error"),
        "50/sample_0": _expected(RELU_FAST),
    }
    assert "no_such_header" in records["1/sample_2"].message
    assert records["50/sample_0"].ahead["session"] > 0  # opened while relu was judged
    assert "session" not in records["1/sample_0"].ahead  # the first problem's opened at its turn
    prebuilt = [key for key, r in records.items() if "prebuild" in r.ahead]
    assert prebuilt and all(records[key].build_cached for key in prebuilt)
    log = (out / "logs" / "worker-cpu0.log").read_text()
    assert "building 3 candidates ahead, 1 at a time" in log  # all but the first, which the judge builds
    assert not (out / "staging" / "build-claims").exists()


def test_a_session_opened_ahead_whose_reference_timed_out_is_opened_again_at_its_turn() -> None:
    """The reference's time limit runs while the measurements of the problem before hold it: a
    reference that ran out of time ahead is no verdict on its problem."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from kernelwright.batch.ahead import JudgeWorker, Relay, _Opened
    from kernelwright.batch.pool import Backlog
    from kernelwright.harness.workers.process import Outcome

    closed: list[str] = []

    def opened(task_id: int, outcome: Outcome) -> _Opened:
        pending: Future[tuple[None, Outcome]] = Future()
        pending.set_result((None, outcome))
        session = SimpleNamespace(ctx=SimpleNamespace(pending=pending), close=lambda: closed.append(f"t{task_id}"))
        return _Opened(task_id, "sha", session, Relay(), 0.0)  # type: ignore[arg-type]

    worker = JudgeWorker(Backlog())
    try:
        worker._opened = opened(1, Outcome(None, timed_out=True, detail="reference took longer than 300 s"))
        assert worker.take_session({"id": 1, "problem_sha256": "sha"}, print) is None
        worker._opened = opened(2, Outcome(None, timed_out=False))
        assert worker.take_session({"id": 3, "problem_sha256": "sha"}, print) is None  # not the task that came
        worker._opened = opened(4, Outcome(None, timed_out=False))
        taken = worker.take_session({"id": 4, "problem_sha256": "sha"}, print)
        assert taken is not None and closed == ["t1", "t2"]
    finally:
        worker.close()
