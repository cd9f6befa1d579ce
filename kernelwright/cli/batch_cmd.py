"""`kernelwright batch judge|optimize|report`: whole problem sets, headless and resumable.

`judge` evaluates candidates someone already has (KernelBench's generation layouts or one file
per problem), `optimize` runs the agent on every problem, `report` (re)writes the fast_p report of
a batch folder. Workers: one per GPU, pinned; `--workers N` on the CPU; `--ray ADDRESS` beyond one
host. The engine is `batch/` (judge) and `agent/batch.py` (optimise); this module parses
flags and shows progress (`cli/batch_display.py`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console

from kernelwright.cli.context import AppState
from kernelwright.cli.search_options import ScheduleOpt
from kernelwright.errors import ExitCode, UsageError
from kernelwright.vocabulary import Backend, Device, DeviceChoice, Policy, SandboxMode, Size

if TYPE_CHECKING:
    from kernelwright.batch.engine import BatchOutcome
    from kernelwright.batch.events import BatchEvent
    from kernelwright.batch.spec import Slot
    from kernelwright.config import Settings

batch_app = typer.Typer(
    help="Whole problem sets: judge existing candidates, optimise every problem, report fast_p.",
    no_args_is_help=True,
)
out = Console(width=None if sys.stdout.isatty() else 160)

Problems = Annotated[
    list[str],
    typer.Argument(
        help="Problem sets: level1 (built-in), builtin, a folder, a KernelBench checkout, a list file (.txt), "
        "problem files or names."
    ),
]
OutDir = Annotated[Path, typer.Option("--out", help="The batch folder: results.jsonl, evidence, report (resumable).")]
DeviceOpt = Annotated[
    Optional[DeviceChoice], typer.Option("--device", help="cuda or cpu (default: cuda when a GPU is visible).")
]
SizeOpt = Annotated[Size, typer.Option("--size", help="default, or small (quick CPU runs).")]
Workers = Annotated[
    Optional[int],
    typer.Option("--workers", min=1, help="CPU: how many workers (default 1). CUDA: at most this many GPUs."),
]
Gpus = Annotated[
    Optional[str], typer.Option("--gpus", help="CUDA: the GPUs to use, e.g. 0,1 (default: every visible one).")
]
Threads = Annotated[
    Optional[int],
    typer.Option("--threads", min=1, help="CPU: threads per worker for the candidate and eager (default: its cores)."),
]
Ray = Annotated[
    Optional[str],
    typer.Option(
        "--ray",
        metavar="ADDRESS",
        help="Run problems as Ray tasks: `auto` (the cluster this machine belongs to), `ray://host:10001`, or "
        "`local` (a Ray instance started here). Needs `pip install 'kernelwright[ray]'`.",
    ),
]
EventsJson = Annotated[Optional[Path], typer.Option("--events-json", help="Write every progress event as JSON lines.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display; only the summary.")]
Level = Annotated[Optional[int], typer.Option("--level", "-l", help="Only problems of this level.")]
Ids = Annotated[Optional[str], typer.Option("--ids", help="Only these problem ids, e.g. 1-20,25.")]
Compare = Annotated[
    Optional[Path],
    typer.Option(
        "--compare-baselines",
        help="Published baseline times (KernelBench's baseline_time_*.json) shown beside the ones measured here.",
    ),
]
PolicyOpt = Annotated[
    Optional[Policy], typer.Option("--policy", help="strict (default) or engineering (see `kernelwright eval --help`).")
]
TimingCap = Annotated[
    Optional[float], typer.Option("--timing-cap", min=0.1, help="Seconds the timing phase may take per candidate.")
]
NoTiming = Annotated[bool, typer.Option("--no-timing", help="Check correctness only (no speedups, so no fast_p).")]


def _choose_device(device: DeviceChoice | None, ray: str | None, settings: Settings) -> Device:
    from kernelwright.tools.evaluate import resolve_device

    if ray is None:
        return resolve_device(device, settings)
    chosen = device or settings.device
    if chosen == DeviceChoice.AUTO:
        raise UsageError("with --ray, say where candidates run: --device cpu or --device cuda")
    return Device(chosen)


def _slots(device: Device, workers: int | None, gpus: str | None, threads: int | None, ray: str | None) -> list[Slot]:
    from kernelwright.batch.spec import Slot, plan_slots, visible_gpus

    if ray is not None:
        if gpus is not None:
            raise UsageError("--gpus is for local workers; with --ray, Ray places each task on a GPU")
        # how many Ray actors: --workers (CPU: default 1); none on cuda means one per GPU Ray offers
        count = workers or (0 if device == "cuda" else 1)
        return [Slot(index=i, label=f"ray{i}", threads=threads) for i in range(count)]
    chosen: list[str] | None = None
    if device == "cuda":
        import torch

        visible = visible_gpus(torch.cuda.device_count())
        chosen = visible
        if gpus is not None:
            chosen = [g.strip() for g in gpus.split(",") if g.strip()]
            unknown = [g for g in chosen if g not in visible]
            if unknown:
                raise UsageError(f"--gpus {gpus}: no GPU {', '.join(unknown)} here (visible: {', '.join(visible)})")
    return plan_slots(device, workers=workers, gpus=chosen, threads=threads)


def _run(run: object, quiet: bool, events_json: Path | None) -> BatchOutcome:
    """Call `run(listener)` with the progress display and the JSON-lines sink subscribed."""
    from kernelwright.batch.events import JsonLinesSink
    from kernelwright.cli.batch_display import BatchDisplay

    display = BatchDisplay(Console(stderr=True, width=None if sys.stderr.isatty() else 160), quiet=quiet)
    sink = JsonLinesSink(events_json) if events_json else None

    def listener(event: BatchEvent) -> None:
        display(event)
        if sink is not None:
            sink(event)

    try:
        return run(listener)  # type: ignore[operator,no-any-return]
    finally:
        display.close()
        if sink is not None:
            sink.close()


def _finish(outcome: BatchOutcome) -> int:
    from kernelwright.cli.batch_display import print_summary

    if outcome.report is not None:
        print_summary(outcome.report, out)
    return outcome.exit_code


@batch_app.command("judge")
def judge_command(
    ctx: typer.Context,
    problems: Problems,
    candidates: Annotated[
        Path, typer.Option("--candidates", help="Candidate files: level_N/problem_ID/sample_K.py, or one per problem.")
    ],
    out_dir: OutDir,
    device: DeviceOpt = None,
    size: SizeOpt = Size.DEFAULT,
    trials: Annotated[int, typer.Option("--trials", min=1, help="Correctness trials on the default shapes.")] = 5,
    baselines: Annotated[
        str, typer.Option("--baselines", help="Comma-separated: eager, compile, compile-max-autotune.")
    ] = "eager,compile",
    no_timing: NoTiming = False,
    policy: PolicyOpt = None,
    sandbox: Annotated[Optional[SandboxMode], typer.Option("--sandbox", help="strict or best-effort.")] = None,
    workers: Workers = None,
    gpus: Gpus = None,
    threads: Threads = None,
    parallel_builds: Annotated[
        Optional[int],
        typer.Option(
            "--parallel-builds",
            min=1,
            help="Candidates of one problem built in parallel, then judged one by one (default: 4 on a GPU, 1 "
            "on the CPU); a kill loses at most one such group per worker.",
        ),
    ] = None,
    timing_cap: TimingCap = None,
    ray: Ray = None,
    level: Level = None,
    ids: Ids = None,
    events_json: EventsJson = None,
    quiet: Quiet = False,
    compare_baselines: Compare = None,
) -> int:
    """Judge existing candidates for a problem set, honestly: every candidate built, fuzzed, checked
    for reward hacks and timed against eager and torch.compile here. Resumable: rerun the same
    command and what is done is skipped. Exit code: the highest over all candidates."""
    from kernelwright.batch.judge_mode import run_judge
    from kernelwright.batch.problem_set import parse_ids
    from kernelwright.batch.spec import JudgeSpec
    from kernelwright.harness.baselines import parse_baselines

    state: AppState = ctx.obj
    settings = state.settings()
    chosen = _choose_device(device, ray, settings)
    spec = JudgeSpec.from_settings(
        settings,
        chosen,
        size=size,
        trials=trials,
        baselines=list(parse_baselines(baselines)),
        timing=not no_timing,
        policy=policy,
        sandbox=sandbox,
        time_cap_s=timing_cap,
        parallel_builds=parallel_builds,
    )
    slots = _slots(chosen, workers, gpus, threads, ray)
    outcome = _run(
        lambda listener: run_judge(
            problems,
            candidates,
            out_dir,
            spec,
            slots,
            listener,
            ray_address=ray,
            level=level,
            ids=parse_ids(ids) if ids else None,
            compare_baselines=compare_baselines,
        ),
        quiet,
        events_json,
    )
    return _finish(outcome)


@batch_app.command("optimize")
def optimize_command(
    ctx: typer.Context,
    problems: Problems,
    out_dir: OutDir,
    device: DeviceOpt = None,
    backend: Annotated[Optional[Backend], typer.Option("--backend", help="cuda, triton or cpp.")] = None,
    target: Annotated[float, typer.Option("--target", help="Required speedup (CI lower bound) vs compile.")] = 1.0,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Planner rounds at most, per problem.")] = 8,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Token budget per problem.")] = 2_000_000,
    max_cost: Annotated[float, typer.Option("--max-cost", help="LLM cost budget per problem, USD.")] = 20.0,
    max_time: Annotated[float, typer.Option("--max-time", help="Wall-time budget per problem, seconds.")] = 3600.0,
    max_gpu_time: Annotated[
        Optional[float],
        typer.Option("--max-gpu-time", min=1, help="GPU-time budget per problem, seconds (evaluation and profiling)."),
    ] = None,
    patience: Annotated[
        int, typer.Option("--no-improvement", help="Stop a problem after N rounds without a better kernel.")
    ] = 4,
    model: Annotated[Optional[str], typer.Option("--model", help="Model name for every role.")] = None,
    temperature: Annotated[Optional[float], typer.Option("--temperature", min=0, help="Sampling temperature.")] = None,
    size: SizeOpt = Size.DEFAULT,
    width: Annotated[
        int,
        typer.Option(
            "--width",
            min=1,
            help="Samples the coder draws per idea, all at once (their temperatures: --temperature-schedule).",
        ),
    ] = 1,
    temperature_schedule: ScheduleOpt = None,
    policy: PolicyOpt = None,
    price_in: Annotated[Optional[float], typer.Option("--price-in", help="USD per 1k prompt tokens.")] = None,
    price_out: Annotated[Optional[float], typer.Option("--price-out", help="USD per 1k completion tokens.")] = None,
    scripted: Annotated[
        bool,
        typer.Option(
            "--scripted",
            help="Use the package's scripted sessions instead of an LLM: problems without a script for this device "
            "end as `no_script`.",
        ),
    ] = False,
    no_timing: NoTiming = False,
    timing_cap: TimingCap = None,
    workers: Workers = None,
    gpus: Gpus = None,
    threads: Threads = None,
    ray: Ray = None,
    level: Level = None,
    ids: Ids = None,
    events_json: EventsJson = None,
    quiet: Quiet = False,
    compare_baselines: Compare = None,
) -> int:
    """Optimise every problem of a set with the agent (one run folder per problem under OUT/runs).
    Resumable: finished problems are skipped, an interrupted problem's run is resumed. Exit code:
    0 when every problem reached its target, else the highest over the problems."""
    from kernelwright.agent.batch import run_optimize
    from kernelwright.agent.configuration import RunFlags
    from kernelwright.batch.problem_set import parse_ids

    state: AppState = ctx.obj
    settings = state.settings()
    chosen = _choose_device(device, ray, settings)
    flags = RunFlags(
        device=chosen,
        backend=backend or (Backend.CUDA if chosen == Device.CUDA else Backend.CPP),
        target=target,
        max_rounds=rounds,
        max_tokens=max_tokens,
        max_cost_usd=max_cost,
        max_wall_s=max_time,
        max_gpu_s=max_gpu_time,
        no_improvement_rounds=patience,
        model=model,
        temperature=temperature,
        size=size,
        width=width,
        temperature_schedule=temperature_schedule,
        policy=policy,
        price_in_per_1k=price_in,
        price_out_per_1k=price_out,
        timing=not no_timing,
        timing_cap_s=timing_cap,
    )
    slots = _slots(chosen, workers, gpus, threads, ray)
    outcome = _run(
        lambda listener: run_optimize(
            problems,
            out_dir,
            flags,
            slots,
            listener,
            scripted=scripted,
            config_file=state.config_file,
            home=state.home,
            ray_address=ray,
            level=level,
            ids=parse_ids(ids) if ids else None,
            compare_baselines=compare_baselines,
        ),
        quiet,
        events_json,
    )
    return _finish(outcome)


@batch_app.command("report")
def report_command(
    folder: Annotated[Path, typer.Argument(help="A batch folder (the --out of `batch judge` or `batch optimize`).")],
    compare_baselines: Compare = None,
) -> int:
    """(Re)write a batch's report: report.md, report.json and plots/*.png (fast_p, speedups)."""
    from kernelwright.batch.report import write_report
    from kernelwright.cli.batch_display import print_summary

    print_summary(write_report(folder, compare_baselines), out)
    return ExitCode.OK


def register(app: typer.Typer) -> None:
    app.add_typer(batch_app, name="batch")
