"""`kernelwright problems ...`: list, show and run problems (built-in suite, a folder, a file).

`list` and `show` are what a new user runs first, on a KernelBench checkout of hundreds of files
whose default inputs can take gigabytes: `list` runs no problem code (imports are read, not run,
unless `--check`), `show` reads shapes on the meta device and allocates nothing, and both say up
front what will not work here (a missing module, a size that will not fit in memory). torch is
imported inside the commands that need it, so `kernelwright --help` stays quick.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from kernelwright.cli.tables import Column, fitted_table
from kernelwright.errors import EnvironmentProblem, ExitCode
from kernelwright.problems import Problem, load_folder, resolve_problem
from kernelwright.problems.imports import ImportStatus, check_imports, install_hint, pip_package, static_status
from kernelwright.problems.loader import BUILTIN_SUITE
from kernelwright.vocabulary import Device, Size

if TYPE_CHECKING:
    from kernelwright.problems.footprint import Footprint

problems_app = typer.Typer(
    help="List, inspect and run problems (built-in suite, a folder, a KernelBench checkout).", no_args_is_help=True
)
out = Console()
err = Console(stderr=True)

_LIST_COLUMNS = (
    Column("name"),
    Column("level", drop=5),
    Column("dtype", drop=2),
    Column("small", drop=4),
    Column("variants", drop=3),
    Column("imports"),
    Column("description", identifier=False, drop=1),
)


def _describe(value: Any) -> str:
    if hasattr(value, "shape"):
        return f"{value.dtype}".replace("torch.", "") + str(list(value.shape))
    return repr(value)


def _import_summary(statuses: list[ImportStatus], total: int) -> str | None:
    """One line for the problems that will not import here, by missing module."""
    failed = [s for s in statuses if not s.ok]
    if not failed:
        return None
    by_module = Counter(m for s in failed for m in s.missing)
    parts = [f"{m} missing for {n} (pip install {pip_package(m)})" for m, n in by_module.most_common()]
    others = sum(1 for s in failed if not s.missing)
    if others:
        parts.append(f"{others} fail for other reasons (above)")
    return f"{len(failed)} of {total} problems cannot be imported here: {'; '.join(parts)}"


@problems_app.command("list")
def list_problems(
    path: Annotated[
        Optional[Path], typer.Argument(help="A problem folder or KernelBench checkout; default: the built-in suite.")
    ] = None,
    level: Annotated[Optional[int], typer.Option("--level", "-l", help="Only this level (1-4).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Import every file (child processes, slower) instead of only reading its imports."
        ),
    ] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=1, help="With --check: seconds per file.")] = 60.0,
) -> int:
    """List problems and whether each imports here. Bad files are reported and skipped; no
    problem's code runs unless --check."""
    report = load_folder(path) if path else load_folder(BUILTIN_SUITE, builtin=True)
    problems = [p for p in report.problems if level is None or p.level == level]
    for error in report.errors:
        err.print(f"[yellow]skipped[/]: {escape(error.message)}", highlight=False, soft_wrap=True)
    statuses: dict[Path, ImportStatus] = (
        check_imports([p.path for p in problems], timeout_s=timeout)
        if check
        else {p.path: static_status(p.source) for p in problems}
    )
    summary = _import_summary(list(statuses.values()), len(problems))
    if as_json:
        doc = {
            "source": str(path or BUILTIN_SUITE),
            "imports_checked": "import" if check else "static",
            "problems": [_summary(p, statuses[p.path]) for p in problems],
            "skipped": [e.message for e in report.errors],
        }
        typer.echo(json.dumps(doc, indent=2))
    else:
        rows = [
            [
                p.qualified,
                str(p.level or "-"),
                p.meta.dtype,
                "yes" if p.has_small else "-",
                "yes" if p.has_variants else "-",
                statuses[p.path].describe(),
                p.meta.description,
            ]
            for p in problems
        ]
        how = "imported in child processes" if check else "read, not run (--check imports each file)"
        table = fitted_table(
            _LIST_COLUMNS,
            rows,
            out.width,
            title=f"{len(problems)} problems in {path or 'the built-in suite'}",
            caption=f"imports: {how}",
        )
        out.print(table)
    for p in problems:  # a failure that is not a missing module: its message, one line each
        if statuses[p.path].error:
            message = escape(f"{p.qualified}: {statuses[p.path].error}")
            err.print(f"[yellow]import failed[/]: {message}", highlight=False, soft_wrap=True)
    if summary:
        err.print(f"[yellow]note[/]: {escape(summary)}", highlight=False, soft_wrap=True)
    return ExitCode.NEEDS_ATTENTION if report.errors or summary else ExitCode.OK


def _summary(problem: Problem, status: ImportStatus) -> dict[str, Any]:
    install = install_hint(status.missing) if status.missing else None
    return problem.summary() | {"imports": status.model_dump() | {"install": install}}


