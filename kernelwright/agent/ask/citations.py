"""Citations in an answer, checked against the report they name.

An answer cites each metric it rests on as `[[NAME = VALUE UNIT @ REF]]`, the form the tools
print (the system prompt says so):

    [[dram__bytes_read.sum = 268435456 byte @ candidate:0]]
    [[gpu__time_duration.sum = 12.35 usecond @ baseline]]      (any time/size unit; converted)
    [[sm__throughput.avg.pct_of_peak_sustained_elapsed = 83.4 % @ 2]]
    [[device__attribute_display_name = "NVIDIA H100 80GB HBM3"]]

REF is a report label (`report`, `baseline`, `candidate`), optionally with `:INDEX` of a kernel in
it, or a bare index in the first report; without it, the first report's kernel in focus. A cited
value matches when it equals the report's to within the precision it is written with (half a unit
of its last digit) or 0.5 %, after converting time and size units the way the report does.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

from kernelwright.agent.ask.reports import RefError, ReportSet
from kernelwright.profiler.formatting import size
from kernelwright.profiler.report import normalize
from kernelwright.profiler.report_query import format_value

Status = Literal["ok", "value_mismatch", "unit_mismatch", "unknown_metric", "unknown_kernel", "malformed"]
REL_TOLERANCE = 0.005

CITATION = re.compile(r"\[\[(?P<body>[^\[\]\n]{1,400}?)\]\]")
_BODY = re.compile(
    r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_.:]*)\s*=\s*"
    r"(?P<value>\"[^\"]*\"|[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"\s*(?P<unit>[^@]*?)\s*(?:@\s*(?P<ref>[A-Za-z0-9_:]+))?\s*$"
)
# Units as people write them -> the spelling `profiler.report.normalize` scales.
_UNIT_ALIASES = {
    "us": "usecond",
    "µs": "usecond",
    "μs": "usecond",
    "microseconds": "usecond",
    "ns": "nsecond",
    "nanoseconds": "nsecond",
    "ms": "msecond",
    "milliseconds": "msecond",
    "seconds": "second",
    "b": "byte",
    "bytes": "byte",
    "kb": "Kbyte",
    "mb": "Mbyte",
    "gb": "Gbyte",
    "tb": "Tbyte",
    "b/s": "byte/second",
    "kb/s": "Kbyte/second",
    "mb/s": "Mbyte/second",
    "gb/s": "Gbyte/second",
    "tb/s": "Tbyte/second",
    "percent": "%",
    "pct": "%",
}


class Citation(BaseModel):
    text: str  # as written, brackets included
    metric: str = ""
    value: str = ""
    unit: str = ""
    ref: str = ""  # the kernel it was checked against, e.g. candidate:0
    status: Status
    report_value: str | None = None  # what the report says, in its own unit
    report_unit: str | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _unit_key(unit: str) -> str:
    """Compare units without case or plural: `cycles` is `cycle`, `Inst` is `inst`."""
    parts = unit.strip().lower().split("/")
    return "/".join(p[:-1] if len(p) > 2 and p.endswith("s") else p for p in parts)


def _scaled(value: float, unit: str) -> tuple[float, str]:
    spelled = _UNIT_ALIASES.get(unit.strip().lower(), unit.strip())
    scaled, to = normalize(value, spelled)
    assert isinstance(scaled, float)
    return scaled, to


def _half_ulp(text: str) -> float:
    """Half a unit of the last digit written: `83.4` -> 0.05, `1.2e8` -> 5e6, `268` -> 0.5."""
    mantissa, _, exponent = text.replace(",", "").lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (-decimals + (int(exponent) if exponent else 0))


def _readable(value: float, unit: str) -> str:
    """`67114496 byte (67.1 MB)`: the report's value, and in everyday units where they differ."""
    text = f"{format_value(value)} {unit}".rstrip()
    if unit == "byte" and abs(value) >= 1e3:
        return f"{text} ({size(value)})"
    if unit == "nsecond" and abs(value) >= 1e3:
        return f"{text} ({value / 1e3:.4g} us)"
    return text


def _check_number(c: Citation, actual: float, actual_unit: str) -> Citation:
    number = float(c.value.replace(",", ""))
    cited, cited_unit = _scaled(number, c.unit)
    if _unit_key(cited_unit) != _unit_key(actual_unit):
        c.status = "unit_mismatch"
        c.note = f"the report's unit is {actual_unit or '(none)'}, not {c.unit or '(none)'}"
        return c
    factor = cited / number if number else _scaled(1.0, c.unit)[0]
    tolerance = max(_half_ulp(c.value) * abs(factor), REL_TOLERANCE * abs(actual), 1e-12)
    if abs(cited - actual) > tolerance:
        c.status = "value_mismatch"
        c.note = f"the report says {_readable(actual, actual_unit)}"
        return c
    c.status = "ok"
    return c


def check_one(text: str, reports: ReportSet) -> Citation:
    body = text[2:-2]
    match = _BODY.match(body)
    if match is None or not (match.group("value").startswith('"') or re.search(r"\d", match.group("value"))):
        return Citation(text=text, status="malformed", note="write [[NAME = VALUE UNIT @ REF]]")
    c = Citation(
        text=text,
        metric=match.group("name"),
        value=match.group("value"),
        unit=match.group("unit").strip(),
        status="malformed",
    )
    try:
        report, kernel = reports.resolve(match.group("ref"))
    except RefError as exc:
        c.status, c.note = "unknown_kernel", str(exc)
        return c
    c.ref = report.ref(kernel)
    metric = kernel.metrics.get(c.metric)
    if metric is None or metric.value is None:
        c.status = "unknown_metric"
        c.note = f"{c.ref} ({kernel.name[:60]}) has no value for {c.metric}"
        return c
    c.report_value, c.report_unit = format_value(metric.value), metric.unit
    if c.value.startswith('"'):
        same = " ".join(c.value.strip('"').split()).lower() == " ".join(str(metric.value).split()).lower()
        c.status = "ok" if same else "value_mismatch"
        c.note = "" if same else f"the report says {format_value(metric.value)}"
        return c
    if isinstance(metric.value, str):
        c.status, c.note = "value_mismatch", f"the report's value is text: {format_value(metric.value)}"
        return c
    return _check_number(c, float(metric.value), metric.unit)


def check_citations(answer: str, reports: ReportSet) -> list[Citation]:
    """Every `[[...]]` citation in the answer, in order, each checked against its report."""
    return [check_one(m.group(0), reports) for m in CITATION.finditer(answer)]


def mark(answer: str, citations: list[Citation]) -> str:
    """The answer with a mark after each citation that does not match the report."""
    out, pos = [], 0
    wrong = iter(citations)
    for m in CITATION.finditer(answer):
        c = next(wrong)
        out.append(answer[pos : m.end()])
        if not c.ok:
            out.append(f" [✗ {c.status.replace('_', ' ')}: {c.note}]" if c.note else f" [✗ {c.status}]")
        pos = m.end()
    out.append(answer[pos:])
    return "".join(out)
