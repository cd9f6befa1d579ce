#!/usr/bin/env python3
"""Benchmark (not a test): kernelwright on a host with several GPUs (issue #33).

    # one optimisation judging on every GPU: the same scripted run with the first GPU alone, then
    # with every visible one; which GPU judged which candidate, whether any two timing phases
    # overlapped on one GPU, candidates per minute
    PYTHONPATH=$PWD python3 scripts/bench_multi_gpu.py optimize [--rounds 2] [--width 4] [--out DIR]

    # batches: verdicts of two or more batch folders (bench_batch.py --out, `batch judge --out`)
    # compared candidate by candidate (a folder without results.jsonl is left out, and said so)
    PYTHONPATH=$PWD python3 scripts/bench_multi_gpu.py compare OUT1 OUT2 [OUT3 ...]

    # a laid-out folder (bench_batch.py --lay-out-in) judged through `batch judge`'s engine, on the
    # local per-GPU pool or with --ray ADDRESS, with a per-phase breakdown of where the time went
    PYTHONPATH=$PWD python3 scripts/bench_multi_gpu.py judge --candidates DIR --out OUT [--ray local] \
        [--device cuda] [--size default] [--workers N] [--json FILE]

`optimize` runs `kernelwright optimize relu --scripted relu-cuda-wide --device cuda --ideas 1
--width W --rounds R --size default` twice, each in a fresh KERNELWRIGHT_HOME (cold builds and
a cold torch.compile cache both times): first with CUDA_VISIBLE_DEVICES set to the first visible
GPU, then with every visible GPU, without Nsight Compute (KERNELWRIGHT_NCU pointed at nothing:
profiling the best candidates would add the same minutes to both runs). The scripted coder
answers at once, so a run's time is its evaluations'. Per run it prints the wall time, the `evaluate` steps' seconds (from the run's
step_finished events), candidates per minute of evaluation, and each candidate's verdict. For
a run on several GPUs the evaluation pool's journal (`eval-devices/judged.jsonl`) says which GPU
judged each candidate, when, and the quiet phases (timing, work share, clean baselines) its
worker held: the script checks that no two quiet phases of one GPU overlap and says how long
the GPUs judged side by side. Both runs must judge the same candidates (by source hash) with the
same verdicts.

`judge` judges DIR (its problems and expected verdicts from DIR/expected.json) with `run_judge`,
as `batch judge` does, and prints one JSON document: the wall time; `startup_s` (batch start to
the first problem started: for Ray, `ray.init` and the first workers' start with their imports);
per worker, when it said ready and how many problems it judged; per problem (from the events),
its worker, when it started, `opening_s` (start to first result, less that first candidate's own
seconds: the reference run and its baselines prepared, unless opened ahead) and `judging_s`; the
harness's phases summed over the candidates; what was done ahead (bench_batch's breakdown); the
verdicts checked against the expected ones. The document is written (--json) as soon as the
batch ends, and the events as they come (--events FILE), so a call cut short keeps what it had.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return min(a[1], b[1]) - max(a[0], b[0])


def _visible_gpus() -> list[str]:
    listed = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    if listed:
        return listed
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def run_optimize(gpus: list[str], out: Path, rounds: int, width: int) -> dict[str, Any]:
    """One scripted optimisation on `gpus`; what it judged, where and how fast."""
    home, runs_dir = out / "home", out / "runs"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(gpus), "KERNELWRIGHT_HOME": str(home)}
    env["KERNELWRIGHT_NCU"] = str(out / "no-ncu")  # no Nsight Compute: the figure is judging, not profiling
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"
    argv = [sys.executable, "-m", "kernelwright", "--runs-dir", str(runs_dir), "optimize", "relu"]
    argv += ["--scripted", "relu-cuda-wide", "--device", "cuda", "--ideas", "1", "--width", str(width)]
    argv += ["--rounds", str(rounds), "--no-improvement", str(rounds), "--size", "default", "--no-memory"]
    start = time.monotonic()
    # its own process group, ended with everything it started if this script is stopped (a `timeout`
    # around it, Ctrl-C): an orphaned run would hold the GPUs the next step measures
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=560)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    wall = time.monotonic() - start
    (out / "optimize.log").write_text(stdout + "\n--- stderr ---\n" + stderr)
    run_dirs = sorted(p for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else []
    if not run_dirs:
        return {"gpus": gpus, "exit": proc.returncode, "error": stderr[-2000:]}
    run_dir = run_dirs[-1]
    trajectory = json.loads((run_dir / "trajectory.json").read_text())
    events = trajectory.get("events", [])
    evaluate_s = sum(e["seconds"] for e in events if e.get("kind") == "step_finished" and e.get("step") == "evaluate")
    verdicts = {}
    for e in events:
        if e.get("kind") == "candidate_evaluated":
            source = (run_dir / "candidates" / f"{e['index']:03d}.py").read_text()
            sha = hashlib.sha256(source.encode()).hexdigest()[:12]
            compile_x = (e.get("speedups") or {}).get("compile", {})
            verdicts[sha] = {
                "index": e["index"],
                "verdict": e["verdict"],
                "reason": e.get("reason"),
                "vs_compile": compile_x.get("ratio"),
            }
    report: dict[str, Any] = {
        "gpus": gpus,
        "exit": proc.returncode,
        "run_dir": str(run_dir),
        "wall_s": round(wall, 1),
        "evaluate_s": round(evaluate_s, 1),
        "candidates": len(verdicts),
        "candidates_per_min": round(60 * len(verdicts) / evaluate_s, 2) if evaluate_s else None,
        "verdicts": verdicts,
    }
    journal = run_dir / "eval-devices" / "judged.jsonl"
    if journal.is_file():
        judged = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
        report["judged"] = [
            {
                "index": j["index"],
                "device": j["device"],
                "seconds": round(j["end"] - j["start"], 1),
                "verdict": j["verdict"],
            }
            for j in judged
        ]
        quiet: dict[str, list[tuple[float, float]]] = {}
        spans: dict[str, list[tuple[float, float]]] = {}
        for j in judged:
            quiet.setdefault(j["device"], []).extend((float(a), float(b)) for a, b in j["quiet"])
            spans.setdefault(j["device"], []).append((j["start"], j["end"]))
        same_gpu_overlaps = [
            (device, a, b)
            for device, windows in quiet.items()
            for a, b in combinations(sorted(windows), 2)
            if _overlap(a, b) > 0
        ]
        side_by_side = sum(
            max(0.0, _overlap(a, b)) for d1, d2 in combinations(sorted(spans), 2) for a in spans[d1] for b in spans[d2]
        )
        report["per_device"] = {d: len(v) for d, v in spans.items()}
        report["quiet_phases"] = {d: len(v) for d, v in quiet.items()}
        report["quiet_overlaps_on_one_gpu"] = len(same_gpu_overlaps)
        report["judged_side_by_side_s"] = round(side_by_side, 1)
    return report


def optimize(args: argparse.Namespace) -> int:
    gpus = _visible_gpus()
    if not gpus:
        sys.exit("no GPU visible")
    out = args.out or Path(tempfile.mkdtemp(prefix="kw-multi-gpu-"))
    runs = []
    for chosen in ([gpus[0]], gpus) if len(gpus) > 1 else ([gpus[0]],):
        folder = out / f"gpus-{'-'.join(chosen)}"
        folder.mkdir(parents=True, exist_ok=True)
        print(f"optimize on GPU(s) {','.join(chosen)} ...", file=sys.stderr, flush=True)
        runs.append(run_optimize(chosen, folder, args.rounds, args.width))
        (out / "optimize.json").write_text(json.dumps({"runs": runs}, indent=2))  # kept if the next run is cut off
    same = len(runs) == 2 and {k: (v["verdict"], v["reason"]) for k, v in runs[0]["verdicts"].items()} == {
        k: (v["verdict"], v["reason"]) for k, v in runs[1]["verdicts"].items()
    }
    doc = {"runs": runs, "same_candidates_same_verdicts": same}
    if len(runs) == 2 and runs[0].get("candidates_per_min") and runs[1].get("candidates_per_min"):
        doc["throughput_ratio"] = round(runs[1]["candidates_per_min"] / runs[0]["candidates_per_min"], 2)
    text = json.dumps(doc, indent=2)
    print(text)
    (out / "optimize.json").write_text(text)
    return 0 if all(r.get("exit") in (0, 1) for r in runs) else 1


def _records(folder: Path) -> dict[tuple[str, str], tuple[str, str | None, str]]:
    """(problem, candidate) -> (verdict, reason, where) of a batch folder's results.jsonl."""
    from kernelwright.batch.results import read_records

    return {
        (r.problem, r.candidate): (str(r.verdict), r.reason, str(getattr(r, "worker", "") or ""))
        for r in read_records(folder / "results.jsonl")
        if r.kind == "candidate"
    }


