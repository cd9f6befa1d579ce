"""`kernelwright optimize PROBLEM`: the agent's loop, headless, with a live log of its events
(`cli/agent_run.py`, imported when the command runs)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from kernelwright.cli.context import AppState
from kernelwright.cli.search_options import ScheduleOpt
from kernelwright.errors import ExitCode, UsageError
from kernelwright.vocabulary import Backend, Device, DeviceChoice, Policy, Size, StructuredOutput

if TYPE_CHECKING:
    from kernelwright.agent.configuration import AgentConfig, RunFlags
    from kernelwright.config import Settings


# --from: which flags (typer parameter names) set which AgentConfig fields of the inherited config.
_PARAM_FIELDS = {
    "target": "target",
    "rounds": "max_rounds",
    "max_tokens": "max_tokens",
    "max_cost": "max_cost_usd",
    "max_time": "max_wall_s",
    "max_gpu_time": "max_gpu_s",
    "patience": "no_improvement_rounds",
    "llm_timeout": "request_timeout_s",
    "llm_retries": "max_retries",
    "structured": "structured_method",
    "size": "size",
    "policy": "policy",
    "scripted": "scripted",
    "width": "width",
    "temperature_schedule": "temperature_schedule",
    "no_timing": "timing",
    "ideas": "ideas",
    "seed": "seed",
    "coder_retries": "coder_retries",
    "price_in": "price_in_per_1k",
    "price_out": "price_out_per_1k",
    "price_cached": "price_cached_in_per_1k",
}
_ROLE_PARAMS = (
    "model",
    "planner_model",
    "coder_model",
    "reviewer_model",
    "temperature",
    "max_output",
    "reasoning_effort",
)


def _given(ctx: typer.Context, name: str) -> bool:
    """Was this option given (command line or its env var), rather than left at its default?"""
    from click.core import ParameterSource

    return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def _branch_config(
    settings: Settings,
    from_run: str,
    index: int | None,
    flags: RunFlags,
    given: set[str],
    device: DeviceChoice | None,
    backend: Backend | None,
) -> AgentConfig:
    """A new run's AgentConfig for `--from RUN_ID [--from-candidate N]`: the earlier run's
    configuration (as --resume reads it), a new id, and the flags given on this command line."""
    import dataclasses

    from kernelwright.agent import runs
    from kernelwright.agent.configuration import ROLES, new_run_id
    from kernelwright.tools.evaluate import resolve_device

    runs_dir = Path(settings.runs_dir)
    old = runs.load_config(runs_dir, from_run)
    runs.branch_source(runs_dir, from_run, index)  # a missing run or candidate is a usage error now
    chosen = flags.config_fields()
    changes: dict[str, Any] = {field: chosen.get(field) for param, field in _PARAM_FIELDS.items() if param in given}
    if device is not None:
        changes["device"] = resolve_device(device, settings)
    if backend is not None:
        changes["backend"] = backend
    if given & set(_ROLE_PARAMS):
        roles = {}
        per_role = {"planner": flags.planner_model, "coder": flags.coder_model, "reviewer": flags.reviewer_model}
        for role in ROLES:
            before = old.role(role)
            roles[role] = dataclasses.replace(
                before,
                model=per_role[role] or flags.model or before.model,
                temperature=flags.temperature if flags.temperature is not None else before.temperature,
                max_tokens=flags.max_output_tokens or before.max_tokens,
                reasoning_effort=flags.reasoning_effort or before.reasoning_effort,
            )
        changes["roles"] = roles
    config = dataclasses.replace(
        old,
        run_id=new_run_id(old.problem),
        branch_from=from_run,
        branch_candidate=index,
        approve_plans=False,
        **changes,
    ).with_credentials(settings)
    config.validate()
    return config


def register(app: typer.Typer) -> None:
    @app.command("optimize")
    def optimize_command(
        ctx: typer.Context,
        problem: Annotated[Optional[str], typer.Argument(help="A problem name or file (omit with --resume).")] = None,
        device: Annotated[
            Optional[DeviceChoice], typer.Option("--device", help="cuda or cpu (default: the GPU if any).")
        ] = None,
        backend: Annotated[Optional[Backend], typer.Option("--backend", help="cuda, triton or cpp.")] = None,
        target: Annotated[float, typer.Option("--target", help="Required speedup (CI lower bound) vs compile.")] = 1.0,
        rounds: Annotated[int, typer.Option("--rounds", min=1, help="Planner rounds at most.")] = 8,
        max_tokens: Annotated[int, typer.Option("--max-tokens", help="Token budget.")] = 2_000_000,
        max_cost: Annotated[float, typer.Option("--max-cost", help="LLM cost budget, USD.")] = 20.0,
        max_time: Annotated[float, typer.Option("--max-time", help="Wall-time budget, seconds.")] = 3600.0,
        max_gpu_time: Annotated[
            Optional[float],
            typer.Option(
                "--max-gpu-time",
                min=1,
                help="GPU-time budget, seconds: the evaluations' device phases (correctness, work share, timing) and "
                "Nsight Compute profiling (default: none).",
            ),
        ] = None,
        patience: Annotated[
            int, typer.Option("--no-improvement", help="Stop after N rounds without a better kernel.")
        ] = 4,
        model: Annotated[Optional[str], typer.Option("--model", help="Model name for every role.")] = None,
        planner_model: Annotated[Optional[str], typer.Option("--planner-model", help="The planner's model.")] = None,
        coder_model: Annotated[Optional[str], typer.Option("--coder-model", help="The coder's model.")] = None,
        reviewer_model: Annotated[Optional[str], typer.Option("--reviewer-model", help="The reviewer's model.")] = None,
        temperature: Annotated[
            Optional[float],
            typer.Option(
                "--temperature",
                min=0,
                help="Sampling temperature (default: llm_temperature, else 0.2); with --width K, see "
                "--temperature-schedule.",
            ),
        ] = None,
        max_output: Annotated[
            Optional[int], typer.Option("--max-output-tokens", min=1, help="Most tokens one reply may use.")
        ] = None,
        reasoning_effort: Annotated[
            Optional[str],
            typer.Option(
                "--reasoning-effort",
                help="reasoning_effort sent to every role's model (low, medium, high, ...; default: the "
                "llm_reasoning_effort settings). A model that refuses it has it dropped with a note.",
            ),
        ] = None,
        llm_timeout: Annotated[
            Optional[float],
            typer.Option(
                "--llm-timeout",
                min=1,
                help="Seconds one LLM request may wait between streamed bytes (default: llm_timeout_s, else 120; "
                "600 for a role with a reasoning effort).",
            ),
        ] = None,
        llm_retries: Annotated[
            Optional[int], typer.Option("--llm-retries", min=0, help="Retries of a 429 / 5xx LLM request.")
        ] = None,
        structured: Annotated[
            Optional[StructuredOutput],
            typer.Option(
                "--structured-output",
                help="function_calling, json_schema, json_mode or plain_json (default: llm_structured_output).",
            ),
        ] = None,
        size: Annotated[Size, typer.Option("--size", help="default, or small (quick CPU runs).")] = Size.DEFAULT,
        width: Annotated[
            int,
            typer.Option(
                "--width",
                min=1,
                help="Samples the coder draws per idea, all requested at once, judged as one batch (their "
                "temperatures: --temperature-schedule).",
            ),
        ] = 1,
        temperature_schedule: ScheduleOpt = None,
        no_timing: Annotated[
            bool,
            typer.Option(
                "--no-timing",
                help="Check correctness only: no speedups, so the target is never reached (exit 1 at best). For "
                "a quick check of a session or a region's kernels.",
            ),
        ] = False,
        ideas: Annotated[
            int,
            typer.Option(
                "--ideas",
                min=1,
                help="Distinct ideas the planner proposes per round, each from its own parent: the best kernel, "
                "the best of each technique niche, then correct-but-slower ones with another idea.",
            ),
        ] = 1,
        seed: Annotated[int, typer.Option("--seed", help="Seeds the choice among slower parents (reproducible).")] = 0,
        coder_retries: Annotated[
            Optional[int],
            typer.Option(
                "--coder-retries",
                min=0,
                help="Repair turns per idea: a draft that failed comes back to the coder with the feedback "
                "mapped onto it (default 2).",
            ),
        ] = None,
        policy: Annotated[
            Optional[Policy],
            typer.Option(
                "--policy",
                help="strict (default, setting `policy`): the candidate's own kernels do the work; engineering: "
                "library calls may do part of it beside them (their share is reported).",
            ),
        ] = None,
        resume: Annotated[Optional[str], typer.Option("--resume", help="Resume the run with this id.")] = None,
        from_run: Annotated[
            Optional[str],
            typer.Option("--from", help="Start a new run from an earlier run (its settings; flags given here win)."),
        ] = None,
        from_candidate: Annotated[
            Optional[int],
            typer.Option(
                "--from-candidate", min=0, help="With --from: the candidate to start from (default: its best)."
            ),
        ] = None,
        hint: Annotated[Optional[list[str]], typer.Option("--hint", help="A hint for the next planner prompt.")] = None,
        events_json: Annotated[
            Optional[Path], typer.Option("--events-json", help="Write every event as JSON lines.")
        ] = None,
        price_in: Annotated[
            Optional[float],
            typer.Option("--price-in", help="USD per 1k prompt tokens (cost meter; default: settings)."),
        ] = None,
        price_out: Annotated[
            Optional[float],
            typer.Option("--price-out", help="USD per 1k completion tokens (reasoning included; default: settings)."),
        ] = None,
        price_cached: Annotated[
            Optional[float],
            typer.Option(
                "--price-cached", help="USD per 1k prompt tokens read from the provider's cache (default: --price-in)."
            ),
        ] = None,
        scripted: Annotated[
            Optional[str],
            typer.Option(
                "--scripted",
                help="Use a scripted LLM session shipped with kernelwright (relu-cpu, relu-cuda, relu-triton, "
                "gelu_layernorm_bf16-cuda).",
            ),
        ] = None,
        no_memory: Annotated[
            bool,
            typer.Option(
                "--no-memory",
                help="Neither recall from nor write to the memory database (by default every candidate is "
                "remembered, the planner sees what worked before, and a problem solved before starts from its best "
                "kernel, re-evaluated here).",
            ),
        ] = False,
    ) -> int:
        """Optimize a problem: plan, write, evaluate and review kernels until one beats torch.compile
        by --target or a budget runs out. Writes runs/<id>/ (best.py, candidates/, trajectory.json)."""
        from kernelwright.agent import runs
        from kernelwright.agent.configuration import AgentConfig, RunFlags
        from kernelwright.cli.agent_run import execute
        from kernelwright.tools.evaluate import resolve_device

        state: AppState = ctx.obj
        settings = state.settings()
        if from_candidate is not None and not from_run:
            raise UsageError("--from-candidate needs --from RUN_ID")
        if resume and from_run:
            raise UsageError("give --resume RUN_ID (carry on) or --from RUN_ID (a new run), not both")
        flags = RunFlags(
            target=target,
            max_rounds=rounds,
            max_tokens=max_tokens,
            max_cost_usd=max_cost,
            max_wall_s=max_time,
            max_gpu_s=max_gpu_time,
            no_improvement_rounds=patience,
            model=model,
            planner_model=planner_model,
            coder_model=coder_model,
            reviewer_model=reviewer_model,
            temperature=temperature,
            max_output_tokens=max_output,
            reasoning_effort=reasoning_effort,
            request_timeout_s=llm_timeout,
            max_retries=llm_retries,
            structured_method=structured,
            size=size,
            scripted=scripted,
            width=width,
            temperature_schedule=temperature_schedule,
            timing=False if no_timing else None,
            ideas=ideas,
            seed=seed,
            coder_retries=coder_retries,
            policy=policy,
            price_in_per_1k=price_in,
            price_out_per_1k=price_out,
            price_cached_in_per_1k=price_cached,
        )
        if from_run:
            given = {name for name in ctx.params if _given(ctx, name)}
            config = _branch_config(settings, from_run, from_candidate, flags, given, device, backend)
        elif resume:
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
            flags = replace(
                flags, device=chosen, backend=backend or (Backend.CUDA if chosen == Device.CUDA else Backend.CPP)
            )
            config = AgentConfig.from_settings(settings, problem, flags)
        if no_memory:
            config = replace(config, memory=False)
        outcome, _ = execute(config, settings, resume=bool(resume), events_json=events_json, hints=tuple(hint or ()))
        return ExitCode.OK if outcome.accepted else ExitCode.NEEDS_ATTENTION
