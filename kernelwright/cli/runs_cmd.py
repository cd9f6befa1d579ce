"""`kernelwright runs list|show|export RUN_ID`: the run folders under runs/, what each left behind,
and its program database (every candidate with its idea, parent, tags and verdict) as a table or
as a dataset."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelwright.cli.context import AppState
from kernelwright.cli.tables import Column, fitted_table
from kernelwright.errors import ExitCode, UsageError

out = Console(width=None if sys.stdout.isatty() else 200)  # pipes and logs get whole rows
runs_app = typer.Typer(
    help="Optimization runs: list them, show one (its program database), export one as a dataset.",
    no_args_is_help=True,
)
_DATABASE_COLUMNS = (
    Column("#", justify="right"),
    Column("round", justify="right"),
    Column("parent", justify="right"),
    Column("verdict"),
    Column("speedup vs target (95% CI)", identifier=False),
    Column("tags", drop=2, identifier=False),
    Column("idea", drop=1, identifier=False),
)


class ExportFormat(StrEnum):
    JSONL = "jsonl"


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _speed(candidate: dict[str, Any]) -> str:
    """Against the target's baseline with its CI (the acceptance figure); the other baselines
    when the target's is missing; `-` when it was not timed."""
    speedups: dict[str, dict[str, float]] = candidate.get("speedups") or {}
    base = candidate.get("target_baseline")
    names = [base] if base in speedups else list(speedups)
    return (
        ", ".join(
            f"{s['ratio']:.2f}x [{s['ci_low']:.2f}, {s['ci_high']:.2f}] vs {n}" for n in names if (s := speedups[n])
        )
        or "-"
    )


def _database_row(c: dict[str, Any]) -> list[str]:
    verdict = f"{c['verdict']} ({c['reason']})" if c.get("reason") else str(c["verdict"])
    if c.get("beats_target"):
        verdict += " *"
    parent = c.get("parent")
    return [
        str(c["index"]),
        str(c["round"]),
        "-" if parent is None else str(parent),
        verdict,
        _speed(c),
        ", ".join(c.get("tags") or []) or "-",
        _cut(c.get("idea") or "", 80) or "-",
    ]


def _best(row: dict[str, Any]) -> str:
    best = row.get("best")
    if not best:
        return "-"
    base = best.get("target_baseline")
    speed = best["speedups"].get(base) if base else None
    return f"#{best['index']}" + (f" {speed['ratio']:.2f}x vs {base}" if speed else "")


@runs_app.command("list")
def list_command(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False
) -> int:
    """Every run in the runs folder, newest first."""
    from kernelwright.agent import runs

    state: AppState = ctx.obj
    rows = runs.list_runs(Path(state.settings().runs_dir))
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return ExitCode.OK
    table = Table(title="runs")
    for column in ("run", "problem", "device", "candidates", "best", "status"):
        table.add_column(column)
    for row in rows:
        label = f"{row['run_id']}" + (" (scripted)" if row.get("scripted") else "")
        table.add_row(label, str(row["problem"]), str(row["device"]), str(row["candidates"]), _best(row), row["status"])
    out.print(table)
    return ExitCode.OK


@runs_app.command("show")
def show_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="A run id (see `runs list`).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json.")] = False,
) -> int:
    """One run: its outcome, its program database and lessons.

    The database has a row per candidate: round, parent, verdict (* beats the target), speedup
    against the target's baseline with its 95% CI, technique tags, and the idea it implements."""
    from kernelwright.agent import runs

    state: AppState = ctx.obj
    folder = Path(state.settings().runs_dir) / run_id
    if not (folder / "config.json").is_file():
        raise UsageError(f"no run {run_id!r} in {folder.parent}", hint="`kernelwright runs list` shows the runs")
    summary = runs.read_summary(folder)
    if summary is None:
        raise UsageError(f"run {run_id} has no summary.json yet (still running, or killed before it wrote one)")
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return ExitCode.OK
    scripted = f" [yellow](scripted: {summary['scripted']})[/]" if summary.get("scripted") else ""
    out.print(f"[bold]{run_id}[/]{scripted}: {summary['problem']} on {summary['device']}", highlight=False)
    out.print(f"status: {summary['stop_reason']}", highlight=False)
    candidates = summary.get("candidates", [])
    if candidates:
        rows = [[escape(cell) for cell in _database_row(c)] for c in candidates]
        out.print(fitted_table(_DATABASE_COLUMNS, rows, out.width, title="program database", title_justify="left"))
    for lesson in summary.get("lessons", []):
        out.print(f"  lesson: {lesson}", highlight=False)
    if summary.get("best_file"):
        out.print(f"best: {summary['best_file']}", highlight=False)
    return ExitCode.OK


@runs_app.command("export")
def export_command(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="A run id (see `runs list`).")],
    fmt: Annotated[
        ExportFormat, typer.Option("--format", help="jsonl: one JSON object per candidate (the only format yet).")
    ] = ExportFormat.JSONL,
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.", dir_okay=False)
    ] = None,
) -> int:
    """One run's candidates as a dataset, one JSON line each (stdout unless --output).

    The layout is close to KernelBook's: the problem and its PyTorch reference (python_code), the
    plan, parents, kernel_code, backend, device, verdict, reason, the harness's feedback, speedups
    with CIs and medians, profile digest, tags. `kernelwright.agent.dataset.load_export` reads it
    back with the schema check."""
    from kernelwright.agent import dataset

    state: AppState = ctx.obj
    text = dataset.to_jsonl(dataset.export_rows(Path(state.settings().runs_dir), run_id))
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
    return ExitCode.OK


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
