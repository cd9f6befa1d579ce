"""Every command pays for what it imports: `--help`, `--version` and the command modules import
no torch (it takes seconds), only the commands that run something do. Time is measured by
scripts/bench_startup.py, not here; this asserts what is imported."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "numpy", "langchain_core", "langgraph", "textual", "triton")


def _imported_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("HEAVY:"))
    return [m for m in line.removeprefix("HEAVY:").split(",") if m]


def test_importing_the_cli_imports_nothing_heavy() -> None:
    assert _imported_after("import kernelwright.cli") == []


def test_help_and_version_import_nothing_heavy() -> None:
    for args in (["--help"], ["--version"], ["eval", "--help"], ["problems", "list", "--help"]):
        code = (
            "from kernelwright.cli import main\n"
            "try:\n"
            f"    main({args!r})\n"
            "except SystemExit as exc:\n"
            "    assert exc.code == 0, exc.code\n"
            "sys.stdout.flush()"
        )
        assert _imported_after(code) == [], args
