"""Flags drawn from the shared vocabulary (device, size, policy, sandbox, backend): typer checks
them, `--help` lists the choices, and a wrong value is a usage error (exit 2) naming them."""

from __future__ import annotations

import pytest

from kernelwright.cli import main


def _exit(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return int(exited.value.code or 0)


@pytest.mark.parametrize(
    ("argv", "flag", "choices"),
    [
        (["optimize", "relu", "--policy", "lenient"], "--policy", "'strict', 'engineering'"),
        (["eval", "relu", "--size", "huge"], "--size", "'default', 'small'"),
        (["eval", "relu", "--sandbox", "off"], "--sandbox", "'strict', 'best-effort'"),
        (["optimize", "relu", "--backend", "fortran"], "--backend", "'cuda', 'triton', 'cpp'"),
        (["demo", "--device", "tpu"], "--device", "'auto', 'cuda', 'cpu'"),
        (["batch", "judge", "relu", "--candidates", "c", "--out", "o", "--policy", "x"], "--policy", "'engineering'"),
    ],
)
def test_a_value_outside_the_vocabulary_is_a_usage_error(
    argv: list[str], flag: str, choices: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"Invalid value for '{flag}'" in err and choices in err


def test_help_lists_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(["optimize", "--help"]) == 0
    text = capsys.readouterr().out
    assert "strict|engineering" in text and "default|small" in text and "cuda|triton|cpp" in text
