"""Settings precedence (defaults < file < env < flags), derived locations, and bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.config import load_settings
from kernelwright.errors import ConfigError, ExitCode


def test_locations_derive_from_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_HOME", str(tmp_path / "h"))
    monkeypatch.delenv("KERNELWRIGHT_MEMORY_DB", raising=False)  # conftest gives each test its own
    s = load_settings()
    assert s.home == tmp_path / "h"
    assert (s.build_cache_dir, s.inductor_cache_dir, s.memory_db) == (
        tmp_path / "h" / "build-cache",
        tmp_path / "h" / "inductor-cache",
        tmp_path / "h" / "memory.sqlite",
    )


def test_precedence_file_then_env_then_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "kernelwright.toml"
    config.write_text('device = "cpu"\nbuild_jobs = 3\nllm_model = "from-file"\nruns_dir = "file-runs"\n')
    monkeypatch.chdir(tmp_path)  # ./kernelwright.toml is picked up
    monkeypatch.delenv("KERNELWRIGHT_RUNS_DIR", raising=False)
    assert load_settings().build_jobs == 3
    monkeypatch.setenv("KERNELWRIGHT_BUILD_JOBS", "5")
    monkeypatch.setenv("KERNELWRIGHT_RUNS_DIR", "env-runs")
    s = load_settings()
    assert (s.device, s.build_jobs, s.llm_model, s.runs_dir) == ("cpu", 5, "from-file", Path("env-runs"))
    s = load_settings(runs_dir=Path("flag-runs"), home=None)
    assert (s.runs_dir, s.device) == (Path("flag-runs"), "cpu")  # a flag wins; an unset flag (None) does not


def test_explicit_and_env_config_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    named = tmp_path / "named.toml"
    named.write_text("[kernelwright]\nrun_timeout_s = 12.5\n")
    assert load_settings(named).run_timeout_s == 12.5
    monkeypatch.setenv("KERNELWRIGHT_CONFIG", str(named))
    assert load_settings().run_timeout_s == 12.5
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('device = "tpu"', "device"),
        ("build_jobs = -1", "build_jobs"),
        ("colour = 1", "colour"),
        ("device = ", "cannot read"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError, match=message) as info:
        load_settings(path)
    assert info.value.exit_code == ExitCode.USAGE and str(path) in info.value.message


def test_env_values_are_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_DEVICE", "gpu")
    with pytest.raises(ConfigError, match="device"):
        load_settings()
