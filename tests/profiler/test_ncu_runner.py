"""The ncu runner's command line and its failure modes, with fake `ncu` executables on PATH."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.errors import ExitCode
from kernelwright.problems.solutions_index import bundled_solutions
from kernelwright.profiler import DEFAULT_SECTIONS, NcuOptions, ProfileStatus, build_command, run_ncu
from kernelwright.profiler.runner import classify, ncu_version, target_command


def fake_ncu(folder: Path, body: str) -> Path:
    """Write an executable `ncu` shell script into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ncu"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    def install(body: str) -> Path:
        path = fake_ncu(tmp_path / "bin", body)
        monkeypatch.delenv("KERNELWRIGHT_NCU", raising=False)
        monkeypatch.setenv("PATH", f"{path.parent}{os.pathsep}{os.environ['PATH']}")
        return path

    return install


WRITES_REPORT = 'while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then shift; echo rep > "$1"; fi; shift; done\necho "==PROF== Report written"'


def test_command_line_has_sections_filters_and_output(tmp_path: Path) -> None:
    opts = NcuOptions(kernel_regex="relu", launch_skip=3, launch_count=1, source_counters=True)
    cmd = build_command(["python", "x.py"], tmp_path / "r.ncu-rep", opts)
    assert cmd[:3] == ["ncu", "--clock-control", "none"]
    sections = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--section"]
    assert sections == [*DEFAULT_SECTIONS, "SourceCounters"]
    assert cmd[cmd.index("-k") + 1] == "regex:relu"
    assert cmd[cmd.index("--launch-skip") + 1] == "3"
    assert cmd[cmd.index("--launch-count") + 1] == "1"
    assert cmd[cmd.index("-o") - 1] == "-f" and cmd[cmd.index("-o") + 1] == str(tmp_path / "r.ncu-rep")
    assert cmd[-2:] == ["python", "x.py"]


def test_target_command_runs_the_target_module() -> None:
    cmd = target_command("1_relu", Path("c.py"), warmup=5, iters=2)
    assert cmd[1:5] == ["-m", "kernelwright.profiler.target", "1_relu", "c.py"]
    assert cmd[cmd.index("--warmup") + 1] == "5" and cmd[cmd.index("--iters") + 1] == "2"
    assert "--build-cache" not in cmd  # the target then uses the configured cache
    cmd = target_command("1_relu", Path("c.py"), build_cache=Path("/cache"))
    assert cmd[cmd.index("--build-cache") + 1] == "/cache"


def test_the_target_loads_a_candidate_through_the_build_cache(tmp_path: Path) -> None:
    """What ncu runs builds the candidate where `eval` does, so a second load compiles nothing."""
    [entry] = [s for s in bundled_solutions("relu") if s.path.stem == "cpp_fast"]
    cache = tmp_path / "build-cache"
    load = (
        "import sys; from pathlib import Path; from kernelwright.profiler.target import candidate_class; "
        "candidate_class(Path(sys.argv[1]), Path(sys.argv[2]))"
    )

    def stderr_of_a_load() -> str:
        done = subprocess.run(
            [sys.executable, "-c", load, str(entry.path), str(cache)],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stderr

    assert "extension kw_relu_cpp_fast: built" in stderr_of_a_load()
    assert "extension kw_relu_cpp_fast: from the build cache" in stderr_of_a_load()
    assert len(list((cache / "fastext").rglob("libkw_relu_cpp_fast.so"))) == 1


def test_ok_run_returns_the_report(on_path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    on_path(WRITES_REPORT)
    result = run_ncu(["true"], tmp_path / "out" / "r.ncu-rep")
    assert result.ok and result.exit_code is ExitCode.OK
    assert result.report_path == tmp_path / "out" / "r.ncu-rep" and result.report_path.exists()


def test_ncu_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    monkeypatch.delenv("KERNELWRIGHT_NCU", raising=False)
    monkeypatch.setattr("kernelwright.profiler.runner.Path.exists", lambda self: False)
    result = run_ncu(["true"], tmp_path / "r.ncu-rep")
    assert result.status is ProfileStatus.NCU_MISSING
    assert "ncu" in result.message and result.hint and "PATH" in result.hint
    assert result.exit_code is ExitCode.ENVIRONMENT


def test_permission_error(on_path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    on_path(
        'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU '
        'Performance Counters on the target device 0." >&2\nexit 1'
    )
    result = run_ncu(["true"], tmp_path / "r.ncu-rep")
    assert result.status is ProfileStatus.NO_PERMISSION
    assert "ERR_NVGPUCTRPERM" in (result.hint or "") and result.exit_code is ExitCode.ENVIRONMENT
    assert "ERR_NVGPUCTRPERM" in result.stderr_tail


def test_no_kernels_profiled(on_path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    on_path('echo "==WARNING== No kernels were profiled."\nexit 0')
    result = run_ncu(["true"], tmp_path / "r.ncu-rep", NcuOptions(kernel_regex="nope"))
    assert result.status is ProfileStatus.NO_KERNEL_MATCHED
    assert result.exit_code is ExitCode.USAGE and "--kernel" in (result.hint or "")


def test_no_gpu(on_path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    on_path('echo "KW_NO_GPU: torch sees no CUDA GPU" >&2\necho "==WARNING== No kernels were profiled."\nexit 5')
    result = run_ncu(["true"], tmp_path / "r.ncu-rep")
    assert result.status is ProfileStatus.NO_GPU and result.exit_code is ExitCode.ENVIRONMENT


def test_timeout_kills_the_run(on_path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    on_path("sleep 30")
    result = run_ncu(["true"], tmp_path / "r.ncu-rep", timeout_s=0.5)
    assert result.status is ProfileStatus.TIMEOUT
    assert result.duration_s < 10 and "0.5 s" in result.message and result.exit_code is ExitCode.CRASH


def test_program_crash_is_failed_with_the_error_line(on_path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    on_path('echo "Traceback (most recent call last):" >&2\necho "RuntimeError: boom" >&2\nexit 4')
    result = run_ncu(["true"], tmp_path / "r.ncu-rep")
    assert result.status is ProfileStatus.FAILED and "RuntimeError: boom" in result.message


def test_classify_prefers_permission_over_everything() -> None:
    status, _ = classify(1, "No kernels were profiled", "ERR_NVGPUCTRPERM", report_exists=False)
    assert status is ProfileStatus.NO_PERMISSION


def test_ncu_version_parses_the_banner(on_path) -> None:  # type: ignore[no-untyped-def]
    on_path('echo "NVIDIA (R) Nsight Compute Command Line Profiler"\necho "Version 2025.3.1.0 (build 36398880)"')
    assert ncu_version() == "2025.3.1"
