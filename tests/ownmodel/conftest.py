"""Shared by the own-model tests: the shipped example, small factory files, fixed ceilings (so no
test spends a second measuring this CPU)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from kernelwright.hardware_specs.ceilings import Ceiling, Ceilings
from kernelwright.ownmodel import profiling

EXAMPLE = Path(profiling.__file__).parent / "examples" / "mlp_block.py"
EXAMPLE_SPEC = f"{EXAMPLE}:mlp_block"
CEILINGS = Ceilings(
    device="cpu",
    name="test CPU",
    bandwidth=Ceiling(10e9, "fixed for the tests"),
    pipes={"cpu_fp32": Ceiling(100e9, "fixed for the tests")},
)


@pytest.fixture
def model_file(tmp_path: Path) -> Callable[[str], Path]:
    """Writes a factory file (source dedented) and returns its path."""

    def write(source: str, name: str = "user_model.py") -> Path:
        path = tmp_path / name
        path.write_text("import torch\nfrom torch import nn\n\n" + textwrap.dedent(source))
        return path

    return write


@pytest.fixture
def fixed_ceilings(monkeypatch: pytest.MonkeyPatch) -> Ceilings:
    monkeypatch.setattr(profiling, "device_ceilings", lambda device: CEILINGS)
    return CEILINGS
