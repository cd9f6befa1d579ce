#!/usr/bin/env python3
"""Batch judging benchmark (not a test): judge N candidates with `batch judge`'s engine and print
the wall time and where it went.

    PYTHONPATH=$PWD python3 scripts/bench_batch.py --device cuda --n 100 [--size default] [--out DIR]
    PYTHONPATH=$PWD python3 scripts/bench_batch.py --device cuda --candidates DIR --problems level1
    PYTHONPATH=$PWD python3 scripts/bench_batch.py --device cuda --candidates benchmarks/level1_cuda \
        --expected benchmarks/level1_cuda/expected.json
    PYTHONPATH=$PWD python3 scripts/bench_batch.py --device cuda --from-slice benchmarks/level1_cuda --n 100 --cold-builds

Without --candidates it lays out the bundled oracles of the device's backend (`cuda` or `cpp`) as
KernelBench generations (level_N/problem_ID/sample_K.py), repeating them until there are N: our
own candidates, with verdicts known in advance (mismatches are listed). A repeated oracle's kernel
is cached after its first build unless --cold-builds makes every sample's kernel source distinct.

--from-slice DIR does the same with a folder of candidates and its manifest, DIR/expected.json (a
list of {"file", "problem", "expected", "reason", "note"}, files relative to DIR; see
benchmarks/level1_cuda): its files, in manifest order, repeated until there are N, each copy
with a distinct kernel source and, for `load_kernels` files, a distinct library name when
--cold-builds is given. --candidates DIR judges a folder as it is; with --expected FILE (such a
manifest, files relative to DIR) the verdicts are checked against it, and the problems judged
default to the manifest's. An `incorrect` expected with output_mismatch also accepts
nonfinite_output, and the reverse (a wrong kernel may produce either).

The batch folder is resumable: if one call is not enough (a device lease running out), run the
same command again and the figure covers both calls (the report's wall time sums the
invocations). Prints one JSON document (also written with --json).

Breakdown: wall time; per candidate, the harness's phases summed over all candidates (worker
start, load = the build, correctness, work share, timing, baselines prepared); what the workers
spent outside candidates (reference runs, sessions opening and closing, groups' parallel builds)
= workers x wall - sum of the candidates' totals. `ahead`: the work done off the critical path
(see kernelwright/batch/ahead.py): builds done ahead (how many, their seconds: build time
hidden from judging), candidates whose build was found cached when judged (or not), problems
whose session was opened while the previous one was judged (how many, how long ahead), and the
worker start still waited for by each problem's first candidate. --build-ahead N and
--no-open-ahead set JudgeSpec.build_ahead / open_ahead (--build-ahead 0 --no-open-ahead: judging
as before the look-ahead, for a comparison on the same machine).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kernelwright.batch.events import BatchEvent
from kernelwright.batch.judge_mode import run_judge
from kernelwright.batch.results import BatchRecord, read_records
from kernelwright.batch.spec import JudgeSpec, plan_slots, visible_gpus
from kernelwright.config import load_settings
from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import all_solutions

Expected = dict[str, tuple[str, str | None]]  # relative path -> (verdict, reason)

# A wrong kernel's outputs may be finite and wrong or not finite at all, depending on the inputs.
_WRONG_OUTPUT = {"output_mismatch", "nonfinite_output"}
_LIBRARY_NAME = re.compile(r"""(load_kernels\(\s*)(["'])([^"']+)\2""")


def distinct_source(source: str, k: int) -> str:
    """Copy `k` of a candidate, made distinct for the content-addressed build cache: a comment
    before the first #include of its kernel source and, for a `load_kernels` file, the library
    name suffixed `_b<k>` (so no two copies share a build or a library name)."""
    source = source.replace("#include", f"// bench sample {k}\n#include", 1)
    return _LIBRARY_NAME.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}_b{k}{m.group(2)}", source, count=1)


def _lay_out(
    root: Path, n: int, cold: bool, items: list[tuple[str, Path, tuple[str, str | None]]]
) -> tuple[list[str], Expected]:
    """N candidate files from `items` (problem ref, file, expected), repeated in order as
    KernelBench generations (level_N/problem_ID/sample_K.py); (problem refs, expected by path)."""
    expected: Expected = {}
    samples: Counter[str] = Counter()
    problems: list[str] = []
    manifest: list[dict[str, Any]] = []
    for k in range(n):
        ref, path, verdict = items[k % len(items)]
        problem = resolve_problem(ref)
        sample = samples[problem.qualified]
        samples[problem.qualified] += 1
        rel = f"level_{problem.level}/problem_{problem.id}/sample_{sample}.py"
        source = path.read_text()
        if cold:  # a distinct kernel source: the content-addressed build cache cannot answer it
            source = distinct_source(source, k)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(source)
        expected[rel] = verdict
        manifest.append({"file": rel, "problem": problem.qualified, "expected": verdict[0], "reason": verdict[1]})
        if problem.qualified not in problems:
            problems.append(problem.qualified)
    (root / "expected.json").write_text(json.dumps(manifest, indent=1))  # so the folder can be judged again
    return problems, expected


def lay_out_oracles(root: Path, device: str, n: int, cold: bool) -> tuple[list[str], Expected]:
    """N candidate files from the bundled oracles; (problem refs, expected verdict by relative path)."""
    backend = "cuda" if device == "cuda" else "cpp"
    oracles = [s for s in all_solutions() if s.backend == backend]
    if not oracles:
        sys.exit(f"no bundled {backend} oracles")
    return _lay_out(root, n, cold, [(o.problem, o.path, (o.expected, o.reason)) for o in oracles])


def read_manifest(path: Path) -> list[dict[str, Any]]:
    """A slice's expected.json: [{"file", "problem", "expected", "reason", "note"}, ...]."""
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        sys.exit(f"{path}: cannot read the manifest: {exc}")
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and {"file", "problem", "expected"} <= e.keys() for e in entries
    ):
        sys.exit(f"{path}: not a list of {{file, problem, expected, reason}} objects")
    return entries


def lay_out_slice(root: Path, slice_dir: Path, n: int, cold: bool) -> tuple[list[str], Expected]:
    """N candidate files from a slice folder and its expected.json, repeated in manifest order."""
    entries = read_manifest(slice_dir / "expected.json")
    if not entries:
        sys.exit(f"{slice_dir / 'expected.json'}: empty")
    items = [(e["problem"], slice_dir / e["file"], (e["expected"], e.get("reason"))) for e in entries]
    return _lay_out(root, n, cold, items)


def verdict_matches(expected: tuple[str, str | None], got: tuple[str | None, str | None]) -> bool:
    if tuple(got) == tuple(expected):
        return True
    return expected[0] == got[0] == "incorrect" and expected[1] in _WRONG_OUTPUT and got[1] in _WRONG_OUTPUT


def ahead_breakdown(records: list[BatchRecord]) -> dict[str, Any]:
    """What was done off the critical path (`BatchRecord.ahead`, `build_cached`), and what of a
    session's opening each problem's first candidate still waited for (its worker start)."""
    prebuilt = [r.ahead["prebuild"] for r in records if "prebuild" in r.ahead]
    sessions = [r.ahead["session"] for r in records if "session" in r.ahead]
    firsts: dict[str, BatchRecord] = {}
    for r in records:  # the file's order is the order judged; one worker judges a problem
        firsts.setdefault(r.problem, r)
    waited = [r.phases.get("worker_start", 0.0) for r in firsts.values()]
    return {
        "builds_ahead": len(prebuilt),
        "builds_ahead_s_sum": round(sum(prebuilt), 1),
        "judged_build_cached": sum(r.build_cached is True for r in records),
        "judged_build_fresh": sum(r.build_cached is False for r in records),
        "sessions_opened_ahead": len(sessions),
        "session_head_start_s_sum": round(sum(sessions), 1),
        "problems": len(firsts),
        "first_candidate_worker_start_s_sum": round(sum(waited), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--n", type=int, default=100, help="candidates to lay out (oracles or --from-slice)")
    parser.add_argument("--candidates", type=Path, help="judge this folder instead of the oracles")
    parser.add_argument(
        "--expected",
        type=Path,
        default=None,
        help="with --candidates: a manifest (expected.json) to check verdicts against",
    )
    parser.add_argument(
        "--from-slice", type=Path, default=None, help="lay out N candidates from this folder and its expected.json"
    )
    parser.add_argument("--problems", nargs="*", default=None, help="problem sets (with --candidates)")
    parser.add_argument("--size", choices=("default", "small"), default="default")
    parser.add_argument("--baselines", default="eager,compile")
    parser.add_argument("--workers", type=int, default=None, help="CPU workers, or at most this many GPUs")
    parser.add_argument("--parallel-builds", type=int, default=None, help="candidates per group (JudgeSpec)")
    parser.add_argument(
        "--build-ahead", type=int, default=None, help="builds ahead at once per worker (0: off; default: per slot)"
    )
    parser.add_argument("--no-open-ahead", action="store_true", help="open each problem's session at its turn")
    parser.add_argument("--cold-builds", action="store_true", help="every sample's kernel source distinct")
    parser.add_argument("--out", type=Path, default=None, help="the batch folder (default: a temporary one)")
    parser.add_argument(
        "--lay-out-in",
        type=Path,
        default=None,
        help="lay the candidates out in this folder (default: a temporary one), with its expected.json, so "
        "another run (other GPUs, --ray) can judge the same files: --candidates DIR --expected DIR/expected.json",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    if args.candidates and args.from_slice:
        parser.error("--candidates and --from-slice are alternatives")
    if args.expected and not args.candidates:
        parser.error("--expected goes with --candidates (--from-slice reads its folder's expected.json)")
    work = Path(tempfile.mkdtemp(prefix="kw-bench-batch-"))
    out = args.out or work / "batch"
    expected: Expected = {}
    if args.candidates:
        candidates, problems = args.candidates, args.problems or ["builtin"]
        if args.expected:
            entries = read_manifest(args.expected)
            expected = {e["file"]: (e["expected"], e.get("reason")) for e in entries}
            if args.problems is None:
                problems = list(dict.fromkeys(e["problem"] for e in entries))
    elif args.from_slice:
        candidates = args.lay_out_in or work / "candidates"
        problems, expected = lay_out_slice(candidates, args.from_slice, args.n, args.cold_builds)
    else:
        candidates = args.lay_out_in or work / "candidates"
        problems, expected = lay_out_oracles(candidates, args.device, args.n, args.cold_builds)
    settings = load_settings()
    spec = JudgeSpec.from_settings(
        settings,
        args.device,
        size=args.size,
        baselines=args.baselines.split(","),
        parallel_builds=args.parallel_builds,
        build_ahead=args.build_ahead,
        open_ahead=False if args.no_open_ahead else None,
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
            # The batch's clock on every line: a run cut short (a device call's limit) still says
            # how far it got in how long.
            print(
                f"[{event.done}/{event.to_do}] {r.problem} {r.candidate}: {r.verdict} {r.reason or ''} "
                f"{r.seconds:.1f} s (at {time.monotonic() - start:.1f} s)",
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
        {
            "candidate": r.candidate,
            "problem": r.problem,
            "got": [r.verdict, r.reason],
            "expected": list(expected[r.candidate]),
            "message": (r.message or "")[:300],
        }
        for r in records
        if r.candidate in expected and not verdict_matches(expected[r.candidate], (r.verdict, r.reason))
    ]
    judged = {r.candidate for r in records}
    not_judged = sorted(rel for rel in expected if rel not in judged)
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
        "ahead": ahead_breakdown(records),
        "settings": {
            "parallel_builds": spec.parallel_builds,
            "build_ahead": [spec.builds_ahead(s) for s in slots],
            "build_cores": [s.build_cores(spec.device) for s in slots],
            "open_ahead": spec.open_ahead,
        },
        "verdicts": report["verdicts"],
        "fast_p": report["fast_p"],
        "expected_checked": sum(r.candidate in expected for r in records),
        "expected_mismatches": mismatches,
        "expected_not_judged": not_judged,
        "exit_code": outcome.exit_code,
        "out": str(out),
        "candidates_dir": str(candidates),
        "problem_refs": problems,
    }
    text = json.dumps(doc, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
