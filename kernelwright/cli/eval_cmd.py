"""`kernelwright eval REFERENCE CANDIDATE...`: build, fuzz, check for reward hacks, and time."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from kernelwright.cli.context import AppState
from kernelwright.errors import ExitCode, UsageError, worst
from kernelwright.harness.baselines import DEFAULT_BASELINES, parse_baselines

if TYPE_CHECKING:
    from kernelwright.harness.result import EvalResult

out = Console(width=None if sys.stdout.isatty() else 160)  # logs and pipes get the whole table
err = Console(stderr=True)


def _fmt_ms(result: EvalResult, name: str) -> str:
    stats = result.timings.get(name)
    if stats is None:
        return "-"
    return f"{stats.median_ms:.4g} ms ±{stats.rel_ci_halfwidth * 100:.1f}% (n={stats.n})"


def _print_table(results: list[EvalResult], expected: dict[str, tuple[str, str | None]]) -> None:
    table = Table(title=f"{results[0].problem} on {results[0].device} ({results[0].size} size)", show_lines=True)
    for column in ("candidate", "backend", "verdict", "reason", "max abs err", "candidate time"):
        table.add_column(column)
    baselines = sorted({name for r in results for name in r.speedups})
    for name in baselines:
        table.add_column(f"vs {name}")
    engineering = any(r.policy == "engineering" for r in results)
    if engineering:
        table.add_column("library share")
    if expected:
        table.add_column("expected")
    for r in results:
        colour = {"correct": "green", "incorrect": "red", "rejected": "magenta"}.get(r.verdict.value, "yellow")
        row = [
            Path(r.candidate).name,
            r.backend,
            f"[{colour}]{r.verdict.value}[/]",
            r.reason.value if r.reason else "-",
            f"{r.max_abs_error:.2e}" if r.max_abs_error is not None else "-",
            _fmt_ms(r, "candidate"),
        ]
        for name in baselines:
            s = r.speedups.get(name)
            row.append(f"{s.ratio:.2f}x [{s.ci_low:.2f}, {s.ci_high:.2f}]" if s else "-")
        if engineering:
            row.append(f"{r.library_share:.0%}" if r.library_share is not None else "-")
        if expected:
            want = expected.get(r.candidate)
            row.append(f"{want[0]}{'/' + want[1] if want and want[1] else ''}" if want else "-")
        table.add_row(*row)
    out.print(table)
    for r in results:
        out.print(f"[bold]{Path(r.candidate).name}[/]: {r.message}", highlight=False)
        for flag in r.flags:
            out.print(f"  flag {flag.code}: {flag.message}", highlight=False, markup=False)
        if r.suspicious:
            out.print(f"  suspicious: {r.suspicious}", highlight=False, markup=False)


def _explain(ctx: typer.Context, code: Optional[str]) -> None:
    """`--explain REASON`: eager, so it answers before the missing REFERENCE is noticed."""
    if code is None or ctx.resilient_parsing:
        return
    from kernelwright.harness.reasons import UnknownReason, explain
    from kernelwright.harness.verdicts import Reason

    try:
        text = explain(code)
    except UnknownReason as exc:
        if exc.suggestions:
            hint = f"did you mean {' or '.join(exc.suggestions)}?"
        else:
            hint = f"one of: {', '.join(r.value for r in Reason)}"
        raise UsageError(f"unknown reason {code!r}", hint=hint) from None
    out.print(text, highlight=False, markup=False)
    raise typer.Exit(ExitCode.OK)


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_command(
        ctx: typer.Context,
        reference: Annotated[str, typer.Argument(help="A problem name (see `problems list`) or problem file.")],
        candidates: Annotated[
            Optional[list[Path]], typer.Argument(help="KernelBench-style solution files (class ModelNew).")
        ] = None,
        bundled: Annotated[
            bool,
            typer.Option(
                "--bundled",
                help="Evaluate the problem's bundled oracle solutions and compare with their expected verdicts.",
            ),
        ] = False,
        device: Annotated[
            Optional[str], typer.Option("--device", help="cuda or cpu (default: cuda when a GPU is visible).")
        ] = None,
        size: Annotated[
            str, typer.Option("--size", help="Input size: default, or small (quick CPU runs).")
        ] = "default",
        trials: Annotated[
            int,
            typer.Option(
                "--trials",
                min=1,
                help="Correctness trials on the default shapes (plus one per shape variant and a strided one); at least 5 run.",
            ),
        ] = 5,
        baselines: Annotated[
            str, typer.Option("--baselines", help="Comma-separated: eager, compile, compile-max-autotune.")
        ] = ",".join(DEFAULT_BASELINES),
        no_timing: Annotated[bool, typer.Option("--no-timing", help="Check correctness only.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
        out_dir: Annotated[
            Optional[Path], typer.Option("--out", help="Write an evidence folder per candidate here.")
        ] = None,
        sandbox: Annotated[
            Optional[str],
            typer.Option(
                "--sandbox",
                help="strict: refuse to run (exit 5) without every isolation layer, and reject candidates that "
                "try the network or write outside their scratch; best-effort (default, setting `sandbox`): "
                "run with the layers available and flag such attempts.",
            ),
        ] = None,
        policy: Annotated[
            Optional[str],
            typer.Option(
                "--policy",
                help="strict (default, setting `policy`; KernelBench's rule): library ops may not do the main work; "
                "engineering: library calls (e.g. cuBLAS) may do part of it beside the candidate's own kernels on the "
                "hot path, and their share is shown. Every hack check applies under both.",
            ),
        ] = None,
        explain: Annotated[
            Optional[str],
            typer.Option(
                "--explain",
                metavar="REASON",
                callback=_explain,
                is_eager=True,
                help="Explain a verdict's reason (e.g. torch_fallback): what the candidate did, why it does not "
                "count, where it is decided; then exit. Needs no REFERENCE or CANDIDATE.",
            ),
        ] = None,
    ) -> int:
        """Evaluate candidate kernels against a problem's PyTorch reference: build each in its own
        process, fuzz it for correctness, reject reward hacks, and time it against the baselines."""
        from kernelwright.problems import resolve_problem
        from kernelwright.problems.solutions_index import bundled_solutions
        from kernelwright.tools.evaluate import check_candidate_files, eval_options, evaluate_files, resolve_device

        state: AppState = ctx.obj
        settings = state.settings()
        if size not in ("default", "small"):
            raise UsageError(f"--size must be 'default' or 'small', not {size!r}")
        if sandbox is not None and sandbox not in ("strict", "best-effort"):
            raise UsageError(f"--sandbox must be 'strict' or 'best-effort', not {sandbox!r}")
        if policy is not None and policy not in ("strict", "engineering"):
            raise UsageError(f"--policy must be 'strict' or 'engineering', not {policy!r}")
        chosen = resolve_device(device, settings)
        problem = resolve_problem(reference)
        paths = list(candidates or [])
        expected: dict[str, tuple[str, str | None]] = {}
        if bundled:
            for entry in bundled_solutions(problem.name):
                if entry.backend == "cpp" or chosen == "cuda":
                    paths.append(entry.path)
                    expected[str(entry.path)] = (entry.expected, entry.reason)
        if not paths:
            raise UsageError(
                "no candidate given", hint="name candidate files, or --bundled for the problem's oracle solutions"
            )
        check_candidate_files(paths, chosen)
        opts = eval_options(
            settings,
            chosen,
            size="small" if size == "small" else "default",
            trials=trials,
            baselines=parse_baselines(baselines),
            timing=not no_timing,
            out_dir=out_dir,
            sandbox=sandbox,
            policy=policy,
            progress=lambda message: err.print(f"[dim]{message}[/]", highlight=False),
        )
        results = evaluate_files(problem, paths, opts)
        if as_json:
            doc: dict[str, object] = {
                "problem": problem.qualified,
                "results": [r.model_dump(mode="json") for r in results],
            }
            if expected:
                doc["expected"] = {k: {"verdict": v[0], "reason": v[1]} for k, v in expected.items()}
            typer.echo(json.dumps(doc, indent=2))
        else:
            _print_table(results, expected)
        if expected:
            mismatched = [
                r for r in results if str(r.candidate) in expected and expected[str(r.candidate)][0] != r.verdict.value
            ]
            return ExitCode.NEEDS_ATTENTION if mismatched else ExitCode.OK
        return worst([r.exit_code for r in results])