def compare(args: argparse.Namespace) -> int:
    missing = [str(f) for f in args.folders if not (f / "results.jsonl").is_file()]
    folders = [f for f in args.folders if str(f) not in missing]
    if len(folders) < 2:
        print(json.dumps({"compared": [str(f) for f in folders], "missing": missing, "identical": None}))
        return 2
    tables = {str(f): _records(f) for f in folders}
    names = list(tables)
    first = tables[names[0]]
    differ = []
    for name in names[1:]:
        other = tables[name]
        for key in sorted(set(first) | set(other)):
            a, b = first.get(key), other.get(key)
            if a is None or b is None or a[:2] != b[:2]:
                differ.append({"candidate": key, names[0]: a[:2] if a else None, name: b[:2] if b else None})
    doc = {
        "folders": {n: len(t) for n, t in tables.items()},
        "missing": missing,
        "differences": differ,
        "identical": not differ,
    }
    print(json.dumps(doc, indent=2))
    return 0 if not differ else 1


def _seconds(ts: str, t0: dt.datetime) -> float:
    return round((dt.datetime.fromisoformat(ts) - t0).total_seconds(), 1)


def breakdown(events: list[dict[str, Any]], records: list[Any]) -> dict[str, Any]:
    """Where a batch's time went, from its events (`--events-json`'s) and its results lines."""
    started = next(e for e in events if e["kind"] == "batch_started")
    t0 = dt.datetime.fromisoformat(started["ts"])
    finished = next((e for e in events if e["kind"] == "batch_finished"), None)
    problems: dict[str, dict[str, Any]] = {}
    workers: dict[str, dict[str, Any]] = {}
    for e in events:
        if e["kind"] == "worker_status" and e["text"] == "ready":
            workers.setdefault(e["worker"], {"ready_s": _seconds(e["ts"], t0), "problems": 0})
        elif e["kind"] == "problem_started":
            problems[e["problem"]] = {"worker": e["worker"], "started_s": _seconds(e["ts"], t0), "results_s": []}
            workers.setdefault(e["worker"], {"ready_s": None, "problems": 0})["problems"] += 1
        elif e["kind"] == "result" and e["record"]["problem"] in problems:
            problems[e["record"]["problem"]]["results_s"].append(_seconds(e["ts"], t0))
    seconds = {(r.problem, r.candidate): r.seconds for r in records}
    order: dict[str, list[float]] = {}
    for r in records:  # the file's order is the order judged
        order.setdefault(r.problem, []).append(r.seconds)
    for name, p in problems.items():
        results = p.pop("results_s")
        if results:
            first_own = order.get(name, [0.0])[0]
            p["opening_s"] = round(max(0.0, results[0] - p["started_s"] - first_own), 1)
            p["judging_s"] = round(results[-1] - p["started_s"], 1)
            p["candidates"] = len(results)
    phases: Counter[str] = Counter()
    for r in records:
        phases.update({k: v for k, v in r.phases.items() if k != "build"})
    starts = [p["started_s"] for p in problems.values()]
    return {
        "wall_s": round(finished["seconds"], 1) if finished else None,
        "startup_s": min(starts) if starts else None,
        "workers": workers,
        "opening_s_sum": round(sum(p.get("opening_s", 0.0) for p in problems.values()), 1),
        "candidates_s_sum": round(sum(seconds.values()), 1),
        "phases_sum_s": {k: round(v, 1) for k, v in phases.most_common()},
        "problems": problems,
    }


