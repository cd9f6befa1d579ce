"""`kernelwright model profile|extract|verify FILE.py:FACTORY`: your own model (issue #32).

`profile` ranks the model's aten ops by self device time, with the roofline's room, and its
module regions (submodules torch.compile fuses into one chain) by inclusive time, and times the
whole model eager against torch.compile; `extract` writes one ranked op or one region as a
problem file that every other command takes; `verify` judges the whole model with regions
replaced by their candidates through the harness (the same path as `kernelwright eval`).
torch loads inside the commands: `kernelwright --help` stays quick.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from kernelwright.cli.context import AppState
from kernelwright.cli.tables import Column, fitted_table
from kernelwright.errors import ExitCode, UsageError, worst
from kernelwright.harness.baselines import DEFAULT_BASELINES, parse_baselines
from kernelwright.vocabulary import DeviceChoice, Policy

if TYPE_CHECKING:
    from kernelwright.harness.options import EvalOptions
    from kernelwright.harness.result import EvalResult
    from kernelwright.ownmodel import LoadedModel, ModelProfile, OpRow, Timing
    from kernelwright.ownmodel.regions import RegionRow

model_app = typer.Typer(
    help="Your own model (FILE.py:FACTORY, the factory returning (module, example_inputs)): "
    "find its hot operators and regions, extract them as problems, verify winners in place.",
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


_REGION_COLUMNS = (
    Column("#", justify="right"),
    Column("region"),
    Column("module", identifier=False, drop=2),
    Column("ops", identifier=False, drop=1),
    Column("inputs", identifier=False, drop=3),
    Column("time", justify="right"),
    Column("share", justify="right"),
    Column("extract", identifier=False, drop=4),
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


def _region_row(region: RegionRow) -> list[str]:
    return [
        str(region.rank),
        region.path or "(the model)",
        region.module,
        " → ".join(region.ops),
        ", ".join(f"{i.dtype}{i.shape}" for i in region.inputs),
        _duration(region.time_s),
        f"{region.share:.1%}",
        "yes" if not region.standalone_note else f"no: {region.standalone_note}",
    ]


def _timing(t: Timing) -> str:
    return (
        f"{t.label}: median {_duration(t.median_s)} (quartiles {_duration(t.q1_s)} – {_duration(t.q3_s)}, "
        f"min {_duration(t.min_s)}, max {_duration(t.max_s)}, {t.repeats} calls)"
    )


def _print_regions(regions: list[RegionRow], kind: str) -> None:
    title = (
        f"module regions (fusible chains: pointwise/norm ops around at most one matmul) by inclusive {kind}; "
        "extract one with --region PATH or --region RANK"
    )
    rows = [_region_row(r) for r in regions]
    out.print(fitted_table(_REGION_COLUMNS, rows, out.width, title=title, title_justify="left"))


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
    """Rank the model's aten ops by self device time (share, calls, roofline room) and its module
    regions (the largest submodules whose ops torch.compile fuses into one chain: pointwise and
    norm ops around at most one matmul) by inclusive time; time the whole model eager and under
    torch.compile."""
    from kernelwright.ownmodel import profile_model
    from kernelwright.ownmodel.regions import ModelReport, rank_regions

    loaded = _load(ctx, spec, device)
    profiled = profile_model(loaded, repeats=repeats, compile=not no_compile)
    report = ModelReport(**profiled.model_dump(), regions=rank_regions(loaded))
    _print(report, top)
    if report.regions:
        _print_regions(report.regions, report.time_kind)
    else:
        out.print("no module region: no submodule's ops form one fusible chain", highlight=False)
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
        Optional[str],
        typer.Option(
            "--op", help="The op: its rank in `model profile` (1 is the most time) or its name (gelu, aten::addmm)."
        ),
    ] = None,
    region: Annotated[
        Optional[str],
        typer.Option(
            "--region",
            help="A module region instead: a dotted submodule path (mlp.fc1) or its rank among `model profile`'s "
            "regions (2, or #2 where a Sequential's child is named 2). Written standalone (Model is the submodule, its parameter names kept) when it is a chain of "
            "standard torch.nn layers; anything else is refused, saying why.",
        ),
    ] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder the problem file is written to.")] = Path("extracted"),
    device: DeviceOpt = None,
) -> int:
    """Write one ranked op, or one module region, as a KernelBench-format problem file (recorded
    shapes and dtypes, other shapes seen as variants; a region's PROBLEM["region"] names where it
    came from, for `export` and `verify`)."""
    from kernelwright.ownmodel import extract_op
    from kernelwright.ownmodel.region_problem import extract_region

    if (op is None) == (region is None):
        raise UsageError("give one of --op and --region", hint="`kernelwright model profile` ranks both")
    loaded = _load(ctx, spec, device)
    path = extract_op(loaded, op, out_dir) if op is not None else extract_region(loaded, str(region), out_dir)
    out.print(str(path), highlight=False, soft_wrap=True)
    err.print(f"next: kernelwright problems show {escape(str(path))}", highlight=False)
    return ExitCode.OK


def _speedups(result: EvalResult) -> str:
    parts = [
        f"{s.ratio:.2f}x vs {name} [{s.ci_low:.2f}, {s.ci_high:.2f}]"
        for name, s in sorted(result.speedups.items(), key=lambda kv: kv[0] != "eager")
    ]
    return ", ".join(parts) or "not timed"


def _print_verdict(label: str, result: EvalResult) -> None:
    colour = {"correct": "green", "incorrect": "red", "rejected": "magenta"}.get(result.verdict.value, "yellow")
    reason = f" ({result.reason.value})" if result.reason else ""
    line = f"{label}: [{colour}]{result.verdict.value}[/]{escape(reason)}: {_speedups(result)}"
    out.print(line, highlight=False, soft_wrap=True)
    out.print(f"  {escape(result.message)}", highlight=False, soft_wrap=True)


@model_app.command("verify")
def verify(
    ctx: typer.Context,
    spec: Spec,
    region: Annotated[
        list[str],
        typer.Option(
            "--region",
            metavar="PATH=CANDIDATE.py",
            help="A region (dotted submodule path, or its rank in `model profile`) and the candidate file "
            "(class ModelNew, built from the region problem's init inputs, parameter names kept) that replaces "
            "its forward. Repeat for several regions.",
        ),
    ],
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder for the generated problem and candidate files.")
    ] = Path("verify"),
    device: DeviceOpt = None,
    baselines: Annotated[
        str, typer.Option("--baselines", help="Comma-separated: eager, compile, compile-max-autotune.")
    ] = ",".join(DEFAULT_BASELINES),
    trials: Annotated[int, typer.Option("--trials", min=1, help="Correctness trials (at least 5 run).")] = 5,
    no_timing: Annotated[bool, typer.Option("--no-timing", help="Check correctness only.")] = False,
    each: Annotated[
        bool,
        typer.Option("--each", help="Also judge each candidate against its own region problem: per-region speedups."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> int:
    """Judge the whole model with each region's forward replaced by its candidate, through the
    harness (as `kernelwright eval` does: fuzzing, hack checks, timing against eager and
    torch.compile of the whole model, with intervals). The rest of the model is PyTorch by
    definition, so it is judged under policy engineering."""
    import json

    from kernelwright.ownmodel.verify import RegionCandidate, write_verify
    from kernelwright.problems.loader import load_problem_file
    from kernelwright.tools.evaluate import check_candidate_files, eval_options, evaluate_files

    state: AppState = ctx.obj
    pairs = [RegionCandidate.parse(text) for text in region]
    loaded = _load(ctx, spec, device)
    check_candidate_files([p.candidate for p in pairs], loaded.device)
    files = write_verify(loaded, pairs, out_dir)

    def options(policy: Policy | None) -> EvalOptions:
        return eval_options(
            state.settings(),
            loaded.device,
            trials=trials,
            baselines=parse_baselines(baselines),
            timing=not no_timing,
            policy=policy,
            progress=lambda message: err.print(f"[dim]{escape(message)}[/]", highlight=False),
        )

    whole = evaluate_files(load_problem_file(files.problem), [files.candidate], options(Policy.ENGINEERING))[0]
    per_region: dict[str, EvalResult] = {}
    if each:
        for path, (problem, candidate) in files.regions.items():
            per_region[path] = evaluate_files(load_problem_file(problem), [candidate], options(None))[0]
    if as_json:
        doc = {
            "model": spec,
            "problem": str(files.problem),
            "candidate": str(files.candidate),
            "result": whole.model_dump(mode="json"),
            "regions": {path: r.model_dump(mode="json") for path, r in per_region.items()},
        }
        typer.echo(json.dumps(doc, indent=2))
    else:
        names = ", ".join(f"{path or '(the model)'} ← {c}" for path, (_, c) in files.regions.items())
        out.print(f"{escape(spec)} on {whole.device}, with {escape(names)}", highlight=False, soft_wrap=True)
        _print_verdict("end to end", whole)
        for path, result in per_region.items():
            _print_verdict(f"region {path or '(the model)'}", result)
        err.print(
            f"files: {escape(str(files.problem))}, {escape(str(files.candidate))}", highlight=False, soft_wrap=True
        )
    return worst([whole.exit_code, *(r.exit_code for r in per_region.values())])


def register(app: typer.Typer) -> None:
    app.add_typer(model_app, name="model")
