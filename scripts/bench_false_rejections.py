#!/usr/bin/env python3
"""Benchmark (not a test): how often the harness rejects an honest kernel (issue #28).

Honest inputs: every bundled solution whose expected verdict is `correct` for the device (the
oracle suite and the adversarial suite's honest styles, `kernelwright/problems/solutions/
manifest.json`), plus, on cuda, the honest `sample_0.py` kernel of every problem of
`benchmarks/level1_cuda` (its `expected.json` says `correct` for each). Each case is evaluated N
times (`--repeats`, default 20) at each size asked (`--size small --size default`, default both),
on an idle machine or with `--stress K` CPU busy-loop processes started beside the whole run (and
stopped at its end), busy all the time or, with `--load bursty`, in random bursts of 0.05-1.5 s.

The repeats of one case run in one warm `EvalSession` (`warm=True`), the way the agent uses the
harness: the reference runs once per session, every evaluation gets a fresh candidate worker that
was started ahead, and the candidate's build is cached after its first repeat (repeat 0 pays the
build). Any verdict other than `correct` is a false rejection, counted per reason; a `correct`
verdict with the `device_contended` flag (timing not trusted, no speedup reported) is counted
apart: it is the answer for a machine too busy to tell, not a rejection.

Results are appended, one JSON object per evaluation, to a JSON-lines file (`--out`) keyed by
(device, size, condition, case, repeat), the condition being the stress and how the timed workers
started (`workers`: forked from the fork server or afresh, as KERNELWRIGHT_FORKSERVER says; not in
records from before it): a rerun of the same command skips what is there, so the GPU part runs in
pieces (`--max-minutes` stops before an evaluation that would not fit). At the end (and with
`--report FILE.jsonl`, from an existing file alone) it prints, per (device, size, condition):
evaluations, false rejections per reason, device_contended counts, and for each case the
spread of its speedup vs torch.compile and vs eager across repeats against each repeat's stated 95%
interval: the median of the repeats' ratios (each a ratio of medians), how many repeats' intervals
contain it, and the min-max.

    # CPU (2 cores: a short check first, then the full run, idle and under load)
    PYTHONPATH=$PWD python3 scripts/bench_false_rejections.py --device cpu --size small --repeats 3 \\
        --only relu/cpp_correct.py,relu/cpp_fast.py --out runs/false-rejections/cpu-check.jsonl
    PYTHONPATH=$PWD python3 scripts/bench_false_rejections.py --device cpu
    PYTHONPATH=$PWD python3 scripts/bench_false_rejections.py --device cpu --stress 2
    PYTHONPATH=$PWD python3 scripts/bench_false_rejections.py --device cpu --stress 1 --load bursty
    # GPU, in pieces of < 9 minutes: rerun each line until it ends with "complete". The results
    # file (default runs/false-rejections/results.jsonl, git-ignored) is what makes it resume: on a
    # device machine that does not keep it between calls, copy it out ($OUT) after each piece and
    # carry it back in with the next one (the run tool's `carry`).
    PYTHONPATH=$PWD python3 scripts/bench_false_rejections.py --device cuda --size small --max-minutes 8.5
    PYTHONPATH=$PWD python3 scripts/bench_false_rejections.py --device cuda --size default --max-minutes 8.5
    PYTHONPATH=$PWD python3 scripts/bench_false_rejections.py --device cuda --stress 8 --max-minutes 8.5
    # the table alone, from any results file
    PYTHONPATH=$PWD python3 scripts/bench_false_rejections.py --report runs/false-rejections/results.jsonl
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SLICE = ROOT / "benchmarks" / "level1_cuda"
SOLUTIONS = ROOT / "kernelwright" / "problems" / "solutions"  # manifest paths are relative to it
RUNS = Path("runs") / "false-rejections"  # git-ignored: the device machine carries it between calls
BASELINES = ("compile", "eager")
TRUSTED_SPREAD = 4.0  # kernelwright.harness.timing.stats.TRUSTED_SPREAD (the report runs without torch)


@dataclass(frozen=True)
class Case:
    name: str  # the key in the results file: the path under solutions/ or benchmarks/
    problem: str  # a problem reference for resolve_problem, or a problem file
    path: Path


def honest_cases(device: str, policy: str) -> list[Case]:
    """Every honest input for `device`: see the module docstring."""
    from kernelwright.problems.solutions_index import all_solutions

    cases: list[Case] = []
    backends = {"cpu": ("cpp",), "cuda": ("cuda", "triton")}[device]
    for solution in all_solutions(suite=None):
        if solution.expected != "correct" or solution.backend not in backends:
            continue
        if solution.policy is not None and solution.policy != policy:
            continue
        problem = str(solution.problem_file) if solution.problem_file is not None else solution.problem
        cases.append(Case(solution.path.relative_to(SOLUTIONS).as_posix(), problem, solution.path))
    if device == "cuda":
        for entry in json.loads((SLICE / "expected.json").read_text()):
            if entry["expected"] == "correct" and entry["file"].endswith("/sample_0.py"):
                cases.append(Case(f"level1_cuda/{entry['file']}", entry["problem"], SLICE / entry["file"]))
    return cases


def _matches(name: str, wanted: str) -> bool:
    """`--only` matches whole path parts from the start of one: `relu` and `relu/cpp_fast.py` match
    `relu/cpp_fast.py`, not `gemm_bias_relu/...`; `*` and `?` glob."""
    if any(c in wanted for c in "*?["):
        return fnmatch.fnmatch(name, wanted)
    return f"/{wanted}" in f"/{name}"


def key_of(record: dict[str, Any]) -> tuple[str, str, str, str, int]:
    """(device, size, condition, case, repeat); the condition is the stress count, with `b` for a
    bursty load (records from before `--load` were steady)."""
    return (record["device"], record["size"], condition(record), record["case"], int(record["repeat"]))


def condition(record: dict[str, Any]) -> str:
    """The stress count, `b` for a bursty load, and how the timed workers started where the record
    says (`workers`: "forked" from the fork server or "afresh"; records from before it do not)."""
    stress = int(record["stress"])
    load = f"{stress}b" if stress and record.get("load") == "bursty" else str(stress)
    return f"{load}, workers {record['workers']}" if record.get("workers") else load


def timed_workers(device: str) -> str:
    """How this run's timed workers start (KERNELWRIGHT_FORKSERVER): a condition of its own."""
    from kernelwright.harness.workers import forkserver

    return "forked" if forkserver.forking_for(device) else "afresh"


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a killed run: that evaluation runs again
            continue
    return records


