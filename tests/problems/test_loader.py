"""The problem loader: good files, every malformed case (message and exit code), folders, names."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.errors import ExitCode, ProblemError, UsageError
from kernelwright.problems import load_folder, load_problem_file, resolve_problem
from kernelwright.problems.instance import materialize

GOOD = """import torch
import torch.nn as nn

PROBLEM = {"level": 2, "tags": ["demo"], "input_constraints": {1: "indices:10"}}


class Model(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x, idx):
        return x[idx] * self.k


def get_inputs():
    return [torch.randn(10, 4), torch.randint(0, 10, (5,))]


def get_init_inputs():
    return [3]
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_kernelbench_style_file_loads_with_name_id_level_and_meta(tmp_path: Path) -> None:
    path = _write(tmp_path, "level2/17_Gather_Scale.py", GOOD)
    problem = load_problem_file(path)
    assert (problem.name, problem.id, problem.level, problem.qualified) == (
        "Gather_Scale",
        17,
        2,
        "level2/17_Gather_Scale",
    )
    assert problem.meta.tags == ["demo"] and problem.meta.constraint(1)[1] == 10
    assert len(problem.sha256) == 64 and not problem.has_small
    inst = materialize(problem)
    assert inst.init_inputs == [3] and [tuple(v.shape) for v in inst.inputs] == [(10, 4), (5,)]
    assert inst.make_model()(*inst.inputs).shape == (5, 4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("import torch\nclass Model(:\n", "syntax error"),
        ("import torch\ndef get_inputs():\n    return []\n", "no top-level `class Model"),
        ("import torch.nn as nn\nclass Model(nn.Module):\n    pass\n", r"no top-level `def get_inputs\(\)`"),
        (GOOD.replace('"level": 2', '"level": 9'), "bad PROBLEM dict"),
        (GOOD.replace('"indices:10"', '"sorted"'), "unknown input constraint"),
        (
            "import torch.nn as nn\nPROBLEM = dict(level=1)\nclass Model(nn.Module):\n    pass\ndef get_inputs():\n    return []\n",
            "literal dict",
        ),
    ],
)
def test_static_faults_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, "bad.py", text)
    with pytest.raises(ProblemError, match=message) as info:
        load_problem_file(path)
    assert str(path) in info.value.message and info.value.exit_code == ExitCode.USAGE


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            GOOD.replace("import torch\n", "import torch\nimport no_such_module_kw\n"),
            "importing failed: ModuleNotFoundError",
        ),
        (GOOD.replace("return [torch.randn(10, 4), torch.randint(0, 10, (5,))]", "return 'x'"), "must return a list"),
        (
            GOOD.replace("return [torch.randn(10, 4), torch.randint(0, 10, (5,))]", "return [1, 2]"),
            "returned no tensors",
        ),
        (
            GOOD.replace("return [torch.randn(10, 4), torch.randint(0, 10, (5,))]", "return [torch.randn(2), 'a']"),
            "not a tensor or number",
        ),
        (
            GOOD.replace("return [torch.randn(10, 4), torch.randint(0, 10, (5,))]", "raise ValueError('boom')"),
            "raised ValueError: boom",
        ),
    ],
)
def test_runtime_faults_are_named(tmp_path: Path, text: str, message: str) -> None:
    problem = load_problem_file(_write(tmp_path, "bad_runtime.py", text))
    with pytest.raises(ProblemError, match=message):
        materialize(problem)


def test_a_bad_file_in_a_folder_is_reported_and_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _write(tmp_path, "level1/1_Good.py", GOOD)
    _write(tmp_path, "level1/2_Broken.py", "class Model(:\n")
    _write(tmp_path, "level1/_helper.py", "x = 1\n")
    report = load_folder(tmp_path)
    assert [p.stem for p in report.problems] == ["1_Good"]
    assert len(report.errors) == 1 and "2_Broken.py" in report.errors[0].message
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # the caller reports it, once


def test_a_kernelbench_checkout_is_found_under_its_package_folder(tmp_path: Path) -> None:
    for level, idx in ((1, 2), (1, 10), (2, 1)):
        _write(tmp_path, f"KernelBench/level{level}/{idx}_P{idx}.py", GOOD.replace('"level": 2, ', ""))
    _write(tmp_path, "scripts/eval.py", "print('not a problem')\n")
    report = load_folder(tmp_path)
    assert [p.qualified for p in report.problems] == ["level1/2_P2", "level1/10_P10", "level2/1_P1"]
    assert not report.errors


def test_names_resolve_and_unknown_names_suggest(tmp_path: Path) -> None:
    assert (
        resolve_problem("relu").qualified
        == resolve_problem("level1/1_relu").qualified
        == resolve_problem("1_relu").qualified
    )
    with pytest.raises(UsageError, match="unknown problem") as info:
        resolve_problem("rleu")
    assert info.value.hint and "relu" in info.value.hint
    path = _write(tmp_path, "mine.py", GOOD)
    assert resolve_problem(str(path)).path == path.resolve()


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernelwright", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_problems_list_json_lists_the_suite(tmp_path: Path) -> None:
    done = _cli("problems", "list", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    names = {p["name"] for p in doc["problems"]}
    assert "relu" in names and len(names) == len(doc["problems"]) >= 45
    assert doc["skipped"] == []


def test_problems_cli_errors_and_help(tmp_path: Path) -> None:
    done = _cli("problems", "show", "no_such", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("usage error: unknown problem")
    bad = _write(tmp_path, "bad.py", "class Model(:\n")
    done = _cli("problems", "show", str(bad), cwd=tmp_path)
    assert done.returncode == 2 and "syntax error" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    _write(tmp_path, "folder/1_ok.py", GOOD)
    _write(tmp_path, "folder/2_bad.py", "x = (\n")
    done = _cli("problems", "list", str(tmp_path / "folder"), "--json", cwd=tmp_path)
    assert done.returncode == 1 and len(json.loads(done.stdout)["skipped"]) == 1
    done = _cli("problems", "run", "relu", "--size", "small", cwd=tmp_path)
    assert done.returncode == 0 and "eager median" in done.stdout
    done = _cli("--version", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("kernelwright ")
    done = _cli("problems", "list", "--level", "x", cwd=tmp_path)
    assert done.returncode == 2
    for command in ("problems", "eval", "specs", "profile", "doctor"):
        help_text = _cli(command, "--help", cwd=tmp_path)
        assert help_text.returncode == 0 and "Usage" in help_text.stdout, command


def test_internal_errors_exit_70_and_name_the_saved_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernelwright import cli

    monkeypatch.setenv("KERNELWRIGHT_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(cli.problems_cmd, "resolve_problem", lambda *a, **k: 1 / 0)
    with pytest.raises(SystemExit) as info:
        cli.main(["problems", "show", "relu"])
    assert info.value.code == ExitCode.INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("internal error: ZeroDivisionError")
    saved = Path(err.strip().rsplit("saved to ", 1)[1])
    assert saved.is_file() and "ZeroDivisionError" in saved.read_text() and saved.is_relative_to(tmp_path / "home")
