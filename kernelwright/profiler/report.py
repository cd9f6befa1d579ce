"""A typed view of an Nsight Compute report: kernels, their metrics and NCU's rule results.

Only the data model and the unit normalisation both readers share. Reading a `.ncu-rep` file is in
`reader` (NVIDIA's `ncu_report` module) and `csv_fallback` (`ncu --import FILE --csv`), which both
build these types.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

from kernelwright.errors import UsageError

MetricScalar = float | str | None

# Units normalised on load, so a value reads the same from ncu_report and from CSV exports
# (which scale units for display: "usecond", "Mbyte", "Gbyte/second").
_SCALES: dict[str, tuple[str, float]] = {}
for _base, _prefixes in (
    ("second", {"n": 1.0, "u": 1e3, "m": 1e6, "": 1e9}),
    ("byte", {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}),
    ("byte/second", {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}),
    ("byte/block", {"": 1.0, "K": 1e3, "M": 1e6}),
):
    for _prefix, _factor in _prefixes.items():
        target = "nsecond" if _base == "second" else _base
        _SCALES[f"{_prefix}{_base}"] = (target, _factor)
for _short, _factor in (("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)):
    _SCALES[_short] = ("nsecond", _factor)  # the CSV export's short time units
for _prefix, _factor in (("", 1.0), ("K", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12)):
    _SCALES[f"{_prefix}byte/s"] = ("byte/second", _factor)


def normalize(value: MetricScalar, unit: str) -> tuple[MetricScalar, str]:
    """Scale time to nanoseconds and sizes to bytes (bytes/second)."""
    unit = unit or ""
    if isinstance(value, int | float) and unit in _SCALES:
        target, factor = _SCALES[unit]
        return float(value) * factor, target
    return value, unit


class Metric(BaseModel):
    value: MetricScalar
    unit: str = ""


class RuleResult(BaseModel):
    """One NCU guided-analysis finding."""

    rule: str
    section: str = ""
    title: str = ""
    message: str = ""
    type: str = ""  # OPTIMIZATION, WARNING, ERROR, OK, NONE
    speedup_pct: float | None = None  # NCU's estimated speedup, percent of the kernel's duration
    speedup_type: str | None = None  # global or local


class NcuKernel(BaseModel):
    """One profiled kernel launch."""

    index: int  # position in the report
    launch_id: int | None = None  # ncu's ID (launch order among profiled launches)
    name: str
    mangled: str | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    metrics: dict[str, Metric] = {}
    rules: list[RuleResult] = []

    def value(self, name: str) -> float | None:
        """A numeric metric, or None when the report lacks it (or it is not a number)."""
        metric = self.metrics.get(name)
        if metric is None or isinstance(metric.value, str) or metric.value is None:
            return None
        return float(metric.value)

    def text(self, name: str) -> str | None:
        metric = self.metrics.get(name)
        return None if metric is None or metric.value is None else str(metric.value)

    def matching(self, pattern: str) -> dict[str, float]:
        """Every numeric metric whose name matches `pattern` (a regex, full match)."""
        rx = re.compile(pattern)
        return {k: v for k in self.metrics if rx.fullmatch(k) and (v := self.value(k)) is not None}

    @property
    def duration_ns(self) -> float | None:
        return self.value("gpu__time_duration.sum")


class NcuReport(BaseModel):
    path: str | None = None
    source: Literal["ncu_report", "csv"] = "ncu_report"
    kernels: list[NcuKernel] = []

    def select(self, kernel_regex: str | None = None) -> list[NcuKernel]:
        """Kernels whose (demangled or mangled) name matches the regex (search, not full match)."""
        if not kernel_regex:
            return list(self.kernels)
        try:
            rx = re.compile(kernel_regex)
        except re.error as exc:
            raise UsageError(f"bad --kernel regex {kernel_regex!r}: {exc}") from exc
        return [k for k in self.kernels if rx.search(k.name) or (k.mangled and rx.search(k.mangled))]
