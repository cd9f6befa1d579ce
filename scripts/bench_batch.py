#!/usr/bin/env python3
"""Batch judging benchmark (not a test): judge N candidates with `batch judge`'s engine and print
the wall time and where it went.

    PYTHONPATH=$PWD python3 scripts/bench_batch.py --device cuda --n 100 [--size default] [--out DIR]
    PYTHONPATH=$PWD python3 scripts/bench_batch.py --device cuda --candidates DIR --problems level1

Without --candidates it lays out the bundled oracles of the device's backend (`cuda` or `cpp`) as
KernelBench generations (level_N/problem_ID/sample_K.py), repeating them until there are N: our
own candidates, with verdicts known in advance (mismatches are listed). A repeated oracle's kernel
is cached after its first build unless --cold-builds makes every sample's kernel source distinct.
The batch folder is resumable: if one call is not enough (a device lease running out), run the
same command again and the figure covers both calls (the report's wall time sums the
invocations). Prints one JSON document (also written with --json).

Breakdown: wall time; per candidate, the harness's phases summed over all candidates (worker
start, load = the build, correctness, work share, timing, baselines prepared); what the workers
spent outside candidates (reference runs, sessions opening and closing) = workers x wall - sum of
the candidates' totals.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kernelwright.config import load_settings
from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import all_solutions
from kernelwright.tools.batch.events import BatchEvent
from kernelwright.tools.batch.judge_mode import run_judge
from kernelwright.tools.batch.results import read_records
from kernelwright.tools.batch.spec import JudgeSpec, plan_slots, visible_gpus


def lay_out_oracles(root: Path, device: str, n: int, cold: bool) -> tuple[list[str], dict[str, tuple[str, str | None]]]:
    """N candidate files from the bundled oracles; (problem refs, expected verdict by relative path)."""
    backend = "cuda" if device == "cuda" else "cpp"
    oracles = [s for s in all_solutions() if s.backend == backend]
    if not oracles:
        sys.exit(f"no bundled {backend} oracles")
    expected: dict[str, tuple[str, str | None]] = {}
    samples: Counter[str] = Counter()
    problems: list[str] = []
    for k in range(n):
        oracle = oracles[k % len(oracles)]
        problem = resolve_problem(oracle.problem)
        sample = samples[problem.qualified]
        samples[problem.qualified] += 1
        rel = f"level_{problem.level}/problem_{problem.id}/sample_{sample}.py"
        source = oracle.path.read_text()
        if cold:  # a distinct kernel source: the content-addressed build cache cannot answer it
            source = source.replace("#include", f"// bench sample {k}\n#include", 1)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(source)
        expected[rel] = (oracle.expected, oracle.reason)
        if problem.qualified not in problems:
            problems.append(problem.qualified)
    return problems, expected


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--n", type=int, default=100, help="candidates to lay out from the oracles")
    parser.add_argument("--candidates", type=Path, help="judge this folder instead of the oracles")
    parser.add_argument("--problems", nargs="*", default=None, help="problem sets (with --candidates)")
    parser.add_argument("--size", choices=("default", "small"), default="default")
    parser.add_argument("--baselines", default="eager,compile")
    parser.add_argument("--workers", type=int, default=None, help="CPU workers, or at most this many GPUs")
    parser.add_argument("--parallel-builds", type=int, default=None)
    parser.add_argument("--cold-builds", action="store_true", help="every sample's kernel source distinct")
    parser.add_argument("--out", type=Path, default=None, help="the batch folder (default: a temporary one)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kw-bench-batch-"))
    out = args.out or work / "batch"
    expected: dict[str, tuple[str, str | None]] = {}
    if args.candidates:
        candidates, problems = args.candidates, args.problems or ["builtin"]
    else:
        candidates = work / "candidates"
        problems, expected = lay_out_oracles(candidates, args.device, args.n, args.cold_builds)
    settings = load_settings()
    spec = JudgeSpec.from_settings(
        settings, args.device, size=args.size, baselines=args.baselines.split(","), parallel_builds=args.parallel_builds
    )
    gpus = None
    if args.device == "cuda":
        import torch

        gpus = visible_gpus(torch.cuda.device_count())
    slots = plan_slots(args.device, workers=args.workers, gpus=gpus)
    first_result: list[float] = []
    start = time.monotonic()

    def listen(event: BatchEvent) -> None:
        if event.kind == "result":
            if not first_result:
                first_result.append(time.monotonic() - start)
            r = event.record
            print(
                f"[{event.done}/{event.to_do}] {r.problem} {r.candidate}: {r.verdict} {r.reason or ''} "
                f"{r.seconds:.1f} s",
                file=sys.stderr,
            )

    outcome = run_judge(problems, candidates, out, spec, slots, listen)
    wall = time.monotonic() - start
    records = [r for r in read_records(out / "results.jsonl") if r.kind == "candidate"]
    phases: Counter[str] = Counter()
    for r in records:
        phases.update({k: v for k, v in r.phases.items() if k != "build"})
    totals = [r.seconds for r in records]
    mismatches = [
        {"candidate": r.candidate, "got": [r.verdict, r.reason], "expected": list(expected[r.candidate])}
        for r in records
        if r.candidate in expected and (r.verdict, r.reason) != expected[r.candidate]
    ]
    report = json.loads((out / "report.json").read_text())
    doc: dict[str, Any] = {
        "device": args.device,
        "hardware": report["hardware"],
        "workers": [s.label for s in slots],
        "size": args.size,
        "baselines": spec.baselines,
        "candidates": len(records),
        "problems": len({r.problem for r in records}),
        "wall_s_this_call": round(wall, 1),
        "wall_s_all_calls": round(report["time"]["wall_s"], 1),
        "first_result_s": round(first_result[0], 1) if first_result else None,
        "per_candidate_s": {
            "median": round(statistics.median(totals), 2) if totals else None,
            "max": round(max(totals), 2) if totals else None,
        },
        "phases_sum_s": {k: round(v, 1) for k, v in phases.most_common()},
        "outside_candidates_s": round(len(slots) * wall - sum(totals), 1),
        "verdicts": report["verdicts"],
        "fast_p": report["fast_p"],
        "expected_mismatches": mismatches,
        "exit_code": outcome.exit_code,
        "out": str(out),
    }
    text = json.dumps(doc, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
