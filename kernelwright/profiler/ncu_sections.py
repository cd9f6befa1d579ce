"""Which Nsight Compute section a question needs, whether a report has it, and the `ncu` command
that would collect it.

A report read with `ncu_report` lists its sections (`report_details`); one read through
`ncu --import` does not, so the sections are also recognised by metrics only they collect. When a
report lacks what a question needs, the answer names the section and the command: the report's
sections plus the missing one, for the same kernel, one launch.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import Path

from kernelwright.problems.candidate.kernel_names import base_name
from kernelwright.profiler.report import NcuKernel
from kernelwright.profiler.runner import DEFAULT_SECTIONS, SOURCE_SECTION, NcuOptions, build_command

# Metrics only that section collects (any one present means it was collected).
MARKERS: dict[str, tuple[str, ...]] = {
    "SpeedOfLight": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "LaunchStats": ("launch__grid_size", "launch__registers_per_thread"),
    "Occupancy": ("sm__maximum_warps_per_active_cycle_pct", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    "ComputeWorkloadAnalysis": ("sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",),
    "MemoryWorkloadAnalysis": ("l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct"),
    "SchedulerStats": ("smsp__issue_active.avg.pct_of_peak_sustained_active",),
    "WarpStateStats": (
        "smsp__average_warp_latency_per_inst_issued.ratio",
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    ),
    SOURCE_SECTION: ("smsp__pcsamp_sample_count", "group:smsp__pcsamp_warp_stall_reasons"),
}

# What each section answers, for a metric name (regex search) or a topic word a model asks about.
TOPICS: tuple[tuple[str, str], ...] = (
    (r"stall|warp_latency|warps_issue_stalled|scoreboard|throttle", "WarpStateStats"),
    (r"pcsamp|source|sass|hotspot|line", SOURCE_SECTION),
    (r"occupancy|warps_active|maximum_warps|achieved_occupancy", "Occupancy"),
    (r"^launch__|registers|grid|block_size|waves", "LaunchStats"),
    (r"issue_active|warps_eligible|scheduler|issued", "SchedulerStats"),
    (r"^l1tex__|^lts__|^dram__|hit_rate|bank_conflict|memory", "MemoryWorkloadAnalysis"),
    (r"pipe|inst_executed|ipc|tensor", "ComputeWorkloadAnalysis"),
    (r"throughput|pct_of_peak|speed.?of.?light|sol", "SpeedOfLight"),
)

WHAT = {
    "SpeedOfLight": "throughput of SM and memory as % of peak",
    "LaunchStats": "grid, block, registers, shared memory, waves",
    "Occupancy": "theoretical and achieved occupancy and what limits it",
    "ComputeWorkloadAnalysis": "pipe utilisation, IPC",
    "MemoryWorkloadAnalysis": "cache hit rates, memory traffic, bank conflicts",
    "SchedulerStats": "issue slots, eligible warps",
    "WarpStateStats": "warp stall reasons (why warps wait)",
    SOURCE_SECTION: "per-line and per-SASS-instruction samples and counters (build with -lineinfo)",
}
PROGRAM = "<your program and its arguments>"
_PSEUDO = re.compile(r"^section\d+$")


def sections_present(kernel: NcuKernel, listed: Iterable[str] | None = None) -> set[str]:
    """The sections a kernel was profiled with: the report's own list when known (ncu_report),
    else those whose marker metrics are present."""
    found = {s for s in listed or () if s}
    for section, markers in MARKERS.items():
        if any(m in kernel.metrics for m in markers):
            found.add(section)
    return found


def section_for(text: str) -> str | None:
    """The section that collects a metric (or answers a topic word), or None when unknown."""
    lowered = text.lower()
    for pattern, section in TOPICS:
        if re.search(pattern, lowered):
            return section
    return None


def collect_command(kernel: NcuKernel, present: Iterable[str], add: str, *, out: str | None = None) -> str:
    """The ncu command that profiles the same kernel (one launch) with the report's sections plus `add`."""
    present = set(present)
    sections = [s for s in DEFAULT_SECTIONS if s in present or s == add]
    # Other sections the report has, minus ncu's pseudo-section of command-line metrics ("section0").
    sections += sorted(s for s in present if s not in sections and s != SOURCE_SECTION and not _PSEUDO.match(s))
    name = base_name(kernel.name) or kernel.name
    options = NcuOptions(
        sections=tuple(s for s in sections if s != SOURCE_SECTION),
        source_counters=add == SOURCE_SECTION or SOURCE_SECTION in present,
        kernel_regex=re.escape(name),
        launch_count=1,
        extra_metrics=(),
    )
    report = out or f"{name}_{add.lower()}"
    cmd = build_command([PROGRAM], Path(report), options)
    return " ".join(shlex.quote(part) if part != PROGRAM else part for part in cmd)


def missing_note(kernel: NcuKernel, present: Iterable[str], section: str) -> str:
    """One paragraph: the report lacks `section`, what it would show, and how to collect it."""
    present = set(present)
    what = WHAT.get(section, "")
    note = f"this report has no {section} section" + (f" ({what})" if what else "")
    note += f"; collect it with: {collect_command(kernel, present, section)}"
    if section == SOURCE_SECTION:
        note += " (compile the kernel with -lineinfo so samples map to source lines)"
    return note
