"""`kernelwright profile ...`: profile a problem/candidate or any command with Nsight Compute, or
digest (and compare) existing `.ncu-rep` reports, which needs no GPU."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from kernelwright.cli.context import AppState
from kernelwright.errors import ExitCode, KernelwrightError, UsageError
from kernelwright.vocabulary import Size

if TYPE_CHECKING:
    from kernelwright.profiler import NcuDigest


def _emit(as_json: bool, digests: dict[str, NcuDigest], extra: dict[str, Any]) -> None:
    from kernelwright.profiler import diff

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
        size: Annotated[Size, typer.Option("--size", help="Problem size: default or small.")] = Size.DEFAULT,
        out_dir: Annotated[Optional[Path], typer.Option("--out", help="Evidence folder for .ncu-rep files.")] = None,
        timeout: Annotated[float, typer.Option("--timeout", min=1, help="Seconds per ncu run.")] = 300.0,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    ) -> int:
        """Profile with Nsight Compute and print a short digest (duration, SOL, occupancy, stalls, findings).

        With REFERENCE CANDIDATE, both are profiled, the digests are diffed, and the candidate's own kernels (its __global__ / @triton.jit names) are matched against ncu's kernel records."""
        from kernelwright.profiler import profile_problem, run_ncu
        from kernelwright.tools.profile import (
            candidate_ownership,
            digest_file,
            ensure_ok,
            ncu_options,
            profile_candidate,
        )

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
        state: AppState = ctx.obj if isinstance(ctx.obj, AppState) else AppState()
        settings = state.settings()
        folder = out_dir or settings.runs_dir / "profiles" / f"{dt.datetime.now():%Y%m%d-%H%M%S}"
        count = launch_count if launch_count is not None else (1 if kernel else None)
        opts = ncu_options(sections, source, kernel, launch_skip, count)
        if _is_problem(targets):
            candidate = Path(targets[1]) if len(targets) == 2 else None
            if candidate is not None and not candidate.is_file():
                raise UsageError(f"no such candidate file: {candidate}")
            runs = {"reference": None, "candidate": candidate} if candidate else {"reference": None}
            digests: dict[str, NcuDigest] = {}
            extra: dict[str, Any] = {}
            for name, cand in runs.items():
                report_path = folder / f"{name}.ncu-rep"
                if cand is None:  # the problem's own reference: the user's code, run as it is
                    result = profile_problem(
                        targets[0], None, report_path=report_path, options=opts, warmup=warmup, size=size,
                        timeout_s=timeout, build_cache=settings.build_cache_dir,
                    )  # fmt: skip
                else:  # candidate code: inside the sandbox's layers (see tools/profile.py)
                    result = profile_candidate(
                        targets[0], cand, report_path=report_path, sandbox=settings.sandbox, options=opts,
                        warmup=warmup, size=size, timeout_s=timeout, build_cache=settings.build_cache_dir,
                    )  # fmt: skip
                    extra["candidate_sandbox"] = result.sandbox
                ensure_ok(result)
                assert result.report_path is not None
                digests[name] = digest_file(result.report_path, kernel)
                if cand is not None:  # ncu's second opinion on "the candidate's kernels did the work"
                    extra["candidate_ownership"] = candidate_ownership(cand, result.report_path)
                extra[f"{name}_report"] = str(result.report_path)
                extra[f"{name}_profile_s"] = round(result.duration_s, 2)
            _emit(as_json, digests, extra)
            return ExitCode.OK
        if launch_count is None and not kernel:
            opts = ncu_options(sections, source, kernel, launch_skip, 10)
        result = run_ncu(targets, folder / "command.ncu-rep", opts, timeout_s=timeout)
        ensure_ok(result)
        assert result.report_path is not None
        digest = digest_file(result.report_path, kernel)
        _emit(as_json, {"command": digest}, {"command_report": str(result.report_path)})
        return ExitCode.OK
