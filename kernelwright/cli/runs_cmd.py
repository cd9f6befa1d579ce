"""`kernelwright runs list|show RUN_ID`: the run folders under runs/ and what each left behind."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kernelwright.cli.context import AppState
from kernelwright.errors import ExitCode, UsageError

out = Console(width=None if sys.stdout.isatty() else 200)  # pipes and logs get whole rows
runs_app = typer.Typer(help="Optimization runs: list them, show one.", no_args_is_help=True)


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
    """One run: its outcome, candidates and lessons."""
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
    for c in summary.get("candidates", []):
        reason = f" ({c['reason']})" if c.get("reason") else ""
        speed = ", ".join(f"{s['ratio']:.2f}x vs {n}" for n, s in c["speedups"].items())
        out.print(f"  #{c['index']} round {c['round']}: {c['verdict']}{reason} {speed}", highlight=False)
    for lesson in summary.get("lessons", []):
        out.print(f"  lesson: {lesson}", highlight=False)
    if summary.get("best_file"):
        out.print(f"best: {summary['best_file']}", highlight=False)
    return ExitCode.OK


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
