"""`kernelwright model profile|extract FILE.py:FACTORY`: your own model (issue #32).

`profile` ranks the model's aten ops by self device time, with the roofline's room, and times the
whole model eager against torch.compile; `extract` writes one ranked op as a problem file that
every other command takes. torch loads inside the commands: `kernelwright --help` stays quick.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from kernelwright.cli.context import AppState
from kernelwright.cli.tables import Column, fitted_table
from kernelwright.errors import ExitCode
from kernelwright.vocabulary import DeviceChoice

if TYPE_CHECKING:
    from kernelwright.ownmodel import LoadedModel, ModelProfile, OpRow, Timing

model_app = typer.Typer(
    help="Your own model (FILE.py:FACTORY, the factory returning (module, example_inputs)): "
    "find its hot operators and extract them as problems.",
    no_args_is_help=True,
)
out = Console()
err = Console(stderr=True)

Spec = Annotated[str, typer.Argument(help="FILE.py:FACTORY; the factory returns (module, example_inputs).")]
DeviceOpt = Annotated[
    Optional[DeviceChoice], typer.Option("--device", help="cpu, cuda or auto (default: cuda when a GPU is visible).")
]

_COLUMNS = (
    Column("#", justify="right"),
    Column("op"),
    Column("inputs", identifier=False, drop=2),
    Column("time", justify="right"),
    Column("share", justify="right"),
    Column("calls", justify="right", drop=3),
    Column("room", justify="right"),
    Column("roofline", identifier=False, drop=1),
)


def _duration(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def _load(ctx: typer.Context, spec: str, device: DeviceChoice | None) -> LoadedModel:
    from kernelwright.ownmodel import load_model
    from kernelwright.tools.evaluate import resolve_device

    state: AppState = ctx.obj
    return load_model(spec, resolve_device(device, state.settings()))


def _row(op: OpRow) -> list[str]:
    inputs = ", ".join(f"{i.dtype}{i.shape}" for i in op.inputs)
    calls = f"{op.calls:g}"
    if op.room is None:
        room, roof = "n/a", op.roofline_note.removeprefix("n/a: ")
    else:
        room = f"{op.room:.1f}x"
        roof = f"{op.bound or 'bound'}: speed of light {_duration(op.sol_s or 0.0)}/call"
        roof += f" ({op.roofline_note})" if op.roofline_note else ""
    return [
        str(op.rank),
        op.name.removeprefix("aten::"),
        inputs,
        _duration(op.time_s),
        f"{op.share:.1%}",
        calls,
        room,
        roof,
    ]


def _timing(t: Timing) -> str:
    return (
        f"{t.label}: median {_duration(t.median_s)} (quartiles {_duration(t.q1_s)} – {_duration(t.q3_s)}, "
        f"min {_duration(t.min_s)}, max {_duration(t.max_s)}, {t.repeats} calls)"
    )


def _print(report: ModelProfile, top: int) -> None:
    shown = report.ops[:top]
    title = (
        f"{report.model} on {report.device_name}: top {len(shown)} of {len(report.ops)} ops by self "
        f"{report.time_kind} ({_duration(report.total_s)} per forward, {report.iterations} forwards profiled)"
    )
    out.print(fitted_table(_COLUMNS, [_row(op) for op in shown], out.width, title=title, title_justify="left"))
    out.print(f"shown: {sum(op.share for op in shown):.1%} of the model's {report.time_kind}", highlight=False)
    if report.eager is not None:
        out.print(_timing(report.eager), highlight=False)
    if report.compiled is not None:
        out.print(_timing(report.compiled), highlight=False)
    if report.speedup is not None:
        out.print(f"torch.compile vs eager: {report.speedup:.2f}x (median over median)", highlight=False)
    if report.compile_note:
        out.print(f"[dim]note:[/] {escape(report.compile_note)}", highlight=False)
    out.print(f"[dim]timer: {escape(report.timer)}[/]", highlight=False)
    if report.bandwidth_source:
        out.print(f"[dim]roofline: bandwidth {escape(report.bandwidth_source)}; peaks {escape(report.peak_source)}[/]")


@model_app.command("profile")
def profile(
    ctx: typer.Context,
    spec: Spec,
    device: DeviceOpt = None,
    json_out: Annotated[
        Optional[Path], typer.Option("--json", help="Also write the report as JSON to this file.")
    ] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Ops shown in the table.")] = 15,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Timed calls of the whole model, each way.")] = 20,
    no_compile: Annotated[
        bool, typer.Option("--no-compile", help="Time eager only (compiling takes seconds).")
    ] = False,
) -> int:
    """Rank the model's aten ops by self device time (share, calls, roofline room); time the whole
    model eager and under torch.compile."""
    from kernelwright.ownmodel import profile_model

    loaded = _load(ctx, spec, device)
    report = profile_model(loaded, repeats=repeats, compile=not no_compile)
    _print(report, top)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(report.model_dump_json(indent=2), encoding="utf-8")
        err.print(f"wrote {escape(str(json_out))}", highlight=False)
    return ExitCode.OK


@model_app.command("extract")
def extract(
    ctx: typer.Context,
    spec: Spec,
    op: Annotated[
        str,
        typer.Option(
            "--op", help="The op: its rank in `model profile` (1 is the most time) or its name (gelu, aten::addmm)."
        ),
    ],
    out_dir: Annotated[Path, typer.Option("--out", help="Folder the problem file is written to.")] = Path("extracted"),
    device: DeviceOpt = None,
) -> int:
    """Write one ranked op as a KernelBench-format problem file (recorded shapes and dtypes, other
    shapes the trace saw as variants)."""
    from kernelwright.ownmodel import extract_op

    loaded = _load(ctx, spec, device)
    path = extract_op(loaded, op, out_dir)
    out.print(str(path), highlight=False, soft_wrap=True)
    err.print(f"next: kernelwright problems show {escape(str(path))}", highlight=False)
    return ExitCode.OK


def register(app: typer.Typer) -> None:
    app.add_typer(model_app, name="model")
