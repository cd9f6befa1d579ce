"""`kernelwright optimize PROBLEM`: the agent's loop, headless, with a live log of its events
(`cli/agent_run.py`, imported when the command runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kernelwright.cli.context import AppState
from kernelwright.errors import ExitCode, UsageError


def register(app: typer.Typer) -> None:
    @app.command("optimize")
    def optimize_command(
        ctx: typer.Context,
        problem: Annotated[Optional[str], typer.Argument(help="A problem name or file (omit with --resume).")] = None,
        device: Annotated[
            Optional[str], typer.Option("--device", help="cuda or cpu (default: the GPU if any).")
        ] = None,
        backend: Annotated[Optional[str], typer.Option("--backend", help="cuda, triton or cpp.")] = None,
        target: Annotated[float, typer.Option("--target", help="Required speedup (CI lower bound) vs compile.")] = 1.0,
        rounds: Annotated[int, typer.Option("--rounds", min=1, help="Planner rounds at most.")] = 8,
        max_tokens: Annotated[int, typer.Option("--max-tokens", help="Token budget.")] = 2_000_000,
        max_cost: Annotated[float, typer.Option("--max-cost", help="LLM cost budget, USD.")] = 20.0,
        max_time: Annotated[float, typer.Option("--max-time", help="Wall-time budget, seconds.")] = 3600.0,
        patience: Annotated[
            int, typer.Option("--no-improvement", help="Stop after N rounds without a better kernel.")
        ] = 4,
        model: Annotated[Optional[str], typer.Option("--model", help="Model name for every role.")] = None,
        structured: Annotated[
            str, typer.Option("--structured-output", help="function_calling, json_schema, json_mode or plain_json.")
        ] = "function_calling",
        size: Annotated[str, typer.Option("--size", help="default, or small (quick CPU runs).")] = "default",
        width: Annotated[
            int, typer.Option("--width", min=1, help="Candidates sampled per coder step, evaluated as one batch.")
        ] = 1,
        policy: Annotated[
            str, typer.Option("--policy", help="strict (engineering: not in the harness yet).")
        ] = "strict",
        resume: Annotated[Optional[str], typer.Option("--resume", help="Resume the run with this id.")] = None,
        hint: Annotated[Optional[list[str]], typer.Option("--hint", help="A hint for the next planner prompt.")] = None,
        events_json: Annotated[
            Optional[Path], typer.Option("--events-json", help="Write every event as JSON lines.")
        ] = None,
        price_in: Annotated[float, typer.Option("--price-in", help="USD per 1k prompt tokens (cost meter).")] = 0.0,
        price_out: Annotated[float, typer.Option("--price-out", help="USD per 1k completion tokens.")] = 0.0,
        scripted: Annotated[
            Optional[str],
            typer.Option(
                "--scripted", help="Use a scripted LLM session shipped with kernelwright (relu-cpu, relu-cuda)."
            ),
        ] = None,
    ) -> int:
        """Optimize a problem: plan, write, evaluate and review kernels until one beats torch.compile
        by --target or a budget runs out. Writes runs/<id>/ (best.py, candidates/, trajectory.json)."""
        from kernelwright.agent import runs
        from kernelwright.agent.configuration import AgentConfig
        from kernelwright.cli.agent_run import execute
        from kernelwright.tools.evaluate import resolve_device

        state: AppState = ctx.obj
        settings = state.settings()
        if policy != "strict":
            raise UsageError(f"--policy {policy} is not supported by the harness yet; strict is what it enforces")
        if size not in ("default", "small"):
            raise UsageError(f"--size must be 'default' or 'small', not {size!r}")
        if resume:
            config = runs.load_config(Path(settings.runs_dir), resume).with_credentials(settings)
            done = runs.read_summary(config.run_dir) or {}
            if done.get("finished"):
                raise UsageError(
                    f"run {resume} already finished ({done.get('stop_reason')}); nothing to resume",
                    hint=f"`kernelwright runs show {resume}`",
                )
        else:
            if problem is None:
                raise UsageError("name a PROBLEM (or --resume RUN_ID)")
            chosen = resolve_device(device, settings)
            config = AgentConfig.from_settings(
                settings,
                problem=problem,
                device=chosen,
                backend=backend or ("cuda" if chosen == "cuda" else "cpp"),
                target=target,
                max_rounds=rounds,
                max_tokens=max_tokens,
                max_cost_usd=max_cost,
                max_wall_s=max_time,
                no_improvement_rounds=patience,
                model=model,
                structured_method=structured,
                size=size,
                scripted=scripted,
                width=width,
                price_in_per_1k=price_in,
                price_out_per_1k=price_out,
            )
        outcome, _ = execute(config, settings, resume=bool(resume), events_json=events_json, hints=tuple(hint or ()))
        return ExitCode.OK if outcome.accepted else ExitCode.NEEDS_ATTENTION
