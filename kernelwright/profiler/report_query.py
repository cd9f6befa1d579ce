"""Questions one asks of a report, answered from an `NcuReport`: which kernels ran and for how
long, which one a name or an index means, a metric by name or pattern (with its unit and, where
known, its description), and NCU's rule findings by estimated speedup.

Pure functions over the typed report (no ncu, no ncu_report): they work the same on a report read
with `ncu_report` and on one read through `ncu --import`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from kernelwright.errors import UsageError
from kernelwright.profiler.report import MetricScalar, NcuKernel, NcuReport, RuleResult

GPU_NAME = "device__attribute_display_name"


@dataclass(frozen=True)
class KernelTotal:
    """Every launch of one kernel (by demangled name)."""

    name: str
    launches: int
    total_ns: float
    indices: tuple[int, ...]


def totals(kernels: list[NcuKernel]) -> list[KernelTotal]:
    """Kernels by name, the most GPU time first."""
    by: dict[str, list[NcuKernel]] = {}
    for k in kernels:
        by.setdefault(k.name, []).append(k)
    rows = [
        KernelTotal(name, len(ks), sum(k.duration_ns or 0.0 for k in ks), tuple(k.index for k in ks))
        for name, ks in by.items()
    ]
    return sorted(rows, key=lambda r: r.total_ns, reverse=True)


def longest_running(kernels: list[NcuKernel]) -> NcuKernel:
    """The kernel with the most GPU time over all its launches, and of it the longest launch."""
    top = totals(kernels)[0]
    launches = [k for k in kernels if k.name == top.name]
    return max(launches, key=lambda k: k.duration_ns or 0.0)


def pick_kernel(report: NcuReport, selector: str | int | None, *, where: str = "the report") -> NcuKernel:
    """The kernel a selector means: None for the longest-running, an index (its position in the
    report), or a regex on the name (the longest-running of those that match). UsageError otherwise."""
    if not report.kernels:
        raise UsageError(f"{where} holds no profiled kernels")
    if selector is None or (isinstance(selector, str) and not selector.strip()):
        return longest_running(report.kernels)
    if isinstance(selector, int) or selector.strip().isdigit():
        index = int(selector)
        if not 0 <= index < len(report.kernels):
            last = len(report.kernels) - 1
            raise UsageError(f"no kernel {index} in {where}: it has {len(report.kernels)} (0-{last})")
        return report.kernels[index]
    matching = report.select(selector.strip())
    if not matching:
        names = ", ".join(t.name[:60] for t in totals(report.kernels)[:5])
        raise UsageError(f"no kernel in {where} matches {selector!r}", hint=f"kernels: {names}")
    return longest_running(matching)


def format_value(value: MetricScalar) -> str:
    """A metric value as tool results print it and citations quote it."""
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return f'"{value}"'
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


@dataclass(frozen=True)
class MetricMatch:
    name: str
    value: MetricScalar
    unit: str
    description: str | None


def _match(kernel: NcuKernel, name: str, descriptions: dict[str, str]) -> MetricMatch:
    metric = kernel.metrics[name]
    return MetricMatch(name, metric.value, metric.unit, descriptions.get(name))


def find_metrics(
    kernel: NcuKernel, query: str, descriptions: dict[str, str] | None = None, *, limit: int = 25
) -> tuple[list[MetricMatch], int]:
    """(the matches, up to `limit`; how many matched). An exact name gives that metric; else the
    query is a regex searched in names (case-insensitive), or, with spaces in it, words that must
    all appear in a name or its description."""
    descriptions = descriptions or {}
    query = query.strip()
    if query in kernel.metrics:
        return [_match(kernel, query, descriptions)], 1
    names = sorted(kernel.metrics)
    if " " in query:
        words = [w.lower() for w in query.split()]
        found = [n for n in names if all(w in f"{n} {descriptions.get(n, '')}".lower() for w in words)]
    else:
        try:
            rx = re.compile(query, re.IGNORECASE)
            found = [n for n in names if rx.search(n)]
        except re.error:
            found = [n for n in names if query.lower() in n.lower()]
    # Aggregates people mean first: .sum / .avg / .pct before .min / .max variants.
    found.sort(key=lambda n: (n.split(".")[-1] in ("min", "max") or ".min." in n or ".max." in n, n))
    return [_match(kernel, n, descriptions) for n in found[:limit]], len(found)


def similar_names(kernel: NcuKernel, query: str, count: int = 5) -> list[str]:
    return difflib.get_close_matches(query.strip(), list(kernel.metrics), n=count, cutoff=0.6)


def ranked_rules(kernel: NcuKernel) -> list[RuleResult]:
    """NCU's findings with something to say, the largest estimated speedup first."""
    rules = [r for r in kernel.rules if (r.message or r.title) and r.type not in ("NONE", "")]
    return sorted(rules, key=lambda r: r.speedup_pct if r.speedup_pct is not None else -1.0, reverse=True)


def gpu_name(kernel: NcuKernel) -> str | None:
    return kernel.text(GPU_NAME)
