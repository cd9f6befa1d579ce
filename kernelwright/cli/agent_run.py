"""Running the agent from the command line: the headless renderer (one consumer of the agent's
event stream; the trajectory writer and `--events-json` are others), the summary, and `execute`,
shared by `optimize` and `demo`. Imported only when one of them runs: it pulls in the agent,
LangChain and torch, which `--help` must not pay for.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.rule import Rule
from rich.table import Table

from kernelwright.agent.assembly import assemble
from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.events import JsonLinesWriter, _Event
from kernelwright.agent.progress import RunProgress
from kernelwright.agent.runner import RunOutcome, RunSteering, run
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.config import Settings
from kernelwright.tui.status import meters_text, status_text

out = Console(width=None if sys.stdout.isatty() else 140)


def _speed(speedups: dict[str, dict[str, float]]) -> str:
    return ", ".join(
        f"{s['ratio']:.2f}x vs {name} [{s['ci_low']:.2f}-{s['ci_high']:.2f}]" for name, s in speedups.items()
    )


def _first_error(message: str) -> str:
    """The line of a harness message worth one screen line: a compiler's `error:` line if any."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in lines:
        if "error:" in line:
            return line[line.index("error:") :][:160]
    return lines[0][:160] if lines else ""


class HeadlessRenderer:
    """Prints one line per meaningful event; tokens and cost as a running meter."""

    COLOURS = {"correct": "green", "incorrect": "red", "rejected": "magenta"}

    def __init__(self, console: Console, label: str = "") -> None:
        self.console, self.label = console, label
        self.tokens = 0.0
        self.cost = 0.0
        self.estimated = False

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False)

    def __call__(self, event: _Event) -> None:
        e: Any = event
        kind = getattr(event, "kind", "")
        if kind == "run_started":
            how = f" [bold yellow]{self.label}[/]" if self.label else ""
            verb = "resuming" if e.resumed else "run"
            self.say(
                f"[bold]{verb} {e.run_id}[/]{how}: {e.problem} on {e.device}, backend {e.backend}, "
                f"target: CI lower bound > {e.target:g}x vs {e.target_baseline}"
            )
            if e.cost_note:
                self.say(f"  [yellow]cost[/]: {e.cost_note}")
        elif kind == "plan_written":
            expect = f" (expects {e.expected_speedup:g}x)" if e.expected_speedup else ""
            self.say(f"[bold cyan]round {e.round}[/] plan{expect}: {e.plan}")
        elif kind == "coder_retry":
            self.say(f"  [yellow]coder reply unusable[/]: {e.why}")
        elif kind == "llm_note":
            who = f"{e.role} (sample {e.sample})" if e.sample else e.role
            self.say(f"  [yellow]{who}[/]: {e.detail}")
        elif kind == "candidate_evaluated":
            colour = self.COLOURS.get(e.verdict, "yellow")
            reason = f" ({e.reason})" if e.reason else ""
            detail = _speed(e.speedups) if e.verdict == "correct" else _first_error(e.message)
            cached = " [dim](stored result)[/]" if e.cached else ""
            accepted = "  [bold green]beats the target[/]" if e.beats_target else ""
            also = f" with {', '.join(str(i) for i in e.also)}" if e.also else ""
            origin = f" [dim](from {e.parent}{also})[/]" if e.parent is not None else ""
            self.say(f"  candidate {e.index}{origin}: [{colour}]{e.verdict}{reason}[/]{cached} {detail}{accepted}")
        elif kind == "profile_skipped":
            self.say(f"  [dim]{e.why}[/]")
        elif kind == "candidate_profiled":
            own = f", own kernels {e.own_pct:.0f}% of GPU time" if e.own_pct is not None else ""
            first = e.digest.splitlines()[0][:120] if e.digest else ""
            self.say(f"  profiled candidate {e.index}{own}: [dim]{first}[/]")
        elif kind == "tool_called":
            self.say(f"  [dim]{e.role} -> {e.name}({', '.join(f'{k}={v!r}' for k, v in e.args.items())})[/]")
        elif kind == "remembered_start":
            self.say(
                f"  memory: starting from {e.memory_id} (run {e.from_run} candidate {e.from_index} on {e.machine}: "
                f"{e.outcome_then}), re-evaluated here as candidate 0"
            )
        elif kind == "memory_recalled":
            left = f", {e.left_out} left out for the budget" if e.left_out else ""
            refs = ", ".join(str(i["ref"]) for i in e.items[:8])
            self.say(
                f"  [dim]memory: {len(e.items)} item(s) recalled for the planner (~{e.tokens} tokens{left}): {refs}[/]"
            )
        elif kind == "run_branched":
            self.say(f"  starting from candidate {e.from_index} of run {e.from_run} ({e.verdict}), as candidate 0")
        elif kind == "review_written":
            meter = f"{int(self.tokens)} tokens{' (estimated)' if self.estimated else ''}, ${self.cost:.2f}"
            self.say(f"  review: {e.decision}: {e.feedback}")
            if e.lesson:
                self.say(f"  lesson: {e.lesson}")
            self.say(f"  [dim]budget used: {meter}[/]")
        elif kind == "usage_updated":
            self.tokens += e.total_tokens
            self.cost += e.cost_usd
            self.estimated = self.estimated or e.estimated
        elif kind == "run_finished":
            colour = "green" if e.accepted else "yellow"
            self.say(f"[bold {colour}]stopped[/]: {e.stop_reason}")


