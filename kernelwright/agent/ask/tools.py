"""The tools an `ask` model gets (LangChain tools over a `ReportSet`): the report's contents on
request, never all of it at once.

list_kernels(report)                     kernels and launches, the most GPU time first
kernel_digest(kernel, report)            the curated digest of one kernel, the metrics behind it, missing sections
metric(query, kernel, report)            metrics by exact name, regex or words, with unit and description
rule_findings(kernel, report)            NCU's own findings, the largest estimated speedup first
source_hotspots(kernel, report)          source lines and SASS instructions with the most warp samples
compare(a, b)                            the digest diff of two kernels (of two reports, or of one)
gpu_specs(question, gpu)                 a spec figure of the report's GPU (or a named one)

Every metric value is printed as a citation, `[[NAME = VALUE UNIT @ REF]]`, which the model copies
into its answer (see `citations`). A question the report cannot answer gets the missing section
and the `ncu` command that collects it. Every answer is text; a bad argument is text too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from kernelwright.agent.ask.reports import AskReport, RefError, ReportSet
from kernelwright.profiler import NcuKernel, build_digest
from kernelwright.profiler import diff as diff_digests
from kernelwright.profiler import metrics as m
from kernelwright.profiler.ncu_sections import SOURCE_SECTION, missing_note, section_for
from kernelwright.profiler.report_details import KernelDetails
from kernelwright.profiler.report_query import find_metrics, format_value, gpu_name, ranked_rules, similar_names, totals
from kernelwright.tools import specs
from kernelwright.tools.profile import roofline_peaks

LAUNCH_ROWS = 40
DESCRIPTION_CHARS = 140
RULE_CHARS = 500
# The metrics the digest reads, in its order: what a model cites for a digest's numbers.
DIGEST_METRICS: tuple[str, ...] = (
    m.DURATION,
    m.SOL_SM,
    m.SOL_MEMORY,
    *m.SOL_DRAM,
    m.SOL_L1,
    m.SOL_L2,
    m.DRAM_READ,
    m.DRAM_WRITE,
    m.GRID_SIZE,
    m.BLOCK_SIZE,
    m.REGISTERS,
    m.SMEM_STATIC,
    m.SMEM_DYNAMIC,
    m.WAVES,
    m.OCC_THEORETICAL,
    m.OCC_ACHIEVED,
    m.ISSUE_ACTIVE,
    m.ELIGIBLE_WARPS,
    m.IPC,
    m.L1_HIT,
    m.L2_HIT,
    *m.BANK_CONFLICTS,
)
WANTED = ("WarpStateStats", "SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats")


def cite(kernel: NcuKernel, name: str, ref: str) -> str:
    metric = kernel.metrics[name]
    unit = f" {metric.unit}" if metric.unit else ""
    return f"[[{name} = {format_value(metric.value)}{unit} @ {ref}]]"


def _stall_metrics(kernel: NcuKernel) -> list[str]:
    names = []
    for reason, _ in m.stall_reasons(kernel)[:3]:
        for pattern in (
            f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio",
            f"smsp__average_warp_latency_issue_stalled_{reason}.ratio",
            f"smsp__warp_issue_stalled_{reason}_per_warp_active.pct",
        ):
            if pattern in kernel.metrics:
                names.append(pattern)
                break
    return names


def digest_metric_names(kernel: NcuKernel) -> list[str]:
    return [name for name in DIGEST_METRICS if kernel.value(name) is not None] + _stall_metrics(kernel)


class AskTools:
    """The tools' bodies: plain methods over the session's reports, each returning text."""

    def __init__(self, reports: ReportSet) -> None:
        self.reports = reports

    def _pick(self, kernel: str | int | None, report: str | None) -> tuple[AskReport, NcuKernel]:
        return self.reports.kernel(report, kernel)

    def _missing(self, chosen: AskReport, kernel: NcuKernel, wanted: tuple[str, ...]) -> list[str]:
        present = chosen.sections(kernel)
        return [missing_note(kernel, present, s) for s in wanted if s not in present]

    def list_kernels(self, report: str | None = None) -> str:
        chosen = self.reports.by_label(report)
        kernels = chosen.report.kernels
        rows = totals(kernels)
        grand = sum(r.total_ns for r in rows)
        gpu = gpu_name(chosen.focus)
        lines = [
            f"{chosen.label} ({chosen.path.name if chosen.path else 'in memory'}): {len(kernels)} launch(es) of "
            f"{len(rows)} kernel(s), {grand / 1e3:.2f} us of GPU time" + (f"; GPU {gpu}" if gpu else ""),
            f"in focus: {chosen.ref(chosen.focus)} {chosen.focus.name[:100]}",
            "by kernel (most GPU time first):",
        ]
        for r in rows[:15]:
            share = f" ({100 * r.total_ns / grand:.0f}%)" if grand else ""
            shown = ", ".join(str(i) for i in r.indices[:8]) + (", ..." if len(r.indices) > 8 else "")
            lines.append(
                f"- {r.name[:100]}: {r.launches} launch(es), {r.total_ns / 1e3:.2f} us{share}; indices {shown}"
            )
        if len(rows) > 15:
            lines.append(f"- ... {len(rows) - 15} more kernels")
        lines.append("launches (index: duration, grid, block, name):")
        for k in kernels[:LAUNCH_ROWS]:
            dur = f"{k.duration_ns / 1e3:.2f} us" if k.duration_ns is not None else "n/a"
            lines.append(f"  {k.index}: {dur}, grid {k.grid}, block {k.block}, {k.name[:80]}")
        if len(kernels) > LAUNCH_ROWS:
            lines.append(f"  ... {len(kernels) - LAUNCH_ROWS} more launches: name one with kernel=REGEX or an index")
        lines.append(f"refer to a launch as {chosen.label}:INDEX (tools: kernel=INDEX, report={chosen.label!r})")
        return "\n".join(lines)

    def kernel_digest(self, kernel: str | int | None = None, report: str | None = None) -> str:
        chosen, k = self._pick(kernel, report)
        digest = build_digest([k], **roofline_peaks(gpu_name(k)))
        assert digest is not None
        same = [x for x in chosen.report.kernels if x.name == k.name]
        grand = sum(x.duration_ns or 0.0 for x in chosen.report.kernels)
        mine = sum(x.duration_ns or 0.0 for x in same)
        share = f"; its {len(same)} launch(es) take {100 * mine / grand:.0f}% of the report's GPU time" if grand else ""
        body = digest.to_text().splitlines()[1:]  # the first line speaks of "the longest": this names the launch
        ref = chosen.ref(k)
        lines = [f"kernel {ref}: {k.name[:120]} (launch {k.index + 1} of {len(chosen.report.kernels)}{share})", *body]
        lines.append("metrics behind this digest (cite these):")
        lines += [cite(k, name, ref) for name in digest_metric_names(k)]
        lines += self._missing(chosen, k, WANTED)
        return "\n".join(lines)

    def metric(self, query: str, kernel: str | int | None = None, report: str | None = None) -> str:
        chosen, k = self._pick(kernel, report)
        details = chosen.details()
        found, count = find_metrics(k, query, details.descriptions)
        ref = chosen.ref(k)
        if not found:
            lines = [f"no metric of {ref} ({k.name[:60]}) matches {query!r}"]
            close = similar_names(k, query)
            if close:
                lines.append("similar names: " + ", ".join(close))
            section = section_for(query)
            if section is not None:
                present = chosen.sections(k)
                if section not in present:
                    lines.append(missing_note(k, present, section))
                else:
                    lines.append(f"the {section} section was collected, but it holds no metric like that")
            return "\n".join(lines)
        head = f"{ref} ({k.name[:60]}): {count} metric(s) match {query!r}"
        lines = [head + (f", the first {len(found)}:" if count > len(found) else ":")]
        for item in found:
            text = cite(k, item.name, ref)
            if item.description:
                text += " - " + item.description[:DESCRIPTION_CHARS]
            lines.append(text)
        if not details.available:
            lines.append(f"(no descriptions: {details.note})")
        return "\n".join(lines)

    def rule_findings(self, kernel: str | int | None = None, report: str | None = None) -> str:
        chosen, k = self._pick(kernel, report)
        rules = ranked_rules(k)
        if not rules:
            return f"NCU reported no findings for {chosen.ref(k)} ({k.name[:60]})"
        lines = [f"NCU's findings for {chosen.ref(k)} ({k.name[:60]}), largest estimated speedup first:"]
        for r in rules:
            est = f"est. speedup {r.speedup_pct:.1f}%" if r.speedup_pct is not None else "no estimate"
            if r.speedup_pct is not None and r.speedup_type:
                est += f" ({r.speedup_type})"
            message = " ".join(r.message.split())
            message = message if len(message) <= RULE_CHARS else message[: RULE_CHARS - 1] + "…"
            lines.append(f"- [{r.type}, {est}] {r.title or r.rule} ({r.section}): {message}")
        return "\n".join(lines)

    def source_hotspots(self, kernel: str | int | None = None, report: str | None = None, top: int = 8) -> str:
        chosen, k = self._pick(kernel, report)
        details = chosen.details()
        ref = chosen.ref(k)
        if not details.available:
            return f"no source/SASS hotspots for {ref}: {details.note}"
        found = details.kernel(k.index)
        present = chosen.sections(k)
        if found is None or not found.pcs:
            return f"no source/SASS data for {ref} ({k.name[:60]}): " + missing_note(k, present, SOURCE_SECTION)
        return _hotspot_text(ref, k, found, max(1, min(int(top), 20)), present)

    def compare(self, a: str | None = None, b: str | None = None) -> str:
        if b is None and not self.reports.comparing:
            return "one report in this session: name two kernels, e.g. a='report:0', b='report:3'"
        first = self.reports.resolve(a or self.reports.first.label)
        second = self.reports.resolve(b or self.reports.reports[-1].label)
        before, after = (build_digest([k], **roofline_peaks(gpu_name(k))) for _, k in (first, second))
        assert before is not None and after is not None
        ref_a, ref_b = first[0].ref(first[1]), second[0].ref(second[1])
        lines = [f"{ref_a} (baseline) -> {ref_b} (candidate)", diff_digests(before, after).to_text()]
        for owner, k in (first, second):
            ref = owner.ref(k)
            names = digest_metric_names(k)[:12]
            lines.append(f"cite {ref} as: " + " ".join(cite(k, n, ref) for n in names))
        return "\n".join(lines)

    def gpu_specs(self, question: str, gpu: str | None = None) -> str:
        name = gpu or gpu_name(self.reports.first.focus)
        if not name:
            return "the report does not name its GPU: give gpu='h100' (or another)"
        return specs.answer(question, name)


def _counters(values: dict[str, float]) -> str:
    shown = [f"{n} {format_value(v)}" for n, v in values.items() if v]
    return ", ".join(shown)


def _hotspot_text(ref: str, k: NcuKernel, found: KernelDetails, top: int, present: set[str]) -> str:
    total = found.total_samples
    lines = [f"hotspots of {ref} ({k.name[:60]}); {format_value(total)} warp samples in all:"]
    if total <= 0:
        lines[0] = f"hotspots of {ref} ({k.name[:60]}) by instructions executed (no warp samples):"
    if found.lines:
        lines.append("source lines:")
        for spot in found.lines[:top]:
            pct = f" ({100 * spot.samples / total:.1f}%)" if total > 0 else ""
            stalls = ", ".join(f"{r} {format_value(v)}" for r, v in spot.stalls)
            where = f"{spot.file.rsplit('/', 1)[-1]}:{spot.line}"
            text = f"- {where}: {format_value(spot.samples)} samples{pct}"
            text += f"; stalls {stalls}" if stalls else ""
            text += f"; {_counters(spot.counters)}" if spot.counters else ""
            lines.append(text)
            if spot.text:
                lines.append(f"    `{spot.text}`")
    else:
        lines.append("no source lines (built without -lineinfo): SASS only")
    lines.append("SASS instructions:")
    for pc in found.pcs[:top]:
        where = f" ({pc.file.rsplit('/', 1)[-1]}:{pc.line})" if pc.file else ""
        stalls = ", ".join(f"{r} {format_value(v)}" for r, v in pc.stalls)
        text = f"- +0x{pc.offset:04x} {pc.sass[:70]}{where}: {format_value(pc.samples)} samples"
        text += f"; stalls {stalls}" if stalls else ""
        text += f"; {_counters(pc.counters)}" if pc.counters else ""
        lines.append(text)
    lines.append("(per-line and per-instruction counts are not report metrics: cite kernel-level metrics instead)")
    if total <= 0 and SOURCE_SECTION not in present:
        lines.append(missing_note(k, present, SOURCE_SECTION))
    return "\n".join(lines)


def _tool(fn: Callable[..., str], name: str, description: str) -> BaseTool:
    """A tool whose arguments are `fn`'s; a reference that names nothing answers with why."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> str:
        try:
            return fn(*args, **kwargs)
        except RefError as exc:
            return str(exc)

    return StructuredTool.from_function(run, name=name, description=description)


