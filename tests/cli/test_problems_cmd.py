"""`problems list / show / run` for a new user's first hour: whether each problem imports here
(read, or imported in child processes), shapes without allocating, memory refusals with the
`--size small` hint, and a table that keeps names whole at 80 columns."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kernelwright.cli import app, main, problems_cmd
from kernelwright.errors import ExitCode
from kernelwright.problems import imports
from kernelwright.problems.imports import check_imports, imported_modules, install_hint, pip_package, static_status

GOOD = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(N, N)]


def get_init_inputs():
    return []
"""
HUGE = "N = 1 << 20\n" + GOOD + "\n\ndef get_small_inputs():\n    return [torch.rand(8, 8)]\n"
LONG_NAMES = [  # whole on one line at 80 columns, once the expendable columns are dropped
    "1_conv_transposed_2D_asymmetric_input_square_kernel",
    "2_Matmul_Sum_Max_AvgPool3D_LeakyReLU_Scale_Clamp_GELU",
]
# KernelBench's longest name: wider than 80 columns can hold, so it is folded, never cut
LONGEST = "75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__"


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _consoles(monkeypatch: pytest.MonkeyPatch, module: object, width: int = 80) -> tuple[io.StringIO, io.StringIO]:
    """The command's consoles, `width` columns wide as in a pipe or a CI log."""
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(module, "out", Console(file=out, width=width))
    if hasattr(module, "err"):
        monkeypatch.setattr(module, "err", Console(file=err, width=width))
    return out, err


def _invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), standalone_mode=False)


def test_imports_are_read_without_running_anything() -> None:
    source = (
        "import torch.nn as nn, os.path\nfrom einops import rearrange\nfrom . import sibling\n"
        "try:\n    import optional_thing\nexcept ImportError:\n    optional_thing = None\n"
        "def f():\n    import yaml\n"
    )
    assert imported_modules(source) == ["torch", "os", "einops", "yaml"]
    status = static_status("import torch\nimport kw_no_such_module_a\nraise SystemExit('ran')\n")
    assert not status.ok and status.missing == ["kw_no_such_module_a"]
    assert status.describe() == "no: kw_no_such_module_a"
    assert static_status("import torch, math\n").ok
    assert [pip_package(m) for m in ("sklearn", "cv2", "yaml", "PIL", "einops", "odd")] == [
        "scikit-learn",
        "opencv-python",
        "pyyaml",
        "pillow",
        "einops",
        "odd",
    ]
    assert install_hint(["transformers", "sklearn", "transformers"]) == "pip install transformers scikit-learn"


def test_list_says_which_problems_import_and_runs_no_problem_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    side_effect = f"open({str(marker)!r}, 'w').write('ran')\n"
    _write(tmp_path, "KernelBench/level1/1_Fine.py", "N = 4\n" + GOOD)
    _write(tmp_path, "KernelBench/level3/48_Needs.py", f"N = 4\nimport kw_missing_one\n{side_effect}" + GOOD)
    _write(tmp_path, "KernelBench/level4/1_Hf.py", "N = 4\nfrom kw_missing_two.models import x\n" + GOOD)
    _consoles(monkeypatch, problems_cmd)
    result = _invoke("problems", "list", str(tmp_path), "--json")
    assert result.return_value == ExitCode.NEEDS_ATTENTION, result.output
    doc = json.loads(result.output)
    found = {p["qualified"]: p["imports"] for p in doc["problems"]}
    assert found["level1/1_Fine"]["ok"] and doc["imports_checked"] == "static"
    assert found["level3/48_Needs"]["missing"] == ["kw_missing_one"]
    assert found["level4/1_Hf"]["install"] == "pip install kw_missing_two"
    assert not marker.exists()  # nothing was executed


def test_check_imports_each_file_in_a_child_and_survives_hangs_and_crashes(tmp_path: Path) -> None:
    files = [
        _write(tmp_path, "good.py", "N = 4\n" + GOOD),
        _write(tmp_path, "missing.py", "import kw_missing_three\n" + GOOD),
        _write(tmp_path, "raises.py", "print('noise on stdout')\nraise RuntimeError('boom at import')\n"),
        _write(tmp_path, "hangs.py", "import time\ntime.sleep(60)\n"),
        _write(tmp_path, "crashes.py", "import os\nos._exit(3)\n"),
        _write(tmp_path, "after.py", "N = 4\n" + GOOD),
    ]
    found = check_imports(files, timeout_s=2, jobs=1)
    good, missing, raises, hangs, crashes, after = (found[f] for f in files)
    assert good.ok and after.ok and good.checked == "import"
    assert missing.missing == ["kw_missing_three"]
    assert raises.error == "RuntimeError: boom at import"
    assert hangs.error == "timed out after 2 s"
    assert crashes.error == "crashed (exit code 3)"


