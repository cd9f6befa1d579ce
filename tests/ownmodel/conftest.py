"""Shared by the own-model tests: the shipped example, small factory files, fixed ceilings (so no
test spends a second measuring this CPU)."""

from __future__ import annotations

import subprocess
import sys
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


# The first lines of a script run where kernelwright cannot be imported (`run_without_kernelwright`).
_NO_KERNELWRIGHT = """
import sys
sys.modules["kernelwright"] = None
try:
    import kernelwright
except ImportError:
    pass
else:
    raise SystemExit("kernelwright was importable")
"""


def run_without_kernelwright(script: str, args: list[str], folder: Path) -> None:
    """Run `script` (after lines that make `import kernelwright` fail) under `python -I` with
    `args`, in `folder`; it must exit 0 and print OK last."""
    path = folder / "user.py"
    path.write_text(textwrap.dedent(_NO_KERNELWRIGHT) + textwrap.dedent(script))
    done = subprocess.run(
        [sys.executable, "-I", str(path), *args], capture_output=True, text=True, timeout=600, cwd=folder, check=False
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), done.stdout[-3000:] + done.stderr[-3000:]