def _memory(problem: Problem, footprint: Footprint) -> dict[str, Any]:
    """Whether an evaluation at this size fits this machine, by the harness's own estimate."""
    import torch

    from kernelwright.harness.capacity import check_memory, scratch_in_ram, usable_memory
    from kernelwright.harness.options import EvalOptions
    from kernelwright.problems.footprint import human_bytes

    device = Device.CUDA if torch.cuda.is_available() else Device.CPU  # eval's `auto`
    opts = EvalOptions(device=device, size=footprint.size)
    have = usable_memory()
    try:
        need = check_memory(problem, footprint, opts, scratch_in_ram=scratch_in_ram())
    except EnvironmentProblem as exc:
        return {"device": device, "fits": False, "available_bytes": have, "note": f"{exc.message} ({exc.hint})"}
    note = f"an evaluation on {device} needs {need.describe()}"
    if need.device_bytes:
        note += f" and about {human_bytes(need.device_bytes)} on the GPU"
    if have is not None:
        note += f"; {human_bytes(have)} available"
    return {"device": device, "fits": True, "needed_bytes": need.host_bytes, "available_bytes": have, "note": note}


@problems_app.command("show")
def show_problem(
    problem: Annotated[str, typer.Argument(help="A problem name (see `problems list`) or a problem file.")],
    size: Annotated[Size, typer.Option("--size", help="Which inputs to describe: default or small.")] = Size.DEFAULT,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    source: Annotated[bool, typer.Option("--source", help="Also print the file's source.")] = False,
) -> int:
    """Describe a problem: shapes, bytes, and whether it fits this machine. Imports the file but
    allocates no tensor (shapes are read on the meta device)."""
    from kernelwright.problems.footprint import describe_item, human_bytes, measure

    prob = resolve_problem(problem)
    fp = measure(prob, size)
    memory = _memory(prob, fp)
    doc = prob.summary() | {
        "size": fp.size,
        "init_inputs": fp.init_inputs,
        "inputs": [describe_item(v) for v in fp.inputs],
        "variants": [[describe_item(v) for v in var] for var in fp.variants],
        "outputs": None if fp.outputs is None else [o.describe() for o in fp.outputs],
        "bytes": {
            "inputs": fp.input_bytes,
            "largest_input_set": fp.largest_input_bytes,
            "outputs": fp.output_bytes,
            "parameters": fp.param_bytes,
        },
        "memory": memory,
        "notes": fp.notes,
        "tolerance": dict(zip(("atol", "rtol"), prob.meta.tolerance(), strict=False)),
        "input_constraints": prob.meta.input_constraints,
    }
    if as_json:
        typer.echo(json.dumps(doc | ({"source": prob.source} if source else {}), indent=2))
        return ExitCode.OK
    outputs = "unknown (see notes)" if fp.output_bytes is None else human_bytes(fp.output_bytes)
    shown = {k: v for k, v in doc.items() if k not in {"bytes", "memory", "notes", "sha256", "outputs"}} | {
        "outputs": ", ".join(doc["outputs"]) if doc["outputs"] is not None else "unknown",
        "inputs": ", ".join(doc["inputs"]),
        "variants": "; ".join(", ".join(v) for v in doc["variants"]) or "-",
        "bytes": f"inputs {human_bytes(fp.input_bytes)} (largest set {human_bytes(fp.largest_input_bytes)}), "
        f"outputs {outputs}, parameters {human_bytes(fp.param_bytes)}",
    }
    for key, value in shown.items():
        out.print(f"[bold]{key:>17}[/]: {escape(str(value))}", highlight=False, soft_wrap=True)
    verdict = "[green]fits[/]" if memory["fits"] else "[bold red]will not fit[/]"
    out.print(f"[bold]{'memory':>17}[/]: {verdict}: {escape(memory['note'])}", highlight=False, soft_wrap=True)
    for note in fp.notes:
        out.print(f"[bold]{'note':>17}[/]: {escape(note)}", highlight=False, soft_wrap=True)
    if source:
        out.print(prob.source, markup=False, highlight=False)
    return ExitCode.OK


@problems_app.command("run")
def run_reference(
    problem: Annotated[str, typer.Argument(help="A problem name or file.")],
    size: Annotated[Size, typer.Option("--size", help="default or small.")] = Size.DEFAULT,
    device: Annotated[Device, typer.Option("--device", help="cpu or cuda.")] = Device.CPU,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Timed calls after one warm-up.")] = 5,
) -> int:
    """Run a problem's PyTorch reference (eager) and print its output shapes and median time.
    Refused (exit 5) when its inputs and outputs will not fit this machine's memory."""
    import torch

    from kernelwright.harness.capacity import check_reference_run
    from kernelwright.problems.footprint import measure
    from kernelwright.problems.instance import materialize

    if device == "cuda" and not torch.cuda.is_available():
        raise EnvironmentProblem("--device cuda but no CUDA GPU is visible", hint="use --device cpu")
    prob = resolve_problem(problem)
    check_reference_run(prob, measure(prob, size), device)
    inst = materialize(prob, size)
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
