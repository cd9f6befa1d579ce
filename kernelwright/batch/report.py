"""The batch report: `OUT/report.json`, `OUT/report.md` and the PNG plots, from results.jsonl
and batch.json alone (so `batch report DIR` can rebuild it at any time).

Definitions (KernelBench's fast_p, stated here because the numbers depend on them):
- The set is every problem the batch was given, malformed problem files included; a problem with
  no result (no candidate, an error, not reached yet) counts as failed.
- fast_p(baseline) = the share of problems of the set that have a correct candidate whose speedup
  over that baseline (ratio of medians, measured in the same run on the same device) is > p. With
  several samples per problem, any sample may be the one (the best of the samples). fast_0 is the
  correctness rate by problem: a correct candidate counts there even when timing was off.
- Geometric-mean speedup: over the correct candidates timed against that baseline.
Speedups are never read from another machine's file: `--compare-baselines FILE` only shows the
published baseline times beside the ones measured here.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

from kernelwright.batch.markdown import render_markdown
from kernelwright.batch.metrics import THRESHOLDS, fast_p, geomean
from kernelwright.batch.plots import plot_fast_p, plot_speedups
from kernelwright.batch.results import MANIFEST_FILE, RESULTS_FILE, BatchRecord, Manifest, latest, read_records
from kernelwright.errors import UsageError

REPORT_SCHEMA_VERSION = 1
PRIMARY_BASELINES = ("eager", "compile")


def load_published(path: Path) -> dict[str, float]:
    """Published baseline times (ms) by `levelN/<stem>`: KernelBench's format
    `{"level1": {"19_ReLU.py": {"mean": 0.03, ...}}}` or a flat `{"level1/19_ReLU": 0.03}`."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"--compare-baselines {path}: not a readable JSON file: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"--compare-baselines {path}: expected a JSON object")
    times: dict[str, float] = {}
    for level, entries in data.items():
        if isinstance(entries, dict):
            for name, figures in entries.items():
                value = figures.get("mean") if isinstance(figures, dict) else figures
                if isinstance(value, (int, float)):
                    times[f"{level}/{str(name).removesuffix('.py')}".lower()] = float(value)
        elif isinstance(entries, (int, float)):
            times[str(level).removesuffix(".py").lower()] = float(entries)
    if not times:
        raise UsageError(f"--compare-baselines {path}: no baseline times found (KernelBench's baseline_time_*.json?)")
    return times


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _best(records: list[BatchRecord], baseline: str) -> float | None:
    ratios = [r.speedups[baseline].ratio for r in records if r.correct and baseline in r.speedups]
    return max(ratios) if ratios else None


def _row(problem: dict[str, Any], records: list[BatchRecord], published: dict[str, float] | None) -> dict[str, Any]:
    correct = [r for r in records if r.correct]
    shown = (
        max(correct, key=lambda r: max((s.ratio for s in r.speedups.values()), default=0.0))
        if correct
        else (records[0] if records else None)
    )
    ours = _median([r.times_ms["eager"] for r in records if "eager" in r.times_ms])
    row: dict[str, Any] = {
        "problem": problem["qualified"],
        "level": problem.get("level"),
        "id": problem.get("id"),
        "candidates": sum(1 for r in records if r.kind == "candidate"),
        "correct": len(correct),
        "verdict": shown.verdict if shown else None,
        "reason": shown.reason if shown else None,
        "message": shown.message[:200] if shown and not shown.correct else "",
        "best": {b: _best(records, b) for b in {n for r in records for n in r.speedups}},
        "eager_ms": ours,
        "seconds": sum(r.seconds for r in records),
        "cost_usd": sum(r.cost_usd for r in records),
        "run_id": shown.run_id if shown else None,
        "stop_reason": shown.stop_reason if shown else None,
    }
    if published is not None:
        theirs = published.get(problem["qualified"].lower())
        row["published_eager_ms"] = theirs
        row["ours_over_published"] = ours / theirs if ours is not None and theirs else None
    return row