def make_tools(reports: ReportSet) -> list[BaseTool]:
    t = AskTools(reports)
    labels = " or ".join(repr(label) for label in reports.labels)
    where = f"report: {labels} (default: the first); kernel: an index or a name regex (default: the kernel in focus)."
    return [
        _tool(t.list_kernels, "list_kernels", f"Kernels and launches in a report, the most GPU time first. {where}"),
        _tool(
            t.kernel_digest,
            "kernel_digest",
            "The digest of one kernel launch (duration, speed-of-light, launch shape, occupancy, stalls, caches, "
            f"bottleneck class, NCU's top findings), the metrics behind it, and sections the report lacks. {where}",
        ),
        _tool(
            t.metric,
            "metric",
            "Metrics with value, unit and description. query: an exact metric name, a regex on names "
            f"('dram__bytes', 'stalled.*ratio'), or words ('bank conflicts'). {where}",
        ),
        _tool(t.rule_findings, "rule_findings", f"NCU's rule findings with estimated speedups. {where}"),
        _tool(
            t.source_hotspots,
            "source_hotspots",
            "Source lines and SASS instructions with the most warp samples (where the report has SourceCounters), "
            f"with stall reasons and per-instruction counters. top: how many rows. {where}",
        ),
        _tool(
            t.compare,
            "compare",
            "Digest diff of two kernels: a is the baseline, b the candidate, each a reference LABEL, LABEL:INDEX or "
            "INDEX (default: the baseline's and the candidate's kernels in focus).",
        ),
        _tool(
            t.gpu_specs,
            "gpu_specs",
            "GPU specifications (default: the report's GPU): question is a field ('l2', 'memory.bandwidth_gbs', "
            "'sms', 'smem_per_block', 'ridge.cuda_fp32'), a feature ('tma', 'fp8'), or 'summary'.",
        ),
    ]
