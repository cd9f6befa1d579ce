"""`kernelwright profile` through the CLI: reports, comparisons and every failure's exit code."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelwright.cli import app
from kernelwright.errors import ExitCode

DATA = Path(__file__).parent.parent / "data" / "ncu"
# relu_reference.ncu-rep is 9.5 MB (PyTorch's kernel module is embedded), so the CLI diff uses two small reports.
BASE, CAND = DATA / "transpose_source.ncu-rep", DATA / "relu_candidate.ncu-rep"
needs_fixtures = pytest.mark.skipif(not (BASE.exists() and CAND.exists()), reason="recorded fixtures missing")


def invoke(*args: str) -> tuple[int, str, str]:
    """Run the CLI the way `main` does: KernelwrightErrors become one stderr line and an exit code."""
    from kernelwright.errors import KernelwrightError

    runner = CliRunner()
    result = runner.invoke(app, list(args), standalone_mode=False)
    if isinstance(result.exception, KernelwrightError):
        return int(result.exception.exit_code), result.stdout, result.exception.one_line()
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    code = result.return_value if isinstance(result.return_value, int) else result.exit_code
    return int(code), result.stdout, ""


def put_fake_ncu(monkeypatch: pytest.MonkeyPatch, folder: Path, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ncu"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.delenv("KERNELWRIGHT_NCU", raising=False)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


@needs_fixtures
def test_report_digest_text_and_json() -> None:
    code, out, _ = invoke("profile", "--report", str(CAND))
    assert code == ExitCode.OK
    assert "kw_relu_kernel" in out and "SOL %" in out and "class:" in out
    code, out, _ = invoke("profile", "--report", str(CAND), "--json")
    doc = json.loads(out)
    assert code == ExitCode.OK and doc["report"]["duration_us"] > 0


@needs_fixtures
def test_compare_prints_a_diff() -> None:
    code, out, _ = invoke("profile", "--report", str(BASE), "--compare", str(CAND))
    assert code == ExitCode.OK
    assert "== diff (baseline -> candidate) ==" in out and "speedup (all kernels)" in out
    code, out, _ = invoke("profile", "--report", str(BASE), "--compare", str(CAND), "--json")
    assert "diff" in json.loads(out)


@needs_fixtures
def test_kernel_regex_that_matches_nothing_is_a_usage_error() -> None:
    code, _, err = invoke("profile", "--report", str(CAND), "--kernel", "no_such_kernel")
    assert code == ExitCode.USAGE and "no kernel" in err


def test_missing_report_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = invoke("profile", "--report", str(tmp_path / "nope.ncu-rep"))
    assert code == ExitCode.USAGE and "no such report" in err


def test_compare_without_report_and_nothing_to_profile() -> None:
    assert invoke("profile", "--compare", "x.ncu-rep")[0] == ExitCode.USAGE
    assert invoke("profile")[0] == ExitCode.USAGE


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        ('echo "==ERROR== ERR_NVGPUCTRPERM - no permission" >&2\nexit 1', ExitCode.ENVIRONMENT, "not permitted"),
        ('echo "==WARNING== No kernels were profiled."\nexit 0', ExitCode.USAGE, "no kernel launch matched"),
        ('echo "KW_NO_GPU: torch sees no CUDA GPU" >&2\nexit 5', ExitCode.ENVIRONMENT, "no usable NVIDIA GPU"),
        ("sleep 30", ExitCode.CRASH, "did not finish"),
    ],
)
def test_profile_failures_map_to_exit_codes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, body: str, code: int, words: str
) -> None:
    put_fake_ncu(monkeypatch, tmp_path / "bin", body)
    got, _, err = invoke("profile", "--timeout", "1", "--out", str(tmp_path / "ev"), "--", "true")
    assert got == code and words in err


@needs_fixtures
def test_profiling_a_candidate_builds_it_in_the_configured_build_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shared_home: Path
) -> None:
    # A stand-in ncu that notes what it was asked to run, then "profiles" by copying a recorded report.
    calls = tmp_path / "ncu-calls"
    body = f'echo "$@" >> {calls}; while [ "$1" != "-o" ]; do shift; done; cp {CAND} "$2"'
    put_fake_ncu(monkeypatch, tmp_path / "bin", body)
    candidate = DATA / "src" / "relu_candidate.py"
    code, _, err = invoke("profile", "--out", str(tmp_path / "ev"), "1_relu", str(candidate))
    assert code == ExitCode.OK, err
    [target] = [line.split() for line in calls.read_text().splitlines() if str(candidate) in line]
    assert target[target.index("--build-cache") + 1] == str(shared_home / "build-cache")  # where `eval` builds


def test_ncu_missing_is_an_environment_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KERNELWRIGHT_NCU", str(tmp_path / "not-there" / "ncu"))
    code, _, err = invoke("profile", "--out", str(tmp_path / "ev"), "1_relu")
    assert code == ExitCode.ENVIRONMENT and "ncu" in err and "PATH" in err


@needs_fixtures
def test_profiling_a_candidate_reports_which_kernels_were_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A stand-in ncu that "profiles" by copying the candidate's recorded report to the -o path.
    body = f'while [ "$1" != "-o" ]; do shift; done; cp {CAND} "$2"'
    put_fake_ncu(monkeypatch, tmp_path / "bin", body)
    candidate = DATA / "src" / "relu_candidate.py"
    code, out, err = invoke("profile", "--out", str(tmp_path / "ev"), "1_relu", str(candidate))
    assert code == ExitCode.OK, err
    assert "== candidate kernels (ncu) ==" in out and "own kernels (kw_relu_kernel): 100% of" in out
    code, out, err = invoke("profile", "--json", "--out", str(tmp_path / "ev"), "1_relu", str(candidate))
    doc = json.loads(out)
    assert (
        doc["candidate_ownership"]["own_kernels"] == ["kw_relu_kernel"] and doc["candidate_ownership"]["own_pct"] == 100
    )