def test_list_check_uses_real_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, "1_Fine.py", "N = 4\n" + GOOD)
    seen: list[float] = []

    def fake(paths: list[Path], *, timeout_s: float) -> dict[Path, imports.ImportStatus]:
        seen.append(timeout_s)
        return {p: imports.ImportStatus(ok=False, error="RuntimeError: x", checked="import") for p in paths}

    monkeypatch.setattr(problems_cmd, "check_imports", fake)
    _, err = _consoles(monkeypatch, problems_cmd)
    result = _invoke("problems", "list", str(tmp_path), "--check", "--timeout", "7", "--json")
    doc = json.loads(result.output)
    assert seen == [7.0] and doc["imports_checked"] == "import"
    assert doc["problems"][0]["imports"]["error"] == "RuntimeError: x"
    assert err.getvalue().splitlines() == [
        f"import failed: {doc['problems'][0]['qualified']}: RuntimeError: x",
        "note: 1 of 1 problems cannot be imported here: 1 fail for other reasons (above)",
    ]


def test_list_at_80_columns_keeps_names_whole_and_reports_each_skip_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for i, name in enumerate(LONG_NAMES, start=1):
        _write(tmp_path, f"KernelBench/level{i}/{name}.py", "N = 4\n" + GOOD)
    _write(tmp_path, f"KernelBench/level1/{LONGEST}.py", "N = 4\n" + GOOD)
    _write(tmp_path, "KernelBench/level1/3_Broken.py", "class Model(:\n")
    _write(tmp_path, "KernelBench/level1/4_Needs.py", "N = 4\nimport kw_gone\n" + GOOD)
    out, err = _consoles(monkeypatch, problems_cmd)
    result = _invoke("problems", "list", str(tmp_path))
    assert result.return_value == ExitCode.NEEDS_ATTENTION
    table = out.getvalue()
    assert all(len(line) <= 80 for line in table.splitlines())
    for i, name in enumerate(LONG_NAMES, start=1):
        assert f"level{i}/{name}" in table
    assert "no: kw_gone" in table and "…" not in table
    folded = "".join(line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│"))
    assert f"level1/{LONGEST}" in folded
    lines = err.getvalue().splitlines()
    assert sum("3_Broken.py" in line for line in lines) == 1
    assert lines[-1] == "note: 1 of 4 problems cannot be imported here: kw_gone missing for 1 (pip install kw_gone)"
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_show_describes_a_huge_problem_without_allocating(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, "level1/7_Huge.py", HUGE)  # 4 TiB of default input
    _consoles(monkeypatch, problems_cmd)
    doc = json.loads(_invoke("problems", "show", str(path), "--json").output)
    assert doc["inputs"] == ["float32[1048576, 1048576]"] and doc["outputs"] == doc["inputs"]
    assert doc["bytes"]["inputs"] == doc["bytes"]["outputs"] == 4 << 40
    assert doc["memory"]["fits"] is False and "`--size small` needs" in doc["memory"]["note"]
    out, _ = _consoles(monkeypatch, problems_cmd)
    assert _invoke("problems", "show", str(path), "--size", "small").return_value == ExitCode.OK
    text = out.getvalue()
    assert "inputs: float32[8, 8]" in text and "memory: fits: an evaluation on" in text


def test_a_missing_module_names_the_pip_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(imports.PIP_PACKAGES, "kw_missing_five", "kw-five-package")
    path = _write(tmp_path, "needs.py", "N = 4\nfrom kw_missing_five import thing\n" + GOOD)
    with pytest.raises(SystemExit) as info:
        main(["problems", "show", str(path)])
    assert info.value.code == ExitCode.USAGE
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bad problem file:")
    assert "No module named 'kw_missing_five'" in lines[0] and "`pip install kw-five-package`" in lines[0]


def test_run_defaults_to_the_default_size_and_refuses_what_does_not_fit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KERNELWRIGHT_MEMORY_LIMIT", str(3 << 30))
    with pytest.raises(SystemExit) as info:
        main(["problems", "run", "relu"])
    assert info.value.code == ExitCode.ENVIRONMENT
    line = capsys.readouterr().err.strip()
    assert line.startswith("environment: level1/1_relu at default size needs about") and "to run its reference" in line
    assert "`--size small` needs" in line and "also too much" not in line
