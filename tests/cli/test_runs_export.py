"""`runs export --format jsonl` (#31: the program database as a dataset) and the database table of
`runs show`, on a real run folder left by the scripted session and the fake evaluator."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernelwright.agent import runner
from kernelwright.agent.dataset import ExportError, Row, load_export
from kernelwright.agent.scripted import ScriptedSession
from tests.agent.helpers import FakeEvaluator, code, config, models, plan, review, run_cli


@pytest.fixture(scope="module")
def made_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two rounds: a build error repaired into a correct but slow kernel (round 1), then a faster
    one from it (round 2) that beats the target. Made once; each test gets a copy."""
    where = tmp_path_factory.mktemp("made")
    session = ScriptedSession(
        {
            "planner": [plan("fuse the scale into the relu"), plan("unroll the loop four times")],
            "coder": [code("build_error compile_error"), code("correct none 1.3"), code("correct none 2.0")],
            "reviewer": [review(), review()],
        }  # type: ignore[arg-type]
    )
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KERNELWRIGHT_RUNS_DIR", str(where / "runs"))
        env.setenv("KERNELWRIGHT_MEMORY_DB", str(where / "memory.sqlite"))
        cfg = config(target=1.5, max_rounds=2)
        outcome = runner.run(cfg, runner.RunParts(models(session), FakeEvaluator(), scripted=session))  # type: ignore[arg-type]
    assert [c["verdict"] for c in outcome.candidates] == ["build_error", "correct", "correct"]
    return cfg.run_dir


@pytest.fixture
def run_id(made_run: Path, tmp_path: Path) -> str:
    """The run, copied into this test's runs folder."""
    shutil.copytree(made_run, tmp_path / "runs" / made_run.name)
    return made_run.name


def test_export_loads_back_with_the_schema_and_carries_the_database(
    run_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "export" / "run.jsonl"
    assert run_cli(["runs", "export", run_id, "--format", "jsonl", "--output", str(out)]) == 0
    rows = load_export(out)
    assert [r.index for r in rows] == [1, 2, 3] and all(isinstance(r, Row) for r in rows)
    broken, slow, fast = rows
    assert broken.verdict == "build_error" and broken.reason == "compile_error"
    assert "was not declared" in broken.stderr_tail and broken.speedups == {}
    assert "# judge: correct none 2.0" in fast.kernel_code and "class ModelNew" in fast.kernel_code
    assert fast.plan == "unroll the loop four times" and fast.parents == [slow.index] and fast.beats_target
    assert "fusion" in slow.tags and slow.plan == "fuse the scale into the relu"
    speed = fast.speedups["compile"]
    assert speed.ratio == 2.0 and speed.ci_low < 2.0 < speed.ci_high and speed.candidate_median_ms == 0.5
    assert fast.problem == "level1/1_relu" and fast.python_code and "class Model" in fast.python_code
    assert fast.run_id == run_id and fast.round == 2 and fast.feedback.startswith("fake correct")
    assert fast.backend and fast.device == "cpu" and fast.schema_version == 1

    assert run_cli(["runs", "export", run_id]) == 0  # stdout: the same lines
    assert capsys.readouterr().out == out.read_text()

    lines = out.read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), "verdict": "great"})
    out.write_text("\n".join(lines) + "\n")
    with pytest.raises(ExportError, match=r"line 2: verdict"):
        load_export(out)
    out.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(ExportError, match=r"line 2"):
        load_export(out)


def test_runs_show_prints_the_program_database(run_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["runs", "show", run_id]) == 0
    shown = capsys.readouterr().out
    assert "program database" in shown and "build_error (compile_error)" in shown
    assert "2.00x [1.90, 2.10] vs compile" in shown and "unroll the loop four times" in shown
    [row] = [line for line in shown.splitlines() if "2.00x" in line]
    assert row.split("│")[1].strip() == "3" and "correct *" in row  # its index; * beats the target


def test_unknown_run_is_exit_2_and_a_run_without_candidates_exports_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["runs", "export", "no-such-run"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"usage error: no run 'no-such-run' in {tmp_path / 'runs'} (`kernelwright runs list` shows the runs)"
    ]
    empty = tmp_path / "runs" / "empty-run"
    empty.mkdir(parents=True)
    (empty / "config.json").write_text(json.dumps({"problem": "relu", "device": "cpu"}))
    (empty / "summary.json").write_text(json.dumps({"schema_version": 1, "problem": "relu", "candidates": []}))
    assert run_cli(["runs", "export", "empty-run"]) == 0
    assert capsys.readouterr().out == ""
    assert run_cli(["runs", "export", "empty-run", "--format", "csv"]) == 2


def test_a_profiled_candidate_carries_its_digest(run_id: str, tmp_path: Path) -> None:
    summary_path = tmp_path / "runs" / run_id / "summary.json"
    summary = json.loads(summary_path.read_text())
    assert "profiles" in summary and "history" in summary  # summary.json now keeps them
    summary["profiles"] = {"3": {"index": 3, "text": "dram 91% of peak: memory bound", "note": ""}}
    summary_path.write_text(json.dumps(summary))
    out = tmp_path / "run.jsonl"
    assert run_cli(["runs", "export", run_id, "-o", str(out)]) == 0
    assert [r.profile for r in load_export(out)] == [None, None, "dram 91% of peak: memory bound"]
