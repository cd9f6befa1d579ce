#!/usr/bin/env python3
"""Harness latency benchmark (not a test): per candidate, cold build, cached build, correctness
phase, timing phase and total, each over several runs (median and spread). The build phase is split
into worker start (interpreter, torch, harness set-up) and load (importing the candidate: its build).

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
from pathlib import Path

import torch

from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import bundled_solutions
from kernelwright.tools.evaluate import EvalOptions, evaluate
from kernelwright.tools.jobs import TimingPlan


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--problem", default="relu")
    parser.add_argument("--size", default="default")
    parser.add_argument("--forms", help="comma-separated solution stems to measure (default: every correct one)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    backend = "cuda" if args.device == "cuda" else "cpp"
    found = [s for s in bundled_solutions(args.problem) if s.backend == backend and s.expected == "correct"]
    # The agent's form (no torch headers, "*_fast") first: it is the one with a latency goal.
    forms = {s.path.stem: s.path for s in sorted(found, key=lambda s: ("fast" not in s.path.stem, s.path.stem))}
    if args.forms:
        forms = {k: v for k, v in forms.items() if k in args.forms.split(",")}
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
    report: dict[str, dict] = {}
    for label, path in forms.items():
        rows: dict[str, list[float]] = {
            "cold_build": [],
            "cached_build": [],
            "cold_load": [],
            "cached_load": [],
            "worker_start": [],
            "correctness": [],
            "timing": [],
            "total_cold": [],
            "total_cached": [],
        }
        for run in range(args.runs):
            opts = EvalOptions(**{**base.__dict__, "build_cache": root / f"cold-{label}-{run}"})
            start = time.perf_counter()
            [cold] = evaluate(problem, [path], opts)
            rows["total_cold"].append(time.perf_counter() - start)
            start = time.perf_counter()
            [cached] = evaluate(problem, [path], opts)
            rows["total_cached"].append(time.perf_counter() - start)
            assert cold.verdict.value == "correct" and cached.build_cached, (cold.message, cached.message)
            rows["cold_build"].append(cold.phase_seconds["build"])
            rows["cached_build"].append(cached.phase_seconds["build"])
            rows["cold_load"].append(cold.phase_seconds.get("load", float("nan")))
            rows["cached_load"].append(cached.phase_seconds.get("load", float("nan")))
            rows["worker_start"].append(cached.phase_seconds.get("worker_start", float("nan")))
            rows["correctness"].append(cached.phase_seconds["correctness"])
            rows["timing"].append(cached.phase_seconds["timing"])
            print(label, run, json.dumps({k: round(v[-1], 3) for k, v in rows.items()}), flush=True)
        report[label] = {k: _summary(v) for k, v in rows.items()}
        print(label, json.dumps(report[label], indent=1), flush=True)
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
