"""A model spec that cannot be used ends the command with one line and exit 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from kernelwright.cli import main
from kernelwright.errors import UsageError
from kernelwright.ownmodel import load_model
from tests.ownmodel.conftest import EXAMPLE_SPEC

_FILE = """
def ok():
    return nn.Linear(4, 3), (torch.randn(2, 4),)

def raises():
    raise RuntimeError("checkpoint missing")

def wrong_type():
    return nn.Linear(4, 3)

def not_module():
    return "model", (torch.randn(2, 4),)

def no_tensor():
    return nn.Linear(4, 3), (1, 2)

def misfit():
    return nn.Linear(4, 3), (torch.randn(2, 5),)

NOT_CALLABLE = 3
"""


@pytest.mark.parametrize(
    ("factory", "expected"),
    [
        ("raises", "raised RuntimeError: checkpoint missing"),
        ("wrong_type", "must return (module, example_inputs), got Linear"),
        ("not_module", "not a torch.nn.Module"),
        ("no_tensor", "its inputs hold no tensor"),
        ("misfit", "do not fit the module: forward raised RuntimeError"),
        ("NOT_CALLABLE", "not a callable factory"),
        ("missing", "has no 'missing'"),
    ],
)
def test_a_bad_factory_is_one_line_and_exit_2(
    model_file: Callable[[str], Path], capsys: pytest.CaptureFixture[str], factory: str, expected: str
) -> None:
    path = model_file(_FILE)
    with pytest.raises(SystemExit) as info:
        main(["model", "profile", f"{path}:{factory}", "--device", "cpu", "--no-compile"])
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("usage error: ")
    assert expected in lines[0]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("no_colon.py", "must be FILE.py:FACTORY"),
        ("does_not_exist.py:make", "does not exist"),
    ],
)
def test_a_malformed_spec_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], spec: str, expected: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["model", "extract", spec, "--op", "1", "--device", "cpu"])
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0]


def test_a_file_that_fails_to_import_names_the_fault(model_file: Callable[[str], Path]) -> None:
    path = model_file("import kw_no_such_module_x\n")
    with pytest.raises(UsageError, match="importing failed: ModuleNotFoundError"):
        load_model(f"{path}:make")


def test_the_example_loads_with_its_inputs_on_the_device() -> None:
    loaded = load_model(EXAMPLE_SPEC, "cpu")
    assert loaded.factory == "mlp_block"
    assert isinstance(loaded.inputs[0], torch.Tensor) and loaded.inputs[0].device.type == "cpu"
    assert loaded.forward().shape == loaded.inputs[0].shape