# ---- stress ------------------------------------------------------------------------------


# A bursty load: busy for 0.05-1.5 s, idle for 0.05-1.5 s, at random (a build, a type checker, a
# test starting and stopping beside the run: the load changes under one evaluation's looks).
BURSTY = """
import random, time
while True:
    until = time.monotonic() + random.uniform(0.05, 1.5)
    while time.monotonic() < until:
        pass
    time.sleep(random.uniform(0.05, 1.5))
"""


def start_stress(k: int, load: str = "steady") -> list[subprocess.Popen[bytes]]:
    """K CPU busy-loop processes (this script's own children, stopped by `stop_stress`), busy all
    the time (`steady`) or in bursts (`bursty`)."""
    code = BURSTY if load == "bursty" else "while True:\n    pass"
    return [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL) for _ in range(k)]


def stop_stress(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ---- running -----------------------------------------------------------------------------


def record_of(result: Any, base: dict[str, Any], seconds: float) -> dict[str, Any]:
    flags = [f.code for f in result.flags]
    return {
        **base,
        "verdict": result.verdict.value,
        "reason": result.reason.value if result.reason is not None else None,
        "message": result.message[:400],
        "flags": flags,
        "device_contended": "device_contended" in flags,
        "speedups": {
            name: {
                "ratio": s.ratio,
                "ci_low": s.ci_low,
                "ci_high": s.ci_high,
                "floor": getattr(s, "floor_factor", 1.0),
                "blocks": len(getattr(s, "block_ratios", [])),
            }
            for name, s in result.speedups.items()
        },
        "seconds": round(seconds, 2),
        "phases": {k: round(v, 2) for k, v in getattr(result, "phase_seconds", {}).items()},
    }


def run(args: argparse.Namespace) -> bool:
    """Evaluate what the results file lacks; True when every (case, size, repeat) asked is there."""
    import torch

    from kernelwright.harness.options import EvalOptions
    from kernelwright.harness.session import EvalSession
    from kernelwright.problems import resolve_problem

    cases = honest_cases(args.device, args.policy)
    if args.only:
        wanted = [w for part in args.only for w in part.split(",") if w]
        cases = [c for c in cases if any(_matches(c.name, w) for w in wanted)]
    if args.list:
        for case in cases:
            print(f"{case.name}  ({case.problem})")
        return True
    if not cases:
        sys.exit("no case matches")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no GPU here")
    done = {key_of(r) for r in read_records(args.out)}
    host = torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or platform.machine()
    cache = args.cache_dir.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.max_minutes * 60 if args.max_minutes else None
    longest_eval, longest_open = 0.0, 0.0  # seconds, for the deadline
    stress = start_stress(args.stress, args.load)
    workers = timed_workers(args.device)
    here = condition({"stress": args.stress, "load": args.load, "workers": workers})
    complete = True
    try:
        for size in args.size:
            for case in cases:
                todo = [r for r in range(args.repeats) if (args.device, size, here, case.name, r) not in done]
                if not todo:
                    continue
                budget = longest_open + max(longest_eval, 20.0)
                if deadline is not None and time.monotonic() + budget > deadline:
                    complete = False
                    break
                opts = EvalOptions(
                    device=args.device,
                    size=size,
                    baselines=tuple(args.baselines.split(",")),
                    build_cache=cache / "build-cache",
                    inductor_cache=cache / "inductor",
                    policy=args.policy,
                )
                opened = time.monotonic()
                problem = resolve_problem(case.problem)
                with (
                    tempfile.TemporaryDirectory(prefix="kw-fr-") as tmp,
                    EvalSession(problem, opts, warm=True, spares=args.spares) as session,
                ):
                    # One copy of the file, evaluated again and again: what the agent does when it
                    # re-evaluates a kernel it has not changed (the build is cached after repeat 0).
                    copy = Path(tmp) / case.path.name
                    copy.write_text(case.path.read_text())
                    longest_open = max(longest_open, time.monotonic() - opened)
                    for repeat in todo:
                        if deadline is not None and time.monotonic() + max(longest_eval, 20.0) * 1.2 > deadline:
                            complete = False
                            break
                        base = {
                            "device": args.device,
                            "size": size,
                            "stress": args.stress,
                            "load": args.load if args.stress else "none",
                            "case": case.name,
                            "repeat": repeat,
                            "problem": problem.qualified,
                            "policy": args.policy,
                            "workers": workers,
                            "host": host,
                            "cpus": os.cpu_count(),
                            "torch": torch.__version__,
                            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        }
                        start = time.monotonic()
                        # the repeats still to come: with --spares N their workers start ahead
                        # (up to N at once, as memory allows), as a batch's do
                        session.coming = len(todo) - todo.index(repeat) - 1
                        try:
                            result = session.evaluate([copy])[0]
                            record = record_of(result, base, time.monotonic() - start)
                        except Exception as exc:  # an environment error: recorded, counted apart
                            record = {**base, "verdict": "error", "reason": None, "message": repr(exc)[:400]}
                            record.update(flags=[], device_contended=False, speedups={})
                            record["seconds"] = round(time.monotonic() - start, 2)
                        longest_eval = max(longest_eval, time.monotonic() - start)
                        with args.out.open("a") as out:
                            out.write(json.dumps(record) + "\n")
                        print(_line(record), flush=True)
                if not complete:
                    break
            if not complete:
                break
    finally:
        stop_stress(stress)
    return complete


def _line(record: dict[str, Any]) -> str:
    speed = ", ".join(
        f"{name} {s['ratio']:.2f}x [{s['ci_low']:.2f}, {s['ci_high']:.2f}]" for name, s in record["speedups"].items()
    )
    what = record["verdict"] + (f" ({record['reason']})" if record["reason"] else "")
    if record.get("flags"):
        what += " [" + ", ".join(dict.fromkeys(record["flags"])) + "]"
    return f"{record['size']:>7} s{condition(record)} {record['case']} #{record['repeat']}: {what} {speed} in {record['seconds']:.1f} s"


# ---- report ------------------------------------------------------------------------------


def _spread(records: list[dict[str, Any]], baseline: str) -> str:
    ratios = [r["speedups"][baseline] for r in records if baseline in r.get("speedups", {})]
    if not ratios:
        return "-"
    median = statistics.median(s["ratio"] for s in ratios)
    inside = sum(s["ci_low"] <= median <= s["ci_high"] for s in ratios)
    low, high = min(s["ratio"] for s in ratios), max(s["ratio"] for s in ratios)
    # the widest stated interval, as a relative half-width (the default size's target is within ±2%)
    widest = max(max(s["ci_high"] / s["ratio"] - 1.0, 1.0 - s["ci_low"] / s["ratio"]) for s in ratios if s["ratio"] > 0)
    floored = sum(s.get("floor", 1.0) > 1.0 for s in ratios)
    note = f", {floored} floored" if floored else ""
    return f"{median:.2f}x {inside}/{len(ratios)} in CI, {low:.2f}-{high:.2f}, widest ±{widest:.0%}{note}"


_DROPS_SPEEDUP = ("device_contended", "baselines_disagree", "speedup_not_reproduced")
_SECOND_LOOKS = (*_DROPS_SPEEDUP, "profiled_again", "profiled_at_one_thread", "baseline_wall_mismatch")


def _too_wide(record: dict[str, Any]) -> bool:
    """A recorded speedup whose interval spans more than `TRUSTED_SPREAD` (see `timing/stats.py`)."""
    return any(s["ci_high"] > TRUSTED_SPREAD * s["ci_low"] for s in record.get("speedups", {}).values())


def _no_speedup_flag(flags: list[str]) -> str:
    return next((f for f in _DROPS_SPEEDUP if f in flags), "other")


def report(records: list[dict[str, Any]]) -> None:
    latest: dict[tuple[str, str, str, str, int], dict[str, Any]] = {}
    for record in records:  # a key written twice (two runs at once): the later one counts
        latest[key_of(record)] = record
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for key, record in latest.items():
        groups[key[:3]].append(record)
    if not groups:
        print("no evaluations recorded")
        return
    for (device, size, stress), group in sorted(groups.items()):
        rejections = Counter(
            f"{r['verdict']}/{r['reason']}" if r["reason"] else r["verdict"]
            for r in group
            if r["verdict"] not in ("correct", "error")
        )
        errors = sum(r["verdict"] == "error" for r in group)
        contended = sum(bool(r.get("device_contended")) for r in group)
        hosts = ", ".join(sorted({str(r.get("host")) for r in group}))
        print(
            f"\n== device {device}, size {size}, stress {stress} ({hosts}): {len(group)} evaluations, "
            f"{sum(rejections.values())} false rejections, {contended} device_contended, {errors} harness errors"
        )
        for reason, count in rejections.most_common():
            print(f"   {count:4d}  {reason}")
        # the rules that compare timings and looked again (or withheld the speedup) instead of rejecting
        looks = Counter(flag for r in group for flag in dict.fromkeys(r.get("flags", [])) if flag in _SECOND_LOOKS)
        if looks:
            print(f"   second looks / withheld: {', '.join(f'{k} {v}' for k, v in sorted(looks.items()))}")
        # Records from before the interval rule (#28) carry the wide figures: how many it would withhold.
        wide = [r for r in group if _too_wide(r)]
        if wide:
            named = ", ".join(f"{r['case']} #{r['repeat']}" for r in wide)
            print(
                f"   interval over {TRUSTED_SPREAD:g}-fold reported (recorded before the rule; now device_contended): "
                f"{len(wide)} ({named})"
            )
        # `correct` with no speedup reported: device_contended, or another flag that dropped the figures
        unspeeded = [r for r in group if r["verdict"] == "correct" and not r.get("speedups")]
        if unspeeded:
            why = Counter(
                "device_contended" if r.get("device_contended") else _no_speedup_flag(r.get("flags", []))
                for r in unspeeded
            )
            print(f"   correct without a speedup: {len(unspeeded)} ({', '.join(f'{k} {v}' for k, v in why.items())})")
        by_case: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for record in group:
            by_case[record["case"]].append(record)
        width = max(len(c) for c in by_case)
        print(f"   {'case':<{width}}  runs  bad  cont  vs compile (median, intervals holding it, min-max)  vs eager")
        for case, rows in sorted(by_case.items()):
            bad = sum(r["verdict"] not in ("correct", "error") for r in rows)
            cont = sum(bool(r.get("device_contended")) for r in rows)
            spreads = "  ".join(f"{_spread(rows, b):<34}" for b in BASELINES)
            print(f"   {case:<{width}}  {len(rows):4d}  {bad:3d}  {cont:4d}  {spreads}".rstrip())
        for record in group:
            if record["verdict"] not in ("correct", "error"):
                print(
                    f"   ! {record['case']} #{record['repeat']}: {record['verdict']} ({record['reason']}): {record['message'][:300]}"
                )
            elif record["verdict"] == "error":
                print(f"   ? {record['case']} #{record['repeat']}: {record['message'][:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda if a GPU is here")
    parser.add_argument(
        "--size", action="append", choices=("small", "default"), help="repeatable; default: small and default"
    )
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--stress", type=int, default=0, help="CPU busy-loop processes beside the run")
    parser.add_argument(
        "--load",
        choices=("steady", "bursty"),
        default="steady",
        help="the stress processes busy all the time or in bursts",
    )
    parser.add_argument("--out", type=Path, default=RUNS / "results.jsonl", help="the results file (JSON lines)")
    parser.add_argument("--max-minutes", type=float, default=None, help="stop before an evaluation past this")
    parser.add_argument("--only", action="append", help="cases by path part or glob (comma-separated)")
    parser.add_argument("--baselines", default="eager,compile")
    parser.add_argument("--policy", default="strict", choices=("strict", "engineering"))
    parser.add_argument("--cache-dir", type=Path, default=RUNS / "cache", help="build and inductor caches")
    parser.add_argument(
        "--spares",
        type=int,
        default=1,
        help="candidate workers started ahead (a batch's look-ahead; default 1): with more, the next "
        "repeats' workers import torch and compile their baselines while this one is judged, and each "
        "timing still runs alone (the others are paused)",
    )
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--report", type=Path, default=None, help="print the table of this results file and exit")
    args = parser.parse_args()
    if args.report is not None:
        report(read_records(args.report))
        return
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.size = args.size or ["small", "default"]
    complete = run(args)
    if args.list:
        return
    here = condition({"stress": args.stress, "load": args.load, "workers": timed_workers(args.device)})
    wanted = {(args.device, s, here) for s in args.size}
    report([r for r in read_records(args.out) if key_of(r)[:3] in wanted])
    print(
        "\ncomplete" if complete else f"\nstopped at --max-minutes {args.max_minutes}: rerun the same command to go on"
    )


if __name__ == "__main__":
    main()
