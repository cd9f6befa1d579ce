#!/usr/bin/env python3
"""Harness latency benchmark (not a test): per candidate, cold build, cached build, correctness
phase, timing phase and total, each over several runs (median and spread). The build phase is split
into worker start (interpreter, torch, harness set-up, baselines) and load (importing the candidate:
its build). Two ways of calling the harness are measured: `fresh` (one evaluate() per candidate, as
`kernelwright eval` does) and `session` (an EvalSession that starts the next worker ahead, as the
agent's loop does).

    PYTHONPATH=$PWD python3 scripts/bench_harness.py [--device cuda] [--runs 3] [--out bench.json]

Cold builds use a fresh build cache per run; the torch.compile baseline's inductor cache is
warmed once before measuring, as the issue asks ("compile baseline already cached").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from kernelwright.harness.options import EvalOptions, TimingPlan
from kernelwright.harness.result import EvalResult
from kernelwright.harness.session import EvalSession, evaluate
from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import bundled_solutions


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


ROWS = (
    "cold_build",
    "cached_build",
    "cold_load",
    "cached_load",
    "worker_start",
    "correctness",
    "timing",
    "total_cold",
    "total_cached",
)


def _timed(call: Callable[[], list[EvalResult]]) -> tuple[EvalResult, float]:
    start = time.perf_counter()
    [result] = call()
    return result, time.perf_counter() - start


def _record(rows: dict[str, list[float]], cold: EvalResult, cold_s: float, cached: EvalResult, cached_s: float) -> None:
    nan = float("nan")
    rows["cold_build"].append(cold.phase_seconds["build"])
    rows["cached_build"].append(cached.phase_seconds["build"])
    rows["cold_load"].append(cold.phase_seconds.get("load", nan))
    rows["cached_load"].append(cached.phase_seconds.get("load", nan))
    rows["worker_start"].append(cached.phase_seconds.get("worker_start", nan))
    rows["correctness"].append(cached.phase_seconds["correctness"])
    rows["timing"].append(cached.phase_seconds["timing"])
    rows["total_cold"].append(cold_s)
    rows["total_cached"].append(cached_s)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--problem", default="relu")
    parser.add_argument("--size", default="default")
    parser.add_argument("--forms", help="comma-separated solution stems to measure (default: every correct one)")
    parser.add_argument(
        "--mode",
        choices=("fresh", "session", "both"),
        default="both",
        help="fresh: one evaluate() per candidate (the CLI); session: an EvalSession with the next worker "
        "started ahead (the agent's loop)",
    )
    parser.add_argument(
        "--candidate",
        type=Path,
        action="append",
        help="measure this candidate file (repeatable) instead of the problem's bundled oracles, e.g. a "
        "fast-form kernel of benchmarks/level1_cuda",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    backend = "cuda" if args.device == "cuda" else "cpp"
    found = [s for s in bundled_solutions(args.problem) if s.backend == backend and s.expected == "correct"]
    # The agent's form (no torch headers, "*_fast") first: it is the one with a latency goal.
    forms = {s.path.stem: s.path for s in sorted(found, key=lambda s: ("fast" not in s.path.stem, s.path.stem))}
    if args.forms:
        forms = {k: v for k, v in forms.items() if k in args.forms.split(",")}
    if args.candidate:
        forms = {f"{p.parent.name}_{p.stem}": p for p in args.candidate}
    root = Path(tempfile.mkdtemp(prefix="kw-bench-"))
    t0 = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f} s] {message}", file=sys.stderr, flush=True)

    plan = TimingPlan(min_reps=20, max_reps=200, time_cap_s=5.0, input_sets=2)
    problem = resolve_problem(args.problem)
    base = EvalOptions(
        device=args.device,
        size=args.size,
        baselines=("eager", "compile"),
        inductor_cache=root / "inductor",
        timing_plan=plan,
        build_cache=root / "warm",
        progress=progress,
    )
    evaluate(problem, [next(iter(forms.values()))], base)  # warm the inductor cache for the compile baseline
    modes = ["fresh", "session"] if args.mode == "both" else [args.mode]
    report: dict[str, dict] = {}
    for label, path in forms.items():
        for mode in modes:
            key = f"{label}/{mode}"
            rows: dict[str, list[float]] = {name: [] for name in ROWS}
            session = None
            if mode == "session":
                session = EvalSession(problem, replace(base, build_cache=root / f"session-{label}"), warm=True)
            try:
                for run in range(args.runs):
                    if mode == "fresh":
                        opts = replace(base, build_cache=root / f"cold-{label}-{run}")
                        cold, cold_s = _timed(lambda: evaluate(problem, [path], opts))  # noqa: B023
                        cached, cached_s = _timed(lambda: evaluate(problem, [path], opts))  # noqa: B023
                    else:
                        assert session is not None
                        # A comment in the kernel's source text makes each run's build cold; the agent's
                        # think time, while the next worker gets ready, is not part of a candidate's latency.
                        fresh_src = root / f"{label}_{run}.py"
                        text = path.read_text()
                        assert 'r"""' in text, f"{path}: no raw-string kernel source to vary"
                        fresh_src.write_text(text.replace('r"""', f'r"""\n// kernelwright bench run {run}', 1))
                        session.wait_ready()
                        cold, cold_s = _timed(lambda: session.evaluate([fresh_src]))  # noqa: B023
                        session.wait_ready()
                        cached, cached_s = _timed(lambda: session.evaluate([fresh_src]))  # noqa: B023
                    assert cold.verdict.value == "correct" and cached.build_cached, (cold.message, cached.message)
                    _record(rows, cold, cold_s, cached, cached_s)
                    print(key, run, json.dumps({k: round(v[-1], 3) for k, v in rows.items()}), flush=True)
                    for name, result in (("cold", cold), ("cached", cached)):  # every phase, for the critical path
                        print(key, run, name, json.dumps({k: round(v, 3) for k, v in result.phase_seconds.items()}))
            finally:
                if session is not None:
                    session.close()
            report[key] = {k: _summary(v) for k, v in rows.items()}
            print(key, json.dumps({k: round(v["median"], 3) for k, v in report[key].items()}), flush=True)
            if args.out:
                args.out.write_text(json.dumps({"forms": report}, indent=2))
    doc = {
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "problem": args.problem,
        "size": args.size,
        "forms": report,
    }
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
