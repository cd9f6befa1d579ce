"""`kernelwright specs`: exit codes, JSON documents, and the table output."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
import torch
from rich.console import Console
from typer.testing import CliRunner

from kernelwright.cli import app, main, specs_cmd
from kernelwright.errors import ExitCode, UsageError
from kernelwright.hardware_specs import HardwareInfo, load_table

runner = CliRunner()


def _invoke(*args: str):  # type: ignore[no-untyped-def]
    # standalone_mode=False: the command's ExitCode comes back as return_value, errors as exceptions
    return runner.invoke(app, list(args), standalone_mode=False)


def test_named_gpu_as_json() -> None:
    result = _invoke("specs", "h100", "--json")
    assert result.exception is None, result.output
    assert result.return_value == ExitCode.OK
    doc = json.loads(result.output)
    assert doc["spec"]["name"] == "H100 SXM"
    assert doc["spec"]["sms"] == 132
    assert "H100 PCIe" in doc["match_note"]
    assert doc["ridge_points"]["tensor_bf16"] == pytest.approx(989 / 3.35)
    assert doc["spec"]["sources"]["memory"]["url"].startswith("https://")


def test_named_gpu_as_a_table() -> None:
    result = _invoke("specs", "NVIDIA H200")
    assert result.return_value == ExitCode.OK
    assert "H200 SXM" in result.output
    assert "memory.bandwidth_gbs" in result.output and "ridge.tensor_bf16" in result.output


def test_list_as_json_and_table() -> None:
    result = _invoke("specs", "--list", "--json")
    names = [g["name"] for g in json.loads(result.output)["gpus"]]
    assert len(names) == 11 and "MI300X" in names
    table = _invoke("specs", "--list")
    assert table.return_value == ExitCode.OK and "RTX 3090" in table.output


def test_list_at_80_columns_keeps_every_name_and_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    text = io.StringIO()
    monkeypatch.setattr(specs_cmd, "out", Console(file=text, width=80))  # a pipe or a CI log
    assert _invoke("specs", "--list").return_value == ExitCode.OK
    table = text.getvalue()
    assert "…" not in table and all(len(line) <= 80 for line in table.splitlines())
    for spec in load_table().gpus:
        assert spec.name in table
        assert f"{spec.memory.bandwidth_gbs:g}" in table and f"{spec.tensor_core_tflops.bf16:g}" in table


def test_this_machine_as_json() -> None:
    result = _invoke("specs", "--json")
    assert result.return_value == ExitCode.OK
    info = HardwareInfo.model_validate(json.loads(result.output))
    assert info.cpu.logical_cores and info.cpu.logical_cores > 0
    assert info.kind == ("gpu" if torch.cuda.is_available() else "cpu")


def test_this_machine_as_a_table() -> None:
    result = _invoke("specs")
    assert result.return_value == ExitCode.OK
    assert "logical cores" in result.output


def test_unknown_gpu_is_a_usage_error() -> None:
    result = _invoke("specs", "voodoo5")
    assert isinstance(result.exception, UsageError)
    assert result.exception.exit_code == ExitCode.USAGE


def test_gpu_and_list_together_is_a_usage_error() -> None:
    assert isinstance(_invoke("specs", "h100", "--list").exception, UsageError)


def test_main_maps_an_unknown_gpu_to_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["specs", "voodoo5"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "unknown GPU 'voodoo5'" in err and "H100 SXM" in err


def test_module_entry_point_subprocess() -> None:
    cmd = [sys.executable, "-m", "kernelwright", "specs", "h100", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["spec"]["name"] == "H100 SXM"
