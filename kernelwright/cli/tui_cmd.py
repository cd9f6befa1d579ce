"""`kernelwright tui [PROBLEM] [--resume RUN_ID] [--scripted] [--report FILE]`: the Textual app.
With a problem it starts a run at once; with `--resume` it carries on an unfinished run or
browses a finished one (read-only); with neither, a start screen to pick. `--scripted` drives
the run with the demo's scripted LLM session (labelled so), which needs no API key. Textual is
imported only when the command runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kernelwright.cli.context import AppState
from kernelwright.errors import ExitCode, UsageError
from kernelwright.vocabulary import Backend, Device, DeviceChoice


def register(app: typer.Typer) -> None:
    @app.command("tui")
    def tui_command(
        ctx: typer.Context,
        problem: Annotated[
            Optional[str], typer.Argument(help="A problem name or file (omit for the start screen).")
        ] = None,
        resume: Annotated[
            Optional[str],
            typer.Option("--resume", help="An earlier run: resumed if unfinished, browsed read-only if finished."),
        ] = None,
        scripted: Annotated[
            bool,
            typer.Option(
                "--scripted",
                help="Drive the run with the demo's scripted LLM session (its problem only: relu on a CPU, "
                "gelu_layernorm_bf16 on a GPU; no key).",
            ),
        ] = False,
        device: Annotated[
            Optional[DeviceChoice], typer.Option("--device", help="cuda or cpu (default: the GPU if any).")
        ] = None,
        backend: Annotated[Optional[Backend], typer.Option("--backend", help="cuda, triton or cpp.")] = None,
        target: Annotated[float, typer.Option("--target", help="Required speedup (CI lower bound) vs compile.")] = 1.0,
        rounds: Annotated[int, typer.Option("--rounds", min=1, help="Planner rounds at most.")] = 8,
        model: Annotated[Optional[str], typer.Option("--model", help="Model name for every role.")] = None,
        approve_plans: Annotated[
            bool,
            typer.Option("--approve-plans", help="Ask for approval (or an edit) of each plan before code is written."),
        ] = False,
        report: Annotated[
            Optional[Path], typer.Option("--report", help="Open a chat about this Nsight Compute report instead.")
        ] = None,
        compare: Annotated[
            Optional[Path], typer.Option("--compare", help="With --report: a candidate report to compare it with.")
        ] = None,
    ) -> int:
        """Watch and steer an optimization run in a terminal UI: the step timeline, candidates with
        verdicts and speedups, code and diffs, profiles, a speedup chart and budget meters; pause,
        approve or edit plans, hint, stop keeping the best, branch, export. Keys are in the footer;
        Ctrl+P lists every command."""
        from kernelwright.agent import runs
        from kernelwright.agent.configuration import AgentConfig, RunFlags
        from kernelwright.agent.demo import demo_config, demo_for, is_demo_problem
        from kernelwright.tools.evaluate import resolve_device
        from kernelwright.tui.app import make_app
        from kernelwright.tui.launch import RunRequest

        state: AppState = ctx.obj
        settings = state.settings()
        if sum(x is not None for x in (problem, resume, report)) > 1:
            raise UsageError("give one of PROBLEM, --resume RUN_ID or --report FILE")
        if compare is not None and report is None:
            raise UsageError("--compare needs --report FILE")
        request: RunRequest | None = None
        if resume is not None:
            if scripted:
                raise UsageError("--scripted starts a new run; a resumed run keeps its own model")
            config = runs.load_config(Path(settings.runs_dir), resume).with_credentials(settings)
            finished = bool((runs.read_summary(config.run_dir) or {}).get("finished"))
            request = RunRequest(config=config, resume=not finished, read_only=finished, approve_plans=approve_plans)
        elif report is not None:
            if not report.is_file():
                raise UsageError(f"no report file {report}")
        elif scripted:
            chosen = resolve_device(device, settings)
            if problem is not None and not is_demo_problem(problem, chosen):
                known = demo_for(chosen).problem
                raise UsageError(f"the scripted session on {chosen} knows only the {known!r} problem, not {problem!r}")
            request = RunRequest(config=demo_config(settings, chosen), approve_plans=approve_plans)
        elif problem is not None:
            chosen = resolve_device(device, settings)
            flags = RunFlags(
                device=chosen,
                backend=backend or (Backend.CUDA if chosen == Device.CUDA else Backend.CPP),
                target=target,
                max_rounds=rounds,
                model=model,
            )
            config = AgentConfig.from_settings(settings, problem, flags)
            request = RunRequest(config=config, approve_plans=approve_plans)
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError(
                "the TUI needs an interactive terminal",
                hint="`kernelwright optimize` runs headless (`--events-json` for machines); `demo` shows the loop",
            )
        app = make_app(settings, request=request, report=report, compare=compare)
        code = app.run()
        return ExitCode.OK if code is None else int(code)
