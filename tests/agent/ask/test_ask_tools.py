"""What the `ask` model's tools return on the recorded reports: kernels of a report with many
launches, the kernel in focus, metrics with units and descriptions, NCU's findings, source
hotspots, a missing section with the ncu command that collects it, and the digest diff."""

from __future__ import annotations

import re

import pytest

from kernelwright.agent.ask import from_reports
from kernelwright.agent.ask.reports import RefError
from kernelwright.agent.ask.tools import AskTools, make_tools
from kernelwright.errors import UsageError
from kernelwright.profiler.ncu_sections import collect_command, section_for, sections_present
from kernelwright.profiler.report_query import find_metrics, pick_kernel, totals
from tests.agent.ask.helpers import csv_report, needs_module, report

CITE = re.compile(r"\[\[(\S+) = ([^ \]]+)")


def test_many_kernels_default_focus_is_the_longest_running_and_selectors_work() -> None:
    # multi_cnn.ncu-rep is 27.7 MB and not kept: its CSV export holds 10 launches of 8 kernels.
    cnn = csv_report("multi_cnn")
    assert len(cnn.kernels) == 10 and len({k.name for k in cnn.kernels}) == 8
    focus = pick_kernel(cnn, None)
    assert focus.name.startswith("sm80_xmma_fprop") and focus.index == 5
    assert pick_kernel(cnn, "3").index == 3 and pick_kernel(cnn, 9).name.startswith("void gemmSN_TN_kernel")
    # A regex naming two launches of one kernel (elementwise add, 4.74 and 4.03 us) picks the longer.
    assert pick_kernel(cnn, "CUDAFunctor_add").index == 1
    with pytest.raises(UsageError, match="no kernel 10 in the report: it has 10"):
        pick_kernel(cnn, "10")
    with pytest.raises(UsageError, match="matches 'nope'") as caught:
        pick_kernel(cnn, "nope")
    assert "sm80_xmma" in (caught.value.hint or "")
    with pytest.raises(UsageError, match="bad --kernel regex"):
        pick_kernel(cnn, "(")


def test_list_kernels_and_refs_on_a_report_with_many_kernels() -> None:
    reports = from_reports(csv_report("multi_cnn"), kernels=("max_pool",))
    tools = AskTools(reports)
    text = tools.list_kernels()
    assert "10 launch(es) of 8 kernel(s), 58.08 us of GPU time; GPU NVIDIA H100 80GB HBM3" in text
    assert "in focus: report:4 void at::<unnamed>::max_pool_forward_nchw" in text
    assert "2 launch(es), 8.77 us (15%); indices 1, 6" in text  # the two elementwise adds, grouped
    assert "  9: 4.19 us, grid (2, 1, 1), block (128, 1, 1)" in text
    assert tools.metric("dram__bytes_read.sum") == (
        "report:4 (void at::<unnamed>::max_pool_forward_nchw<float, int>(T2, co): 1 metric(s) match "
        "'dram__bytes_read.sum':\n[[dram__bytes_read.sum = 2105088 byte @ report:4]]\n"
        "(no descriptions: this report was read from ncu's CSV export (the ncu_report module is not installed), "
        "which has no metric descriptions, section list or source/SASS hotspots (pip install ncu-report))"
    )
    assert "@ report:0]]" in tools.metric("gpu__time_duration.sum", kernel=0)
    with pytest.raises(RefError, match=re.escape("no kernel 12 in the report (in memory): it has 10 (0-9)")):
        tools.metric("x", kernel=12)
    as_tool = {t.name: t for t in make_tools(reports)}["metric"]
    assert as_tool.invoke({"query": "x", "kernel": 12}) == "no kernel 12 in the report (in memory): it has 10 (0-9)"
    assert "source/SASS hotspots" in tools.source_hotspots()
    assert "one report in this session" in tools.compare()
    two = tools.compare("report:4", "5")
    assert two.startswith("report:4 (baseline) -> report:5 (candidate)") and "duration us: 5.1 -> 10.0" in two


@needs_module
def test_metric_lookup_units_descriptions_and_patterns() -> None:
    tools = AskTools(from_reports(report("transpose_source")))
    exact = tools.metric("dram__bytes_read.sum")
    assert "[[dram__bytes_read.sum = " in exact and " byte @ report:0]] - # of bytes read from DRAM" in exact
    words = tools.metric("bank conflicts")
    assert "8 metric(s) match 'bank conflicts'" in words
    lines = [ln for ln in words.splitlines() if ln.startswith("[[")]
    assert lines[0].startswith("[[l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.avg")
    suffixes = [ln.split(" = ")[0].rsplit(".", 1)[1] for ln in lines]
    assert suffixes == ["avg", "sum", "avg", "sum", "max", "min", "max", "min"]  # min/max variants last
    matches, count = find_metrics(report("transpose_source").kernels[0], r"^launch__grid_dim_[xy]$")
    assert count == 2 and [m.value for m in matches] == [128.0, 128.0]
    miss = tools.metric("dram__bytes_reed.sum")
    assert "no metric of report:0 (transpose_smem) matches" in miss and "similar names: dram__bytes_read.sum" in miss


