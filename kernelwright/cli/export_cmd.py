"""`kernelwright export RUN --format kernelbench|package`: a run's best correct candidate, shipped.

`kernelbench` writes a solution file with no kernelwright import (plain `load_inline`), which
`kernelwright eval PROBLEM FILE` judges like the original; `package` writes a small Python
package that defines it as a `torch.library.custom_op` (fake implementation for torch.compile,
autograd through the reference region) with its extension built ahead, and `patch(model)` to put
it into the user's model. torch loads inside the command: `kernelwright --help` stays quick.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kernelwright.cli.context import AppState
from kernelwright.errors import ExitCode, UsageError

FORMATS = ("kernelbench", "package")


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export(
        ctx: typer.Context,
        run: Annotated[str, typer.Argument(help="A run id (see `runs list`) or a run folder.")],
        fmt: Annotated[
            str,
            typer.Option(
                "--format",
                help="kernelbench: a self-contained load_inline solution file (stdout unless -o). "
                "package: a Python package at -o DIR (its import name is DIR's name) with the winner as a "
                "torch.library custom op, its built library, and patch(model, path=...).",
            ),
        ] = "kernelbench",
        output: Annotated[
            Optional[Path],
            typer.Option("--output", "-o", help="kernelbench: the file to write; package: the package folder (new)."),
        ] = None,
        name: Annotated[
            Optional[str],
            typer.Option("--name", help="package: the op's torch.library namespace (default: the folder's name)."),
        ] = None,
    ) -> int:
        """Export a run's best correct candidate as a KernelBench file or as a PyTorch op package.

        The package needs torch, not kernelwright: `import PKG; PKG.patch(model)` replaces the
        region's forward with the op (a module region's recorded path is the default; for a
        one-operator problem name a submodule whose forward is exactly that op). Calls with shapes,
        dtypes, devices or autocast the winner was not verified for run the original forward and
        warn once. Exit codes: 2 usage (unknown run, no correct candidate, bad format), 3 the
        extension did not build, 4 the winner or the problem crashed while loading."""
        from kernelwright.ownmodel.export import export_package, kernelbench_source, read_winner

        if fmt not in FORMATS:
            raise UsageError(f"--format {fmt!r}: not a format", hint=f"use one of {', '.join(FORMATS)}")
        if fmt == "package" and output is None:
            raise UsageError("--format package needs -o DIR (the package folder)")
        if fmt == "kernelbench" and name is not None:
            raise UsageError("--name is for --format package")
        state: AppState = ctx.obj
        winner = read_winner(Path(state.settings().runs_dir), run)
        if fmt == "kernelbench":
            text = kernelbench_source(winner)
            if output is None:
                sys.stdout.write(text)
                sys.stdout.flush()
            else:
                output.parent.mkdir(parents=True, exist_ok=True)
                output.write_text(text, encoding="utf-8")
                typer.echo(str(output))
            return ExitCode.OK
        assert output is not None
        build_cache = state.settings().build_cache_dir
        assert build_cache is not None  # the settings derive it from the home folder
        folder = export_package(winner, output, build_cache, name)
        typer.echo(str(folder))
        return ExitCode.OK
