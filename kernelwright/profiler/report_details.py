"""What an `NcuReport` does not keep, read on demand: which sections each kernel was profiled
with, every metric's description, and source/SASS hotspots where SourceCounters were collected.

Only NVIDIA's `ncu_report` module gives these, and it runs in a child process for the same reason
as `reader` (some versions crash on some metrics). A report read through `ncu --import` (no
module) has no details: `load_details` then says so instead of failing, and callers fall back to
what the metrics show (`ncu_sections.sections_present`).

Hotspots: per PC, the warp samples (`smsp__pcsamp_*`) and per-instruction counters of the
SourceCounters section, with the SASS instruction and, for `-lineinfo` builds, the source line;
lines sum their PCs. PCs are offsets from the kernel's lowest sampled PC, so they are stable
across runs.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kernelwright.profiler.reader import ncu_report_available

log = logging.getLogger(__name__)

CHILD_TIMEOUT_S = 300.0
TOP_PCS = 12
TOP_LINES = 10
LINE_CHARS = 160
SAMPLES = "smsp__pcsamp_sample_count"
_STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
# Per-instruction counters worth showing beside the samples (SourceCounters, when present).
PC_COUNTERS = (
    "inst_executed",
    "memory_l1_wavefronts_shared",
    "memory_l1_wavefronts_shared_ideal",
    "derived__memory_l1_wavefronts_shared_excessive",
    "memory_l2_theoretical_sectors_global",
    "memory_l2_theoretical_sectors_global_ideal",
    "derived__memory_l2_theoretical_sectors_global_excessive",
)


class SectionRef(BaseModel):
    identifier: str  # e.g. WarpStateStats
    name: str  # e.g. Warp State Statistics


class PcHotspot(BaseModel):
    offset: int  # bytes from the kernel's lowest sampled PC
    sass: str
    file: str | None = None
    line: int | None = None
    samples: float = 0.0
    stalls: list[tuple[str, float]] = []  # largest first
    counters: dict[str, float] = {}


class LineHotspot(BaseModel):
    file: str
    line: int
    text: str | None = None  # the source line, where the report embeds the file or it lies beside it
    samples: float = 0.0
    stalls: list[tuple[str, float]] = []
    counters: dict[str, float] = {}


class KernelDetails(BaseModel):
    index: int  # the kernel's position in the report, as in NcuReport.kernels
    sections: list[SectionRef] = []
    source_counters: bool = False  # per-instruction data present
    total_samples: float = 0.0
    pcs: list[PcHotspot] = []
    lines: list[LineHotspot] = []


class ReportDetails(BaseModel):
    available: bool
    note: str = ""  # why details are missing, when they are
    kernels: list[KernelDetails] = []
    descriptions: dict[str, str] = {}

    def kernel(self, index: int) -> KernelDetails | None:
        return next((k for k in self.kernels if k.index == index), None)


def _instances(action: Any, name: str) -> dict[int, float]:
    """pc -> value of an instanced (per-PC) metric; empty when the report lacks it."""
    metric = action.metric_by_name(name)
    if metric is None or not metric.has_correlation_ids():
        return {}
    ids = metric.correlation_ids()
    count = metric.num_instances()
    if ids is None or ids.num_instances() != count:
        return {}
    return {int(ids.as_uint64(i)): float(metric.as_double(i)) for i in range(count)}


def _source_text(files: dict[str, str], report: Path, name: str, line: int) -> str | None:
    """The line's text: from the report's embedded copy, else a file of that name beside the
    report (or in its src/ folder). Never from elsewhere on disk."""
    content = files.get(name) or ""
    if not content:
        base = Path(name).name
        for candidate in (report.parent / base, report.parent / "src" / base):
            if candidate.is_file():
                content = candidate.read_text(errors="replace")
                break
    rows = content.splitlines()
    if not 1 <= line <= len(rows):
        return None
    text = rows[line - 1].strip()
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"


def _top(values: dict[str, float]) -> list[tuple[str, float]]:
    found = [(k, v) for k, v in values.items() if v > 0]
    return sorted(found, key=lambda kv: kv[1], reverse=True)[:3]


def _hotspots(action: Any, report: Path, details: KernelDetails) -> None:
    samples = _instances(action, SAMPLES)
    counters = {name: _instances(action, name) for name in PC_COUNTERS}
    counters = {name: values for name, values in counters.items() if values}
    stalls: dict[str, dict[int, float]] = {}
    for name in action.metric_names():
        if name.startswith(_STALL_PREFIX) and not name.endswith("_not_issued"):
            values = _instances(action, name)
            if values:
                stalls[name.removeprefix(_STALL_PREFIX)] = values
    pcs = set(samples) | set(counters.get("inst_executed", {}))
    if not pcs:
        return
    details.source_counters = True
    details.total_samples = sum(samples.values())
    lowest = min(pcs)
    files = {str(k): str(v) for k, v in dict(action.source_files()).items()}
    rows: list[PcHotspot] = []
    for pc in pcs:
        info = action.source_info(pc)
        rows.append(
            PcHotspot(
                offset=pc - lowest,
                sass=" ".join(str(action.sass_by_pc(pc) or "").split()),
                file=info.file_name() if info is not None else None,
                line=int(info.line()) if info is not None else None,
                samples=samples.get(pc, 0.0),
                stalls=_top({reason: values.get(pc, 0.0) for reason, values in stalls.items()}),
                counters={name: values[pc] for name, values in counters.items() if values.get(pc)},
            )
        )
    key = "samples" if samples else "inst_executed"

    def weight(row: PcHotspot | LineHotspot) -> float:
        return row.samples if key == "samples" else row.counters.get("inst_executed", 0.0)

    by_line: dict[tuple[str, int], LineHotspot] = {}
    line_stalls: dict[tuple[str, int], dict[str, float]] = {}
    for row in rows:
        if row.file is None or row.line is None:
            continue
        spot = by_line.setdefault((row.file, row.line), LineHotspot(file=row.file, line=row.line))
        spot.samples += row.samples
        for name, value in row.counters.items():
            spot.counters[name] = spot.counters.get(name, 0.0) + value
        acc = line_stalls.setdefault((row.file, row.line), {})
        for reason, values in stalls.items():
            pc = row.offset + lowest
            acc[reason] = acc.get(reason, 0.0) + values.get(pc, 0.0)
    for where, spot in by_line.items():
        spot.stalls = _top(line_stalls[where])
    details.pcs = sorted(rows, key=weight, reverse=True)[:TOP_PCS]
    details.lines = sorted(by_line.values(), key=weight, reverse=True)[:TOP_LINES]
    for spot in details.lines:
        spot.text = _source_text(files, report, spot.file, spot.line)


def read_details(path: Path) -> ReportDetails:
    """Read with `ncu_report` in this process (the child's work; `load_details` is the safe entry)."""
    import ncu_report  # type: ignore[import-not-found]

    ctx = ncu_report.load_report(str(path))
    out = ReportDetails(available=True)
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            kernel = KernelDetails(
                index=len(out.kernels),
                sections=[SectionRef(identifier=s.identifier(), name=s.name()) for s in action.sections()],
            )
            for name in action.metric_names():
                if name in out.descriptions:
                    continue
                metric = action.metric_by_name(name)
                text = metric.description() if metric is not None else ""
                if text:
                    out.descriptions[name] = " ".join(str(text).split())
            _hotspots(action, path, kernel)
            out.kernels.append(kernel)
    return out


def load_details(path: Path | str, *, timeout_s: float = CHILD_TIMEOUT_S) -> ReportDetails:
    """Sections, descriptions and hotspots of a report, or (available=False) a note saying why not."""
    path = Path(path)
    if not ncu_report_available():
        return ReportDetails(
            available=False,
            note="NVIDIA's ncu_report module is not installed (pip install ncu-report), so metric descriptions, "
            "the report's section list and source/SASS hotspots cannot be read",
        )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kernelwright.profiler.report_details", str(path)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ReportDetails(available=False, note=f"reading details of {path.name} took over {timeout_s:g} s")
    if done.returncode != 0:
        log.warning("ncu_report failed reading details of %s (exit %s)", path, done.returncode)
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return ReportDetails(available=False, note=f"ncu_report failed reading details of {path.name}: {tail}")
    return ReportDetails.model_validate_json(done.stdout)


if __name__ == "__main__":  # the child: `python -m kernelwright.profiler.report_details FILE`
    print(read_details(Path(sys.argv[1])).model_dump_json())
