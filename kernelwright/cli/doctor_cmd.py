"""`kernelwright doctor`: the machine's checks (`tools/doctor.py`, imported when the command runs)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from kernelwright.errors import ExitCode


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor(
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    ) -> int:
        """Check GPU, driver, CUDA, nvcc, ncu (and counter permission), nsight-python, torch/triton, C++."""
        from kernelwright.tools.doctor import Level, run_checks

        report = run_checks()
        if as_json:
            typer.echo(json.dumps(report.model_dump(mode="json") | {"ok": not report.failed}, indent=2))
        else:
            width = max((len(c.name) for c in report.checks), default=0)
            for c in report.checks:
                fix = f"  -> {c.fix}" if c.fix and c.level is not Level.OK else ""
                typer.echo(f"{c.level.value:<4} {c.name:<{width}} {c.detail}{fix}")
        return ExitCode.ENVIRONMENT if report.failed else ExitCode.OK
