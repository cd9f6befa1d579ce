"""`kernelwright specs [GPU] [--list] [--json]`: this machine's hardware, or a GPU from the spec table."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from kernelwright.cli.tables import Column, fitted_table
from kernelwright.errors import ExitCode, UsageError

if TYPE_CHECKING:  # the spec layer (yaml, the table's models) loads when a specs command runs
    from kernelwright.hardware_specs import GpuSpec, HardwareInfo

out = Console()

# At 80 columns the figures stay whole; vendor, architecture, CC and L2 go first, in that order.
_LIST_COLUMNS = (
    Column("name"),
    Column("vendor", drop=5),
    Column("arch", drop=4),
    Column("CC", drop=3),
    Column("SMs", justify="right"),
    Column("memory GB", justify="right"),
    Column("BW GB/s", justify="right"),
    Column("L2 MB", drop=2, justify="right"),
    Column("FP32 TF", justify="right"),
    Column("BF16 TC TF", justify="right"),
    Column("FP8 TC TF", drop=1, justify="right"),
)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _json(doc: Any) -> None:
    typer.echo(json.dumps(doc, indent=2))


def _spec_table(spec: GpuSpec, provenance: dict[str, str] | None = None) -> Table:
    from kernelwright.hardware_specs import ridge_points
    from kernelwright.hardware_specs.query import unit_of

    title = f"{spec.name} ({spec.vendor}, {spec.architecture or 'architecture unknown'})"
    table = Table(title=title, title_justify="left")
    table.add_column("field", no_wrap=True)
    for column in ("value", "unit", "source"):
        table.add_column(column, overflow="fold")
    if provenance is not None:
        table.add_column("from")
    for path, value in spec.figures():
        source = spec.source_for(path)
        row = [path, _fmt(value), unit_of(path) or "", source.title if source else ""]
        if provenance is not None:
            row.append(provenance.get(path, ""))
        table.add_row(*row)
    for key, value in ridge_points(spec).items():
        row = [f"ridge.{key}", f"{value:.1f}", unit_of(f"ridge.{key}") or "", "derived"]
        table.add_row(*(row + ([""] if provenance is not None else [])))
    return table


def _print_notes(notes: list[str]) -> None:
    for note in notes:
        out.print(f"[dim]note:[/] {note}", highlight=False)


def _list_gpus(as_json: bool) -> int:
    from kernelwright.hardware_specs import load_table

    specs = load_table().gpus
    if as_json:
        _json({"gpus": [s.model_dump(mode="json") for s in specs]})
        return ExitCode.OK
    rows = []
    for s in specs:
        cells = (
            s.name, s.vendor, s.architecture, s.compute_capability, s.sms, s.memory.size_gb,
            s.memory.bandwidth_gbs, s.cache.l2_mb, s.cuda_core_tflops.fp32,
            s.tensor_core_tflops.bf16, s.tensor_core_tflops.fp8,
        )  # fmt: skip
        rows.append(["-" if c is None else _fmt(c) for c in cells])
    title = f"{len(specs)} GPUs in the spec table (dense peak throughput)"
    table = fitted_table(_LIST_COLUMNS, rows, out.width, title=title)
    out.print(table)
    return ExitCode.OK


def _show_gpu(name: str, as_json: bool) -> int:
    from kernelwright.hardware_specs import lookup, ridge_points

    found = lookup(name)
    spec = found.spec
    if as_json:
        _json(
            {
                "query": name,
                "match_note": found.note,
                "spec": spec.model_dump(mode="json"),
                "ridge_points": ridge_points(spec),
            }
        )
        return ExitCode.OK
    out.print(_spec_table(spec))
    _print_notes([n for n in (found.note, *spec.notes) if n])
    return ExitCode.OK


def _show_machine(info: HardwareInfo) -> None:
    runtime = ", ".join(
        f"{k} {v}"
        for k, v in (
            ("torch", info.torch_version),
            ("CUDA", info.cuda_runtime),
            ("HIP", info.hip_runtime),
            ("driver", info.driver_version),
        )
        if v
    )
    out.print(f"[bold]{info.kind.upper()} machine[/] — {info.os}, Python {info.python}; {runtime}", highlight=False)
    for gpu in info.gpus:
        out.print(_spec_table(gpu.spec, gpu.provenance))
        live = gpu.live
        out.print(
            f"  live: {live.name}, {live.total_memory_gib} GiB usable, SM clock {_fmt(live.clock_sm_mhz)} MHz now"
            f" / {_fmt(live.clock_sm_max_mhz)} MHz max",
            highlight=False,
        )
        _print_notes(gpu.notes + gpu.spec.notes)
    cpu = info.cpu
    table = Table(title="CPU", title_justify="left", show_header=False)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    caches = ", ".join(f"L{c.level} {c.type} {c.size_kb} KB" for c in cpu.caches) or "-"
    rows = {
        "model": cpu.model,
        "architecture": cpu.architecture,
        "physical cores": cpu.physical_cores,
        "logical cores": cpu.logical_cores,
        "ISA extensions": " ".join(cpu.isa_extensions) or "-",
        "caches (per cpu0)": caches,
        "memory": f"{cpu.memory_total_gib} GiB" if cpu.memory_total_gib is not None else None,
        "torch threads": cpu.torch_threads,
    }
    for key, value in rows.items():
        table.add_row(key, "-" if value is None else str(value))
    out.print(table)
    _print_notes(info.notes)


def register(app: typer.Typer) -> None:
    @app.command("specs")
    def specs(
        gpu: Annotated[
            Optional[str], typer.Argument(help="A GPU name or alias (e.g. h100, 'NVIDIA H200'); default: this machine.")
        ] = None,
        list_all: Annotated[bool, typer.Option("--list", help="List the GPUs in the spec table.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    ) -> int:
        """Show hardware specs: this machine (live GPU or CPU), a GPU from the sourced table, or the list."""
        from kernelwright.hardware_specs import detect

        if list_all and gpu:
            raise UsageError("give a GPU name or --list, not both")
        if list_all:
            return _list_gpus(as_json)
        if gpu:
            return _show_gpu(gpu, as_json)
        info = detect()
        if as_json:
            _json(info.model_dump(mode="json"))
        else:
            _show_machine(info)
        return ExitCode.OK
