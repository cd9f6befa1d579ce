"""`batch judge --ray local` judges as a local worker does (issue #33): one actor, two problems,
the second problem's session opened while the first is judged and the first problem's second
candidate built ahead, the verdicts the bundled manifest gives. Runs only where Ray is
installed (CI has none: skipped there); correctness only, at the small size."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.batch.results import read_records
from kernelwright.cli import main
from kernelwright.problems.solutions_index import SOLUTIONS

pytestmark = pytest.mark.slow


def test_a_ray_actor_looks_ahead_as_a_local_worker_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # no token file written into the user's home
    cands = tmp_path / "c"
    files = {
        "level_1/problem_1/sample_0.py": ("relu", "cpp_correct.py"),
        "level_1/problem_1/sample_1.py": ("relu", "cpp_wrong_tail64.py"),
        "level_1/problem_7/sample_0.py": ("sum_reduction", "cpp_wrong_half_accum.py"),  # rejected unbuilt
    }
    for rel, (problem, name) in files.items():
        (cands / rel).parent.mkdir(parents=True, exist_ok=True)
        (cands / rel).write_text((SOLUTIONS / problem / name).read_text())
    out = tmp_path / "batch"
    monkeypatch.chdir(tmp_path)  # --out relative, as the runbook gives it: the actors' working directory differs
    argv = ["batch", "judge", "relu", "sum_reduction", "--candidates", str(cands), "--out", "batch"]
    argv += ["--device", "cpu", "--size", "small", "--baselines", "eager", "--no-timing", "--quiet"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--ray", "local", "--workers", "1"])
    assert exited.value.code == 1
    records = {r.candidate: r for r in read_records(out / "results.jsonl")}
    assert {c: (r.verdict, r.reason) for c, r in records.items()} == {
        "level_1/problem_1/sample_0.py": ("correct", None),
        "level_1/problem_1/sample_1.py": ("incorrect", "output_mismatch"),
        "level_1/problem_7/sample_0.py": ("rejected", "precision_downgrade"),
    }
    assert {r.worker for r in records.values()} == {records["level_1/problem_7/sample_0.py"].worker}
    assert records["level_1/problem_7/sample_0.py"].worker.startswith("ray:")
    assert "session" in records["level_1/problem_7/sample_0.py"].ahead  # opened while relu was judged
    second = records["level_1/problem_1/sample_1.py"]
    assert "prebuild" in second.ahead or second.build_cached  # built ahead, not when its turn came
    for record in records.values():  # a local instance's actor writes evidence into the batch folder
        assert record.evidence and (out / record.evidence).is_file()
