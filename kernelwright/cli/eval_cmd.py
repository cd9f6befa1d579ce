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
from kernelwright.vocabulary import DeviceChoice, Policy, SandboxMode, Size

if TYPE_CHECKING:
    from kernelwright.harness.result import EvalResult
    from kernelwright.problems import Problem
    from kernelwright.problems.solutions_index import BundledSolution

out = Console(width=None if sys.stdout.isatty() else 160)  # logs and pipes get the whole table
err = Console(stderr=True)


def _fmt_ms(result: EvalResult, name: str) -> str:
    stats = result.timings.get(name)
    if stats is None:
        return "-"
    return f"{stats.median_ms:.4g} ms ±{stats.rel_ci_halfwidth * 100:.1f}% (n={stats.n})"


def _want(entry: BundledSolution) -> str:
    also = f" (or {', '.join(entry.also)})" if entry.also else ""
    return f"{entry.expected}/{entry.reason}{also}" if entry.reason else entry.expected


def _print_table(results: list[EvalResult], expected: dict[str, BundledSolution]) -> None:
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
            row.append(_want(want) if want else "-")
        table.add_row(*row)
    out.print(table)
    for r in results:
        out.print(f"[bold]{Path(r.candidate).name}[/]: {r.message}", highlight=False)
        for flag in r.flags:
            out.print(f"  flag {flag.code}: {flag.message}", highlight=False, markup=False)
        if r.suspicious:
            out.print(f"  suspicious: {r.suspicious}", highlight=False, markup=False)


def _select_bundled(
    problem: Problem, suites: list[str], only: Optional[str], device: str, *, timing: bool, size: Size, policy: Policy
) -> tuple[list[BundledSolution], dict[str, str]]:
    """The problem's bundled cases of `suites` to run on `device`, and why each one that could run
    here is left out. A case's backend names its device: `cpp` on the CPU (its kernels take CPU
    tensors), `cuda` and `triton` on cuda."""
    from kernelwright.problems.solutions_index import bundled_solutions

    entries = [
        e
        for suite in suites
        for e in bundled_solutions(problem.name, suite)
        if e.problem_file is None or e.problem_file.resolve() == problem.path.resolve()
    ]
    if only:
        wanted = {w.strip() for w in only.split(",") if w.strip()}
        unknown = wanted - {e.name for e in entries} - {e.category for e in entries if e.category}
        if unknown:
            names = ", ".join(e.name for e in entries) or "none"
            raise UsageError(
                f"--only: no bundled case of {problem.name} named {', '.join(sorted(unknown))}", hint=f"cases: {names}"
            )
        entries = [e for e in entries if e.name in wanted or e.category in wanted]
    chosen: list[BundledSolution] = []
    skipped: dict[str, str] = {}
    for e in entries:
        if (e.backend == "cpp") != (device == "cpu"):
            continue  # written for the other device (a C++ oracle run on cuda inputs only raises)
        if e.timing and not timing:
            skipped[e.name] = "its hack acts while timed: drop --no-timing"
        elif e.size is not None and e.size != size:
            skipped[e.name] = f"only meaningful at --size {e.size}"
        elif e.policy is not None and e.policy != policy:
            skipped[e.name] = f"its expected verdict holds under --policy {e.policy}"
        else:
            chosen.append(e)
    return chosen, skipped


def _as_expected(result: EvalResult, expected: dict[str, BundledSolution]) -> bool:
    """An oracle is judged on its verdict; an adversarial case on its verdict and reason (a hack
    rejected for another reason means the check that names it did not fire)."""
    entry = expected[str(result.candidate)]
    if entry.suite == "oracle":
        return result.verdict.value == entry.expected
    return entry.accepts(result.verdict.value, result.reason.value if result.reason else None)


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
        adversarial: Annotated[
            bool,
            typer.Option(
                "--adversarial",
                help="Evaluate the problem's bundled reward hacks and honest styles for this device; compare verdicts and reasons.",
            ),
        ] = False,
        only: Annotated[
            Optional[str],
            typer.Option(
                "--only",
                metavar="NAMES",
                help="With --bundled or --adversarial: only these cases (comma-separated file names or categories).",
            ),
        ] = None,
        device: Annotated[
            Optional[DeviceChoice], typer.Option("--device", help="cuda or cpu (default: cuda when a GPU is visible).")
        ] = None,
        size: Annotated[
            Size, typer.Option("--size", help="Input size: default, or small (quick CPU runs).")
        ] = Size.DEFAULT,
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
            Optional[SandboxMode],
            typer.Option(
                "--sandbox",
                help="strict: refuse to run (exit 5) without every isolation layer, and reject candidates that "
                "try the network or write outside their scratch; best-effort (default, setting `sandbox`): "
                "run with the layers available and flag such attempts.",
            ),
        ] = None,
        policy: Annotated[
            Optional[Policy],
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
        from kernelwright.tools.evaluate import check_candidate_files, eval_options, evaluate_files, resolve_device

        state: AppState = ctx.obj
        settings = state.settings()
        chosen = resolve_device(device, settings)
        problem = resolve_problem(reference)
        if only is not None and not (bundled or adversarial):
            raise UsageError("--only selects among bundled cases", hint="add --bundled or --adversarial")
        paths = list(candidates or [])
        expected: dict[str, BundledSolution] = {}
        skipped: dict[str, str] = {}
        if bundled or adversarial:
            suites = [s for s, wanted in (("oracle", bundled), ("adversarial", adversarial)) if wanted]
            entries, skipped = _select_bundled(
                problem,
                suites,
                only,
                chosen,
                timing=not no_timing,
                size=size,
                policy=policy or settings.policy,
            )
            for entry in entries:
                paths.append(entry.path)
                expected[str(entry.path)] = entry
            for name, why in skipped.items():
                err.print(f"[yellow]skipped {name}[/]: {why}", highlight=False)
        if not paths:
            if bundled or adversarial:
                hint = "; ".join(f"{name}: {why}" for name, why in skipped.items()) or f"none is for {chosen}"
                raise UsageError(f"no bundled case of {problem.name} to run here", hint=hint)
            raise UsageError(
                "no candidate given",
                hint="name candidate files, or --bundled / --adversarial for the problem's bundled cases",
            )
        check_candidate_files(paths, chosen)
        opts = eval_options(
            settings,
            chosen,
            size=size,
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
                doc["expected"] = {
                    k: {"verdict": e.expected, "reason": e.reason, **({"also": list(e.also)} if e.also else {})}
                    for k, e in expected.items()
                }
            if skipped:
                doc["skipped"] = skipped
            typer.echo(json.dumps(doc, indent=2))
        else:
            _print_table(results, expected)
        if expected:
            mismatched = [r for r in results if str(r.candidate) in expected and not _as_expected(r, expected)]
            return ExitCode.NEEDS_ATTENTION if mismatched else ExitCode.OK
        return worst([r.exit_code for r in results])