def judge(args: argparse.Namespace) -> int:
    """`batch judge`'s engine over a laid-out folder, locally or on Ray, with the breakdown."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_batch import ahead_breakdown, read_manifest, verdict_matches  # type: ignore[import-not-found]

    from kernelwright.batch.events import BatchEvent
    from kernelwright.batch.judge_mode import run_judge
    from kernelwright.batch.results import read_records
    from kernelwright.batch.spec import JudgeSpec, Slot, plan_slots
    from kernelwright.config import load_settings

    entries = read_manifest(args.candidates / "expected.json")
    expected = {e["file"]: (e["expected"], e.get("reason")) for e in entries}
    problems = list(dict.fromkeys(e["problem"] for e in entries))
    spec = JudgeSpec.from_settings(
        load_settings(), args.device, size=args.size, baselines=args.baselines.split(","), timing=not args.no_timing
    )
    if args.ray:  # as `batch judge --ray` asks for them: on cuda, none means one actor per GPU Ray offers
        count = args.workers or (0 if args.device == "cuda" else 1)
        slots = [Slot(index=i, label=f"ray{i}") for i in range(count)]
    else:
        gpus = _visible_gpus() if args.device == "cuda" else None
        slots = plan_slots(args.device, workers=args.workers, gpus=gpus)
    events: list[dict[str, Any]] = []
    sink = open(args.events, "a") if args.events else None  # noqa: SIM115

    def listen(event: BatchEvent) -> None:
        doc = json.loads(event.model_dump_json())
        events.append(doc)
        if sink is not None:
            sink.write(json.dumps(doc) + "\n")
            sink.flush()
        if event.kind == "result":
            r = event.record
            print(
                f"[{event.done}/{event.to_do}] {r.worker} {r.problem} {r.candidate}: {r.verdict} "
                f"{r.reason or ''} {r.seconds:.1f} s",
                file=sys.stderr,
                flush=True,
            )

    start = time.monotonic()
    try:
        outcome = run_judge(problems, args.candidates, args.out, spec, slots, listen, ray_address=args.ray)
    finally:
        if sink is not None:
            sink.close()
    wall = time.monotonic() - start
    records = [r for r in read_records(args.out / "results.jsonl") if r.kind == "candidate"]
    mismatches = [
        {"candidate": r.candidate, "got": [r.verdict, r.reason], "expected": list(expected[r.candidate])}
        for r in records
        if r.candidate in expected and not verdict_matches(expected[r.candidate], (r.verdict, r.reason))
    ]
    report = json.loads((args.out / "report.json").read_text())
    doc: dict[str, Any] = {
        "backend": f"ray ({args.ray})" if args.ray else "local",
        "device": args.device,
        "hardware": report.get("hardware"),
        "wall_s_this_call": round(wall, 1),
        "candidates": len(records),
        "verdicts": report.get("verdicts"),
        "expected_mismatches": mismatches,
        "expected_not_judged": sorted(set(expected) - {r.candidate for r in records}),
        "exit_code": outcome.exit_code,
        "breakdown": breakdown(events, records),
        "ahead": ahead_breakdown(records),
    }
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))
    problems = doc["breakdown"].pop("problems")  # printed one line each, after the rest
    print(json.dumps(doc, indent=2))
    for name, p in problems.items():
        print(f"{name}: {json.dumps(p)}")
    return 0 if not mismatches else 1


def _stop(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through run_optimize's `finally`: its run is ended too


def main() -> int:
    signal.signal(signal.SIGTERM, _stop)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    o = sub.add_parser("optimize", help="one scripted optimisation on the first GPU, then on every GPU")
    o.add_argument("--rounds", type=int, default=2)
    o.add_argument("--width", type=int, default=4)
    o.add_argument("--out", type=Path, default=None)
    c = sub.add_parser("compare", help="the verdicts of batch folders, candidate by candidate")
    c.add_argument("folders", type=Path, nargs="+")
    j = sub.add_parser("judge", help="a laid-out folder judged by `batch judge`'s engine, with a breakdown")
    j.add_argument("--candidates", type=Path, required=True, help="a folder with its expected.json")
    j.add_argument("--out", type=Path, required=True)
    j.add_argument("--ray", default=None, metavar="ADDRESS", help="on Ray (`local`, `auto`, ...), else the local pool")
    j.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    j.add_argument("--size", choices=("default", "small"), default="default")
    j.add_argument("--baselines", default="eager,compile")
    j.add_argument("--no-timing", action="store_true")
    j.add_argument("--workers", type=int, default=None, help="local: as `batch judge`; Ray: at most this many")
    j.add_argument("--json", type=Path, default=None)
    j.add_argument("--events", type=Path, default=None, help="every event as a JSON line, as it comes")
    args = parser.parse_args()
    commands = {"optimize": optimize, "compare": compare, "judge": judge}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