def build_report(out: Path, compare_baselines: Path | None = None) -> dict[str, Any]:
    """report.json's content, from the batch folder."""
    manifest = Manifest.load(out)
    if manifest is None:
        raise UsageError(
            f"{out} is not a batch folder (no {MANIFEST_FILE})", hint="the --out of `batch judge/optimize`"
        )
    published = load_published(compare_baselines) if compare_baselines else None
    last = latest(read_records(out / RESULTS_FILE))
    names = {p["qualified"] for p in manifest.problems}
    by_problem: dict[str, list[BatchRecord]] = {}
    for record in last.values():
        if record.problem in names:
            by_problem.setdefault(record.problem, []).append(record)
    for records in by_problem.values():
        records.sort(key=lambda r: (r.sample if r.sample is not None else -1, r.candidate or ""))
    total = len(manifest.problems) + len(manifest.problem_errors)
    records = [r for rs in by_problem.values() for r in rs]
    candidates = [r for r in records if r.kind in ("candidate", "optimize")]
    measured = sorted({n for r in records for n in r.speedups} | {b for b in PRIMARY_BASELINES if _timed(manifest, b)})
    per_problem = {name: (any(r.correct for r in rs), rs) for name, rs in by_problem.items()}
    fast: dict[str, dict[str, float] | None] = {}
    geo: dict[str, dict[str, Any]] = {}
    for baseline in sorted({*PRIMARY_BASELINES, *measured}):
        if baseline not in measured:
            fast[baseline] = None
            continue
        best = [(ok, _best(rs, baseline)) for ok, rs in per_problem.values()]
        fast[baseline] = {f"{p:g}": fast_p(best, total, p) for p in THRESHOLDS}
        ratios = [r.speedups[baseline].ratio for r in records if r.correct and baseline in r.speedups]
        geo[baseline] = {"value": geomean(ratios), "n": len(ratios)}
    reasons = Counter(r.reason or r.verdict or "unknown" for r in records if not r.correct)
    phases: Counter[str] = Counter()
    for r in records:  # `build` is worker_start + load: left out so the phases add up
        phases.update({k: v for k, v in r.phases.items() if k != "build"})
    rows = [_row(p, by_problem.get(p["qualified"], []), published) for p in manifest.problems]
    correct_problems = sum(1 for ok, _ in per_problem.values() if ok)
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "mode": manifest.mode,
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "out": str(out),
        "judged_with": manifest.judged_with,
        "problems_total": total,
        "problems_with_results": len(by_problem),
        "results": len(candidates),
        "correctness": {
            "problems": correct_problems / total if total else 0.0,
            "correct_problems": correct_problems,
            "results": sum(1 for r in candidates if r.correct) / len(candidates) if candidates else 0.0,
            "correct_results": sum(1 for r in candidates if r.correct),
        },
        "fast_p": fast,
        "geomean_speedup": geo,
        "verdicts": dict(Counter(r.verdict or r.kind for r in records).most_common()),
        "reasons": dict(reasons.most_common()),
        "time": {
            "wall_s": sum(float(i.get("seconds", 0.0)) for i in manifest.invocations),
            "invocations": len(manifest.invocations),
            "judging_s": sum(r.seconds for r in records),
            "phases_s": dict(phases.most_common()),
        },
        "cost": {"usd": sum(r.cost_usd for r in records), "tokens": sum(r.tokens for r in records)},
        "hardware": sorted({r.hardware for r in records if r.hardware}),
        "problems": rows,
        "unmatched_candidates": manifest.unmatched,
        "problem_errors": manifest.problem_errors,
        "published_baselines": str(compare_baselines) if compare_baselines else None,
    }


def _timed(manifest: Manifest, baseline: str) -> bool:
    judged = manifest.judged_with
    return bool(judged.get("timing")) and baseline in (judged.get("baselines") or [])


def speedup_values(out: Path) -> dict[str, list[float]]:
    """Every correct result's speedup per baseline (what the distribution plots show)."""
    values: dict[str, list[float]] = {}
    for record in latest(read_records(out / RESULTS_FILE)).values():
        if record.correct:
            for name, figure in record.speedups.items():
                values.setdefault(name, []).append(figure.ratio)
    return values


def write_report(out: Path, compare_baselines: Path | None = None) -> Path:
    """report.json, report.md and plots/*.png in `out`; returns report.md's path."""
    report = build_report(out, compare_baselines)
    plots_dir = out / "plots"
    plots: dict[str, Any] = {}
    if any(v is not None for v in report["fast_p"].values()):
        best = _best_per_problem(report)
        plots["fast_p"] = plot_fast_p(best, report["problems_total"], plots_dir / "fast_p.png")
    for baseline, values in sorted(speedup_values(out).items()):
        plots[f"speedup_{baseline}"] = plot_speedups(baseline, values, plots_dir / f"speedup_{baseline}.png")
    for entry in plots.values():
        entry["file"] = str(Path(entry["file"]).relative_to(out))
    report["plots"] = plots
    tmp = out / "report.json.tmp"
    tmp.write_text(json.dumps(report, indent=1))
    tmp.replace(out / "report.json")
    md = out / "report.md"
    md.write_text(render_markdown(report))
    return md


def _best_per_problem(report: dict[str, Any]) -> dict[str, list[tuple[bool, float | None]]]:
    """Per timed baseline: each problem's (correct, best speedup), as fast_p counts them."""
    return {
        baseline: [(row["correct"] > 0, row["best"].get(baseline)) for row in report["problems"]]
        for baseline, figures in report["fast_p"].items()
        if figures is not None
    }