class LiveStatus:
    """A terminal's live status line under the event lines: where the run stands (round, step,
    best speedup vs eager and torch.compile) and its budget meters, redrawn as events arrive and
    as the wall clock moves; the same picture the TUI shows (`agent/progress.py`, `tui/status.py`)."""

    def __init__(self) -> None:
        self.progress = RunProgress()

    def __call__(self, event: _Event) -> None:
        self.progress.apply(event)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        self.progress.now = time.time()
        line = status_text(self.progress, read_only=False, approval=False)
        yield Rule(style="dim")
        yield line
        yield meters_text(self.progress, options.max_width)


def print_summary(outcome: RunOutcome, console: Console) -> None:
    table = Table(title=f"run {outcome.config.run_id}", show_lines=False)
    for column in ("#", "round", "verdict", "reason", "speedups (CI 95%)"):
        table.add_column(column)
    best = outcome.best["index"] if outcome.best else None
    for c in outcome.candidates:
        mark = " *" if c["index"] == best else ""
        table.add_row(
            f"{c['index']}{mark}", str(c["round"]), c["verdict"], c["reason"] or "-", _speed(c["speedups"]) or "-"
        )
    console.print(table)
    if outcome.best:
        console.print(
            f"best: candidate {outcome.best['index']} -> {outcome.config.run_dir / 'best.py'}", highlight=False
        )
    else:
        console.print("no correct candidate", highlight=False)
    console.print(f"run folder: {outcome.config.run_dir}", highlight=False)


def execute(
    config: AgentConfig,
    settings: Settings,
    *,
    resume: bool = False,
    events_json: Path | None = None,
    console: Console = out,
    hints: tuple[str, ...] = (),
) -> tuple[RunOutcome, ScriptedSession | None]:
    label = f"scripted: {config.scripted}" if config.scripted else ""
    renderer = HeadlessRenderer(console, label)
    writer = JsonLinesWriter(events_json) if events_json else None
    status = LiveStatus() if console.is_terminal else None
    live = Live(status, console=console, refresh_per_second=2, transient=True) if status else contextlib.nullcontext()
    try:
        with live, assemble(config, settings) as parts:
            steering = RunSteering(
                resume=resume,
                subscribers=(
                    renderer,
                    *parts.script_watch(),  # a scripted run stops where reality leaves the script
                    *((writer,) if writer is not None else ()),
                    *((status,) if status is not None else ()),
                ),
                hints=hints,
            )
            outcome = run(config, parts, steering)
            session = parts.scripted
    finally:
        if writer is not None:
            writer.close()
    print_summary(outcome, console)
    return outcome, session
