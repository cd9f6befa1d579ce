"""`kernelwright profile ...`: profile a problem/candidate or any command with Nsight Compute, or
digest (and compare) existing `.ncu-rep` reports, which needs no GPU."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from kernelwright.cli.context import AppState
from kernelwright.errors import CandidateCrashed, EnvironmentProblem, ExitCode, KernelwrightError, UsageError
from kernelwright.harness.checks.static.analysis import analyze_candidate
from kernelwright.profiler import (
    DEFAULT_SECTIONS,
    NcuDigest,
    NcuOptions,
    ProfileResult,
    ProfileStatus,
    build_digest,
    diff,
    kernel_ownership,
    load_report,
    profile_problem,
    run_ncu,
)

log = logging.getLogger(__name__)
GPU_NAME_METRIC = "device__attribute_display_name"


def _peaks(gpu_name: str | None) -> dict[str, Any]:
    """Peaks from kernelwright.hardware_specs when it is there; the roofline is skipped otherwise."""
    if not gpu_name:
        return {}
    try:
        from kernelwright import hardware_specs
    except ImportError:
        return {}
    fn = getattr(hardware_specs, "peaks", None)
    if not callable(fn):
        return {}
    try:
        found = fn(gpu_name)
    except KernelwrightError as exc:
        log.debug("no peaks for %s: %s", gpu_name, exc)
        return {}
    if found is None:
        return {}

    def get(*names: str) -> Any:
        for name in names:
            value = found.get(name) if isinstance(found, dict) else getattr(found, name, None)
            if value is not None:
                return value
        return None

    out: dict[str, Any] = {}
    bandwidth = get("peak_dram_bytes_per_s", "dram_bytes_per_s")
    if isinstance(bandwidth, int | float):
        out["peak_dram_bytes_per_s"] = float(bandwidth)
    # The digest counts CUDA-core FLOPs from SASS, so the CUDA-core peaks are the roof.
    flops = get("peak_flops", "cuda_core_flops")
    if isinstance(flops, dict):
        out["peak_flops"] = {str(k): float(v) for k, v in flops.items()}
    return out


def digest_file(path: Path, kernel_regex: str | None) -> NcuDigest:
    report = load_report(path)
    if not report.kernels:
        raise UsageError(f"{path} holds no profiled kernels")
    selected = report.select(kernel_regex)
    if not selected:
        names = sorted({k.name for k in report.kernels})[:5]
        raise UsageError(f"no kernel in {path} matches {kernel_regex!r}", hint=f"kernels: {', '.join(names)}")
    gpu = selected[0].text(GPU_NAME_METRIC)
    digest = build_digest(selected, **_peaks(gpu))
    assert digest is not None
    return digest


def _raise_for(result: ProfileResult) -> None:
    if result.ok:
        return
    text = result.message
    if result.status in (ProfileStatus.NCU_MISSING, ProfileStatus.NO_PERMISSION, ProfileStatus.NO_GPU):
        raise EnvironmentProblem(text, hint=result.hint)
    if result.status is ProfileStatus.NO_KERNEL_MATCHED:
        raise UsageError(text, hint=result.hint)
    tail = (result.stderr_tail or result.stdout_tail).strip().splitlines()[-1:]
    raise CandidateCrashed(f"profiling {result.status.value}: {text}", hint=tail[0][:200] if tail else result.hint)


def _options(sections: list[str] | None, source: bool, kernel: str | None, skip: int, count: int | None) -> NcuOptions:
    chosen: list[str] = []
    for item in sections or []:
        chosen += [s.strip() for s in item.split(",") if s.strip()]
    return NcuOptions(
        sections=tuple(chosen) or DEFAULT_SECTIONS,
        source_counters=source,
        kernel_regex=kernel,
        launch_skip=skip,
        launch_count=count,
    )


def _emit(as_json: bool, digests: dict[str, NcuDigest], extra: dict[str, Any]) -> None:
    if as_json:
        doc = {name: d.model_dump(mode="json") for name, d in digests.items()}
        if len(digests) == 2:
            base, cand = digests.values()
            doc["diff"] = diff(base, cand).model_dump(mode="json")
        typer.echo(json.dumps(doc | extra, indent=2))
        return
    for name, d in digests.items():
        if len(digests) > 1:
            typer.echo(f"== {name} ==")
        typer.echo(d.to_text())
    if len(digests) == 2:
        base, cand = digests.values()
        typer.echo("== diff (baseline -> candidate) ==")
        typer.echo(diff(base, cand).to_text())
    if "candidate_ownership" in extra:
        typer.echo(f"== candidate kernels (ncu) ==\n{extra['candidate_ownership']['text']}")
    for key, value in extra.items():
        if key.endswith("report"):
            typer.echo(f"{key}: {value}", err=True)


def _ownership(candidate: Path, report_path: Path) -> dict[str, Any]:
    analysis = analyze_candidate(candidate.read_text())
    owned = kernel_ownership(load_report(report_path), analysis.own_kernels)
    return owned.model_dump(mode="json") | {"own_pct": owned.own_pct, "text": owned.to_text()}


def _is_problem(args: list[str]) -> bool:
    if len(args) > 2:
        return False
    from kernelwright.problems import resolve_problem

    try:
        resolve_problem(args[0])
    except KernelwrightError:
        return False
    return len(args) == 1 or args[1].endswith(".py")


def register(app: typer.Typer) -> None:
    @app.command("profile")
    def profile(
        ctx: typer.Context,
        targets: Annotated[
            Optional[list[str]],
            typer.Argument(help="REFERENCE [CANDIDATE] (a problem and a candidate file), or `-- COMMAND...`."),
        ] = None,
        report: Annotated[
            Optional[Path], typer.Option("--report", help="Digest this .ncu-rep instead of profiling.")
        ] = None,
        compare: Annotated[
            Optional[Path], typer.Option("--compare", help="With --report: the candidate report to diff against.")
        ] = None,
        kernel: Annotated[Optional[str], typer.Option("--kernel", "-k", help="Only kernels matching REGEX.")] = None,
        sections: Annotated[
            Optional[list[str]], typer.Option("--sections", help="ncu sections (repeat or comma-separate).")
        ] = None,
        source: Annotated[bool, typer.Option("--source", help="Also collect SourceCounters (-lineinfo).")] = False,
        launch_skip: Annotated[int, typer.Option("--launch-skip", min=0, help="Matching launches to skip.")] = 0,
        launch_count: Annotated[
            Optional[int],
            typer.Option(
                "--launch-count",
                min=1,
                help="Launches to profile (default: all for a problem, 10 for a command; 1 with --kernel).",
            ),
        ] = None,
        warmup: Annotated[int, typer.Option("--warmup", min=0, help="Unprofiled forward calls first.")] = 3,
        size: Annotated[str, typer.Option("--size", help="Problem size: default or small.")] = "default",
        out_dir: Annotated[Optional[Path], typer.Option("--out", help="Evidence folder for .ncu-rep files.")] = None,
        timeout: Annotated[float, typer.Option("--timeout", min=1, help="Seconds per ncu run.")] = 300.0,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    ) -> int:
        """Profile with Nsight Compute and print a short digest (duration, SOL, occupancy, stalls, findings).

        With REFERENCE CANDIDATE, both are profiled, the digests are diffed, and the candidate's own kernels (its __global__ / @triton.jit names) are matched against ncu's kernel records."""
        if report is not None:
            if targets:
                raise UsageError("give either --report FILE or something to profile, not both")
            found = {"baseline" if compare else "report": digest_file(report, kernel)}
            if compare is not None:
                found["candidate"] = digest_file(compare, kernel)
            _emit(as_json, found, {})
            return ExitCode.OK
        if compare is not None:
            raise UsageError("--compare needs --report BASELINE.ncu-rep")
        if not targets:
            raise UsageError(
                "nothing to profile", hint="kernelwright profile PROBLEM [CANDIDATE] | -- COMMAND | --report FILE"
            )
        if size not in ("default", "small"):
            raise UsageError(f"--size must be 'default' or 'small', not {size!r}")
        state: AppState = ctx.obj if isinstance(ctx.obj, AppState) else AppState()
        settings = state.settings()
        folder = out_dir or settings.runs_dir / "profiles" / f"{dt.datetime.now():%Y%m%d-%H%M%S}"
        count = launch_count if launch_count is not None else (1 if kernel else None)
        opts = _options(sections, source, kernel, launch_skip, count)
        if _is_problem(targets):
            candidate = Path(targets[1]) if len(targets) == 2 else None
            if candidate is not None and not candidate.is_file():
                raise UsageError(f"no such candidate file: {candidate}")
            runs = {"reference": None, "candidate": candidate} if candidate else {"reference": None}
            digests: dict[str, NcuDigest] = {}
            extra: dict[str, Any] = {}
            for name, cand in runs.items():
                result = profile_problem(
                    targets[0], cand, report_path=folder / f"{name}.ncu-rep", options=opts,
                    warmup=warmup, size=size, timeout_s=timeout, build_cache=settings.build_cache_dir,
                )  # fmt: skip
                _raise_for(result)
                assert result.report_path is not None
                digests[name] = digest_file(result.report_path, kernel)
                if cand is not None:  # ncu's second opinion on "the candidate's kernels did the work"
                    extra["candidate_ownership"] = _ownership(cand, result.report_path)
                extra[f"{name}_report"] = str(result.report_path)
                extra[f"{name}_profile_s"] = round(result.duration_s, 2)
            _emit(as_json, digests, extra)
            return ExitCode.OK
        if launch_count is None and not kernel:
            opts = _options(sections, source, kernel, launch_skip, 10)
        result = run_ncu(targets, folder / "command.ncu-rep", opts, timeout_s=timeout)
        _raise_for(result)
        assert result.report_path is not None
        digest = digest_file(result.report_path, kernel)
        _emit(as_json, {"command": digest}, {"command_report": str(result.report_path)})
        return ExitCode.OK
