"""Every bundled oracle and adversarial case of the built-in suite, judged N times on one device
(not a test: a check before and after a change of the harness, on the CPU or on a GPU host).

For each problem with cases for the device, under each policy that some case expects, it runs
`kernelwright eval PROBLEM --bundled --adversarial --device D --policy P --json` (every case of the
problem in one session, as a user would) and compares each verdict and reason with the manifest.
It prints one line per run and a summary: runs, cases judged, cases not as expected (named, with
what they got: a flake shows as a case that is right in some runs and wrong in others).

    python scripts/check_bundled.py --device cpu --runs 3 [--json OUT.json]
    python scripts/check_bundled.py --device cuda --runs 3 --problems relu,softmax
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
from pathlib import Path

from kernelwright.problems.solutions_index import bundled_solutions

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "kernelwright" / "problems" / "solutions" / "manifest.json"


def plan(device: str, only: set[str] | None) -> list[tuple[str, str, str, list[str] | None]]:
    """(problem, policy, size, cases) for every problem with cases for `device`: one run per policy
    and size some case is meant for. The plain group (strict, the device's usual size) judges every
    case written for no other policy or size; another group judges only the cases written for it
    (their expectations are stated for that policy and size, the others' for the plain one)."""
    problems = sorted({e["problem"] for e in json.loads(MANIFEST.read_text())})
    runs: list[tuple[str, str, str, list[str] | None]] = []
    for name in problems:
        if only and name not in only:
            continue
        entries = [
            e
            for suite in ("oracle", "adversarial")
            for e in bundled_solutions(name, suite)
            if (e.backend == "cpp") == (device == "cpu")
        ]
        if not entries:
            continue
        plain = "small" if device == "cpu" else "default"  # the CPU's default sizes take minutes per case
        groups: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
        for e in entries:
            groups[(e.policy or "strict", e.size or plain)].append(e.name)
        for (policy, size), names in sorted(groups.items()):
            runs.append((name, policy, size, None if (policy, size) == ("strict", plain) else sorted(names)))
    return runs


def judge_run(
    problem: str, policy: str, size: str, cases: list[str] | None, device: str, timeout_s: int
) -> tuple[int, list[dict], float]:
    files = {e.problem_file for s in ("oracle", "adversarial") for e in bundled_solutions(problem, s) if e.problem_file}
    reference = str(files.pop()) if files else problem
    cmd = [sys.executable, "-m", "kernelwright", "eval", reference, "--bundled", "--adversarial", "--device", device]
    cmd += ["--policy", policy, "--size", size, "--json"] + (["--only", ",".join(cases)] if cases else [])
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    seconds = time.perf_counter() - start
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = proc.stderr.strip().splitlines()[-3:]
        return proc.returncode, [{"case": "(run)", "ok": False, "got": f"exit {proc.returncode}: {tail}"}], seconds
    entries = {str(e.path): e for suite in ("oracle", "adversarial") for e in bundled_solutions(problem, suite)}
    rows = []
    for r in doc["results"]:
        e = entries.get(r["candidate"])
        if e is None:
            continue
        reason = r.get("reason")
        ok = r["verdict"] == e.expected if e.suite == "oracle" else e.accepts(r["verdict"], reason)
        case = str(e.path.relative_to(e.path.parents[1]))
        row = {"case": case, "ok": ok, "got": f"{r['verdict']}/{reason}", "expected": f"{e.expected}/{e.reason}"}
        if not ok:  # what the harness said, to tell a flake's cause
            row["message"] = str(r.get("message", ""))[:600]
            row["flags"] = [f.get("code") for f in r.get("flags", [])]
        rows.append(row)
    return proc.returncode, rows, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--problems", help="comma-separated problem names (default: every one with cases)")
    parser.add_argument("--sizes", help="comma-separated sizes (default: every size some case is meant for)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per eval call")
    parser.add_argument("--json", type=Path, help="write every run's rows here (rewritten after each eval call)")
    parser.add_argument("--first-run", type=int, default=1, help="number the runs from here (a check split in pieces)")
    args = parser.parse_args()
    only = set(args.problems.split(",")) if args.problems else None
    todo = plan(args.device, only)
    if args.sizes:  # a group left over from an earlier piece, without running the others again
        todo = [t for t in todo if t[2] in set(args.sizes.split(","))]
    record: list[dict] = []
    bad: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    judged = 0
    for run in range(args.first_run, args.first_run + args.runs):
        for problem, policy, size, cases in todo:
            code, rows, seconds = judge_run(problem, policy, size, cases, args.device, args.timeout)
            judged += len(rows)
            wrong = [r for r in rows if not r["ok"]]
            for r in wrong:
                bad[f"{problem}:{policy}:{r['case']}"][f"{r['got']} (expected {r.get('expected')})"] += 1
            print(
                f"run {run} {problem:16s} {policy:11s} {size:7s} exit {code} {len(rows):3d} cases "
                f"{len(wrong)} not as expected {seconds:6.1f} s",
                flush=True,
            )
            for r in wrong:
                print(f"    {r['case']}: got {r['got']}, expected {r.get('expected')}: {r.get('message')}", flush=True)
            record.append({"run": run, "problem": problem, "policy": policy, "size": size, "exit": code, "rows": rows})
            if args.json:  # after each call: a piece cut short by its time limit keeps what it did
                args.json.write_text(json.dumps(record, indent=1))
    print(
        f"\n{args.runs} runs, {judged} case evaluations, {sum(sum(c.values()) for c in bad.values())} not as expected"
    )
    for case, got in sorted(bad.items()):
        print(f"  {case}: " + "; ".join(f"{n}x {what}" for what, n in got.items()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
