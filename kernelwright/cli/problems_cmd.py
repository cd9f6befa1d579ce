"""`kernelwright problems ...`: list, show and run problems (built-in suite, a folder, a file)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from kernelwright.errors import EnvironmentProblem, ExitCode, UsageError
from kernelwright.problems import load_folder, resolve_problem
from kernelwright.problems.instance import materialize
from kernelwright.problems.loader import BUILTIN_SUITE

problems_app = typer.Typer(
    help="List, inspect and run problems (built-in suite, a folder, a KernelBench checkout).", no_args_is_help=True
)
out = Console()
err = Console(stderr=True)


def _describe(value: Any) -> str:
    if hasattr(value, "shape"):
        return f"{value.dtype}".replace("torch.", "") + str(list(value.shape))
    return repr(value)


@problems_app.command("list")
def list_problems(
    path: Annotated[
        Optional[Path], typer.Argument(help="A problem folder or KernelBench checkout; default: the built-in suite.")
    ] = None,
    level: Annotated[Optional[int], typer.Option("--level", "-l", help="Only this level (1-4).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> int:
    """List problems with their level, dtype and description. Bad files are reported and skipped."""
    report = load_folder(path) if path else load_folder(BUILTIN_SUITE, builtin=True)
    problems = [p for p in report.problems if level is None or p.level == level]
    for error in report.errors:
        err.print(f"[yellow]skipped[/]: {error.message}", highlight=False, markup=True)
    if as_json:
        doc = {
            "source": str(path or BUILTIN_SUITE),
            "problems": [p.summary() for p in problems],
            "skipped": [e.message for e in report.errors],
        }
        typer.echo(json.dumps(doc, indent=2))
    else:
        table = Table(title=f"{len(problems)} problems in {path or 'the built-in suite'}")
        for column in ("name", "level", "dtype", "small", "variants", "description"):
            table.add_column(column)
        for p in problems:
            table.add_row(
                p.qualified,
                str(p.level or "-"),
                p.meta.dtype,
                "yes" if p.has_small else "-",
                "yes" if p.has_variants else "-",
                p.meta.description,
            )
        out.print(table)
    return ExitCode.NEEDS_ATTENTION if report.errors else ExitCode.OK


@problems_app.command("show")
def show_problem(
    problem: Annotated[str, typer.Argument(help="A problem name (see `problems list`) or a problem file.")],
    size: Annotated[str, typer.Option("--size", help="Which inputs to build: default or small.")] = "default",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    source: Annotated[bool, typer.Option("--source", help="Also print the file's source.")] = False,
) -> int:
    """Load a problem fully (import it, build its inputs) and describe it."""
    if size not in ("default", "small"):
        raise UsageError(f"--size must be 'default' or 'small', not {size!r}")
    prob = resolve_problem(problem)
    inst = materialize(prob, size)  # type: ignore[arg-type]
    doc = prob.summary() | {
        "size": inst.size,
        "init_inputs": [_describe(v) for v in inst.init_inputs],
        "inputs": [_describe(v) for v in inst.inputs],
        "variants": [[_describe(v) for v in var] for var in inst.variants],
        "tolerance": dict(zip(("atol", "rtol"), prob.meta.tolerance(), strict=False)),
        "input_constraints": prob.meta.input_constraints,
    }
    if as_json:
        typer.echo(json.dumps(doc | ({"source": prob.source} if source else {}), indent=2))
        return ExitCode.OK
    for key, value in doc.items():
        out.print(f"[bold]{key:>17}[/]: {value}", highlight=False)
    if source:
        out.print(prob.source, markup=False, highlight=False)
    return ExitCode.OK


@problems_app.command("run")
def run_reference(
    problem: Annotated[str, typer.Argument(help="A problem name or file.")],
    size: Annotated[str, typer.Option("--size", help="default or small.")] = "small",
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Timed calls after one warm-up.")] = 5,
) -> int:
    """Run a problem's PyTorch reference (eager) and print its output shapes and median time."""
    import torch

    if size not in ("default", "small"):
        raise UsageError(f"--size must be 'default' or 'small', not {size!r}")
    if device not in ("cpu", "cuda"):
        raise UsageError(f"--device must be 'cpu' or 'cuda', not {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise EnvironmentProblem("--device cuda but no CUDA GPU is visible", hint="use --device cpu")
    prob = resolve_problem(problem)
    inst = materialize(prob, size)  # type: ignore[arg-type]
    model = inst.make_model().to(device).eval()
    inputs = [v.to(device) if isinstance(v, torch.Tensor) else v for v in inst.inputs]
    times = []
    with torch.no_grad():
        output = model(*inputs)
        for _ in range(repeats):
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            model(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    outputs = output if isinstance(output, tuple | list) else [output]
    times.sort()
    out.print(
        f"{prob.qualified} ({inst.size} size, {device}): inputs {[_describe(v) for v in inst.inputs]}", highlight=False
    )
    out.print(
        f"  output {[_describe(v) for v in outputs]}; eager median {times[len(times) // 2] * 1e3:.3f} ms over {repeats} calls",
        highlight=False,
    )
    return ExitCode.OK
