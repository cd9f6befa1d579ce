"""`kernelwright doctor` on this machine and with parts missing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelwright.cli import app
from kernelwright.profiler.sweep import nsight_fits_ncu
from kernelwright.tools.doctor import Level, check_cxx, check_ncu, check_nsight_python, run_checks


def test_doctor_json_lists_every_check() -> None:
    result = CliRunner().invoke(app, ["doctor", "--json"], standalone_mode=False)
    doc = json.loads(result.stdout)
    names = {c["name"] for c in doc["checks"]}
    assert {"GPU", "driver", "torch", "triton", "nvcc", "C++ compiler", "ncu", "nsight-python"} <= names
    assert all(c["level"] in ("OK", "WARN", "FAIL") for c in doc["checks"])
    assert result.return_value == (5 if not doc["ok"] else 0)


def test_missing_ncu_is_a_warning_not_a_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KERNELWRIGHT_NCU", str(tmp_path / "absent"))
    (check,) = check_ncu(has_gpu=False)
    assert check.level is Level.WARN and check.fix and "ncu" in check.fix


def test_cxx_smoke_compile() -> None:
    check = check_cxx()
    assert check.level in (Level.OK, Level.FAIL)
    if os.path.exists("/usr/bin/g++"):
        assert check.level is Level.OK


def test_nsight_python_vs_ncu_versions() -> None:
    assert nsight_fits_ncu("0.9.6", "2025.3.1")[0]
    assert not nsight_fits_ncu("0.9.6", "2022.3.0")[0]
    fits, why = nsight_fits_ncu("1.0.0", "2025.3.1")
    assert not fits and "2026.2.1" in why
    assert nsight_fits_ncu("1.2.0", "2026.2.1")[0]
    assert not nsight_fits_ncu(None, "2025.3.1")[0]


def test_incompatible_nsight_python_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kernelwright.tools.doctor.nsight_python_version", lambda: "1.0.0")
    monkeypatch.setattr("kernelwright.tools.doctor.ncu_version", lambda *a, **k: "2025.3.1")
    check = check_nsight_python()
    assert check.level is Level.FAIL and "0.9.6" in (check.fix or "")


def test_cpu_machine_exits_zero_when_only_warnings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KERNELWRIGHT_NCU", str(tmp_path / "absent"))
    report = run_checks()
    failed = [c for c in report.checks if c.level is Level.FAIL]
    assert report.failed == bool(failed)
