"""The batch report on a hand-written results file (tests/data/batch): fast_p, the geometric mean,
correctness, reasons, time, the published-baseline comparison and the plots' axes, each checked
against figures worked out by hand in the fixture's README. No harness runs here."""

from __future__ import annotations

import itertools
import json
import math
import shutil
from pathlib import Path

import pytest

from kernelwright.batch.metrics import fast_p, geomean
from kernelwright.batch.report import build_report, write_report
from kernelwright.cli import main

FIXTURE = Path(__file__).parent.parent / "data" / "batch"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return int(exited.value.code or 0)


@pytest.fixture
def batch_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "batch"
    folder.mkdir()
    for name in ("batch.json", "results.jsonl"):
        shutil.copy(FIXTURE / name, folder / name)
    return folder


def test_fast_p_counts_correct_and_strictly_faster_over_the_whole_set() -> None:
    best = [(True, 1.2), (True, 0.5), (False, None), (True, None)]  # the last: correct, untimed
    assert fast_p(best, 6, 0.0) == pytest.approx(3 / 6)  # fast_0 is the correctness rate
    assert fast_p(best, 6, 0.5) == pytest.approx(1 / 6)  # 0.5 is not > 0.5
    assert fast_p(best, 6, 1.0) == pytest.approx(1 / 6)
    assert fast_p(best, 6, 1.2) == 0.0
    assert fast_p([], 0, 1.0) == 0.0
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([]) is None


def test_report_figures_match_the_hand_computed_ones(batch_dir: Path) -> None:
    report = build_report(batch_dir)
    # 5 problems in the set plus 1 malformed problem file: 6; 5_tanh and the broken file have no result.
    assert report["problems_total"] == 6
    assert report["problems_with_results"] == 4
    assert report["fast_p"]["eager"] == pytest.approx(
        {"0": 3 / 6, "0.5": 3 / 6, "0.8": 2 / 6, "1": 2 / 6, "1.5": 1 / 6, "2": 1 / 6}
    )
    assert report["fast_p"]["compile"] == pytest.approx(
        {"0": 3 / 6, "0.5": 2 / 6, "0.8": 2 / 6, "1": 1 / 6, "1.5": 1 / 6, "2": 0.0}
    )
    assert report["geomean_speedup"]["eager"]["value"] == pytest.approx((1.2 * 0.6 * 2.5) ** (1 / 3))
    assert report["geomean_speedup"]["compile"]["value"] == pytest.approx((0.9 * 0.5 * 1.6) ** (1 / 3))
    assert report["geomean_speedup"]["eager"]["n"] == 3
    # the retried key counts once, by its final line
    assert report["correctness"] == pytest.approx(
        {"problems": 3 / 6, "correct_problems": 3, "results": 3 / 5, "correct_results": 3}
    )
    assert report["reasons"] == {"output_mismatch": 1, "torch_fallback": 1}
    assert report["verdicts"] == {"correct": 3, "incorrect": 1, "rejected": 1}
    assert report["time"]["wall_s"] == pytest.approx(42.5)
    assert report["time"]["judging_s"] == pytest.approx(10.0)
    assert "build" not in report["time"]["phases_s"]  # it is worker_start + load
    assert report["time"]["phases_s"]["correctness"] == pytest.approx(2.0)
    rows = {row["problem"]: row for row in report["problems"]}
    assert rows["level1/1_relu"]["best"] == {"eager": 1.2, "compile": 0.9}
    assert rows["level1/1_relu"]["candidates"] == 2 and rows["level1/1_relu"]["correct"] == 1
    assert rows["level1/5_tanh"]["verdict"] is None and rows["level1/5_tanh"]["candidates"] == 0
    assert report["hardware"] == ["NVIDIA H100 80GB HBM3"]


def test_a_baseline_that_was_not_timed_is_not_measured(batch_dir: Path) -> None:
    manifest = json.loads((batch_dir / "batch.json").read_text())
    manifest["judged_with"]["baselines"] = ["eager"]
    (batch_dir / "batch.json").write_text(json.dumps(manifest))
    lines = [json.loads(line) for line in (batch_dir / "results.jsonl").read_text().splitlines()]
    for line in lines:
        line["speedups"].pop("compile", None)
    (batch_dir / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = build_report(batch_dir)
    assert report["fast_p"]["compile"] is None
    assert report["fast_p"]["eager"]["1"] == pytest.approx(2 / 6)


def test_written_report_has_markdown_json_and_sane_plots(batch_dir: Path) -> None:
    md = write_report(batch_dir, FIXTURE / "published_baselines.json")
    text = md.read_text()
    assert "| fast_1 | 33.3% | 16.7% |" in text  # p, vs eager, vs compile
    assert "level1/5_tanh" in text and "no result" in text
    assert "level_1/problem_99/sample_0.py" in text and "6_broken.py" in text
    report = json.loads((batch_dir / "report.json").read_text())
    relu = next(row for row in report["problems"] if row["problem"] == "level1/1_relu")
    assert relu["published_eager_ms"] == pytest.approx(0.060)
    assert relu["ours_over_published"] == pytest.approx(0.5)  # 0.030 ms here against 0.060 published

    plots = report["plots"]
    assert set(plots) == {"fast_p", "speedup_eager", "speedup_compile"}
    for entry in plots.values():
        png = batch_dir / entry["file"]
        assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000

    curve = plots["fast_p"]
    assert curve["xlim"][0] == 0.0 and curve["xlim"][1] >= 2.5 and curve["ylim"] == [0.0, 1.0]
    for name, ys in curve["curves"].items():
        assert all(0.0 <= y <= 1.0 for y in ys)
        assert all(a >= b for a, b in itertools.pairwise(ys))  # never rises with p
        assert ys[0] == pytest.approx(report["fast_p"][name]["0"])
        assert curve["at_thresholds"][name] == pytest.approx(list(report["fast_p"][name].values()))

    hist = plots["speedup_eager"]
    assert sum(hist["counts"]) == 3 and sorted(hist["values"]) == [0.6, 1.2, 2.5]
    low, high = hist["xlim"]
    assert low < 0.6 and high > 2.5 and low < 1.0 < high  # every value and the 1x line are on the axis
    assert all(
        math.isclose(a * (hist["bin_edges"][1] / hist["bin_edges"][0]), b)
        for a, b in itertools.pairwise(hist["bin_edges"])
    )
    assert hist["ylim"][1] >= max(hist["counts"])


def test_batch_report_command(batch_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["batch", "report", str(batch_dir)]) == 0
    shown = capsys.readouterr().out
    assert "correct: 3/6 problems" in shown and "report.md" in shown
    assert (batch_dir / "plots" / "fast_p.png").is_file()
    assert run_cli(["batch", "report", str(tmp_path / "nothing")]) == 2
    assert "not a batch folder" in capsys.readouterr().err
