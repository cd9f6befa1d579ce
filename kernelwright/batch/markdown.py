"""report.md: the batch report (report.json's content) as Markdown a person reads."""

from __future__ import annotations

from typing import Any


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _ms(value: float | None) -> str:
    return f"{value:.4g}" if value is not None else "-"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |" for row in rows]
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    total = report["problems_total"]
    judged = report.get("judged_with") or {}
    how = ", ".join(f"{k} {v}" for k, v in judged.items())
    lines = [
        f"# Batch report ({report['mode']})",
        "",
        f"{total} problems in the set, {report['problems_with_results']} with results, {report['results']} results"
        + (f"; judged with {how}" if how else "")
        + (f"; hardware: {', '.join(report['hardware'])}" if report["hardware"] else "")
        + ".",
        "",
        "## Correctness",
        "",
        f"- problems with a correct result: {report['correctness']['correct_problems']}/{total} "
        f"({_pct(report['correctness']['problems'])}); a problem with no result counts as failed",
        f"- correct results: {report['correctness']['correct_results']}/{report['results']} "
        f"({_pct(report['correctness']['results'])})",
        "",
        "## fast_p",
        "",
        "Share of the set's problems with a correct result faster than p times the baseline (ratio of "
        "medians measured in this run on this device; the best sample of a problem counts).",
        "",
    ]
    baselines = sorted(report["fast_p"], key=lambda b: (b != "eager", b != "compile", b))
    thresholds = sorted({p for figures in report["fast_p"].values() if figures for p in figures}, key=float)
    rows = [
        [f"fast_{p}"]
        + [_pct(report["fast_p"][b][p]) if report["fast_p"][b] is not None else "not measured" for b in baselines]
        for p in thresholds
    ]
    lines += _table(["p", *[f"vs {b}" for b in baselines]], rows) if rows else ["No timed results."]
    lines += ["", "## Geometric-mean speedup (correct results)", ""]
    geo = report["geomean_speedup"]
    lines += (
        _table(["baseline", "geomean", "results"], [[b, _x(g["value"]), str(g["n"])] for b, g in geo.items()])
        if geo
        else ["No timed results."]
    )
    lines += ["", "## Verdicts and rejection reasons", ""]
    lines += _table(["verdict", "count"], [[k, str(v)] for k, v in report["verdicts"].items()])
    lines += [""]
    lines += (
        _table(["reason", "count"], [[k, str(v)] for k, v in report["reasons"].items()])
        if report["reasons"]
        else ["No rejections."]
    )
    time = report["time"]
    phases = ", ".join(f"{k} {v:.0f} s" for k, v in time["phases_s"].items())
    lines += [
        "",
        "## Time and cost",
        "",
        f"- wall time: {time['wall_s']:.0f} s over {time['invocations']} invocation(s)",
        f"- time spent judging (sum over results): {time['judging_s']:.0f} s" + (f" ({phases})" if phases else ""),
        f"- LLM cost: ${report['cost']['usd']:.2f}, {report['cost']['tokens']} tokens",
        "",
        "## Problems",
        "",
    ]
    lines += _problem_table(report)
    if report.get("plots"):
        lines += ["", "## Plots", ""]
        lines += [f"![{name}]({entry['file']})" for name, entry in report["plots"].items()]
    if report["unmatched_candidates"] or report["problem_errors"]:
        lines += ["", "## Not judged", ""]
        lines += [f"- candidate `{rel}`: {why}" for rel, why in report["unmatched_candidates"]]
        lines += [f"- problem file: {message}" for message in report["problem_errors"]]
    return "\n".join(lines) + "\n"


def _problem_table(report: dict[str, Any]) -> list[str]:
    published = report.get("published_baselines") is not None
    optimize = report["mode"] == "optimize"
    header = ["problem", "results", "correct", "verdict", "vs eager", "vs compile", "eager ms (here)"]
    if published:
        header += ["eager ms (published)", "here / published"]
    header += ["seconds"]
    if optimize:
        header += ["cost", "run", "stopped"]
    rows = []
    for row in report["problems"]:
        verdict = row["verdict"] or "no result"
        if row["reason"]:
            verdict += f" ({row['reason']})"
        cells = [
            row["problem"],
            str(row["candidates"]),
            str(row["correct"]),
            verdict,
            _x(row["best"].get("eager")),
            _x(row["best"].get("compile")),
            _ms(row["eager_ms"]),
        ]
        if published:
            cells += [_ms(row.get("published_eager_ms")), _x(row.get("ours_over_published"))]
        cells += [f"{row['seconds']:.1f}"]
        if optimize:
            cells += [f"${row['cost_usd']:.2f}", row["run_id"] or "-", row["stop_reason"] or "-"]
        rows.append(cells)
    lines = _table(header, rows)
    if published:
        lines += [
            "",
            f"Published times are from `{report['published_baselines']}`, measured elsewhere: shown for "
            "comparison only, never used for a speedup.",
        ]
    return lines