@needs_module
def test_missing_warp_state_section_names_the_ncu_command() -> None:
    rep = report("transpose_no_warpstate")
    k = rep.kernels[0]
    tools = AskTools(from_reports(rep))
    present = tools.reports.first.sections(k)
    assert "WarpStateStats" not in present and {"SpeedOfLight", "Occupancy", "SchedulerStats"} <= present
    command = collect_command(k, present, "WarpStateStats")
    assert command.startswith("ncu --clock-control none --section SpeedOfLight")
    assert "--section WarpStateStats -k regex:transpose_smem --launch-count 1 -f -o transpose_smem_warpstatestats" in (
        command
    )
    assert command.endswith("<your program and its arguments>") and "section0" not in command
    stalls = tools.metric("stall")
    assert stalls.startswith("no metric of report:0 (transpose_smem) matches 'stall'")
    assert "this report has no WarpStateStats section (warp stall reasons" in stalls and command in stalls
    digest = tools.kernel_digest()
    assert "top stalls (cycles/issue): n/a" in digest and command in digest
    assert section_for("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio") == "WarpStateStats"
    assert sections_present(k) >= {"SpeedOfLight", "LaunchStats", "MemoryWorkloadAnalysis"}


@needs_module
def test_digest_cites_the_metrics_behind_it_and_findings_rank_by_speedup() -> None:
    rep = report("relu_candidate")
    tools = AskTools(from_reports(rep))
    digest = tools.kernel_digest()
    assert digest.startswith("kernel report:0: kw_relu_kernel") and "class: memory-bound" in digest
    cites = dict(CITE.findall(digest.split("metrics behind this digest (cite these):")[1]))
    k = rep.kernels[0]
    assert float(cites["gpu__time_duration.sum"]) == pytest.approx(k.duration_ns, rel=1e-5)
    assert "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio" in cites or any(
        "stalled" in n for n in cites
    )
    assert "no WarpStateStats section" not in digest
    findings = tools.rule_findings()
    speedups = [float(s) for s in re.findall(r"est\. speedup ([\d.]+)%", findings)]
    assert speedups and speedups == sorted(speedups, reverse=True)


@needs_module
def test_source_hotspots_with_and_without_source_counters() -> None:
    src = AskTools(from_reports(report("transpose_source"))).source_hotspots(top=3)
    assert "15878 warp samples in all" in src
    first = src.splitlines()[2]
    assert first.startswith("- smem_transpose.cu:17: 6623 samples (41.7%); stalls short_scoreboard 3843")
    assert "derived__memory_l1_wavefronts_shared_excessive 16252928" in first  # the 32-way bank conflicts
    assert "tile[threadIdx.x][threadIdx.y]" in src and "SASS instructions:" in src
    bare = AskTools(from_reports(report("transpose_no_warpstate"))).source_hotspots()
    assert "by instructions executed (no warp samples)" in bare
    assert "this report has no SourceCounters section" in bare and "--section SourceCounters" in bare


@needs_module
def test_compare_tool_and_tool_schemas_in_a_compare_session() -> None:
    reports = from_reports(report("transpose_no_warpstate"), report("transpose_source"))
    tools = {t.name: t for t in make_tools(reports)}
    assert list(tools) == [
        "list_kernels",
        "kernel_digest",
        "metric",
        "rule_findings",
        "source_hotspots",
        "compare",
        "gpu_specs",
    ]
    diff = tools["compare"].invoke({})
    assert diff.startswith("baseline:0 (baseline) -> candidate:0 (candidate)")
    assert "stalls before: n/a" in diff and "stalls after: short_scoreboard" in diff
    assert "cite candidate:0 as: [[gpu__time_duration.sum = 133952 nsecond @ candidate:0]]" in diff
    assert tools["metric"].invoke({"query": "x", "report": "other"}).startswith("no report 'other'")
    assert "cache.l2_mb: 50.0 MB" in tools["gpu_specs"].invoke({"question": "l2"})  # the report's GPU: H100


# Recorded by scripts/record_ask_fixtures.py on an H100 (tests/data/ncu/NOTE.md); skipped only without ncu_report.
@needs_module
def test_recorded_report_with_many_kernels_and_launches() -> None:
    rep = report("multi_kernels")
    assert len(rep.kernels) == 13 and len({k.name for k in rep.kernels}) == 5
    tools = AskTools(from_reports(rep))
    text = tools.list_kernels()
    assert "13 launch(es) of 5 kernel(s)" in text and "3 launch(es)" in text and "2 launch(es)" in text
    focus, top = tools.reports.first.focus, totals(rep.kernels)[0]
    assert focus.name == top.name and focus.index in top.indices
    assert focus.duration_ns == max(rep.kernels[i].duration_ns or 0.0 for i in top.indices)
    assert pick_kernel(rep, "naive_transpose").name.startswith("naive_transpose")
    assert "@ report:0]]" in tools.kernel_digest(kernel=0)


@needs_module
def test_recorded_baseline_candidate_pair_of_one_problem() -> None:
    tools = AskTools(from_reports(report("matmul_naive"), report("matmul_tiled")))
    assert tools.reports.first.focus.name.startswith("matmul_naive")
    assert tools.reports.reports[1].focus.name.startswith("matmul_tiled")
    diff = tools.compare()
    speedup = re.search(r"speedup \(all kernels\): ([\d.]+)x", diff)
    assert speedup is not None and float(speedup.group(1)) > 1.0  # shared-memory tiles beat the naive kernel
    hot = tools.source_hotspots(report="candidate")
    assert "warp samples in all" in hot and "matmul_pair.cu:" in hot
