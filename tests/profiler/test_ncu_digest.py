"""Digest, classifier, roofline and diff on synthetic kernels (no fixtures, no GPU)."""

from __future__ import annotations

from kernelwright.profiler import (
    Bottleneck,
    Metric,
    NcuKernel,
    NcuReport,
    RuleResult,
    build_digest,
    classify,
    diff,
    roofline,
)
from kernelwright.profiler import metrics as m


def kernel(name: str = "k", **values: float) -> NcuKernel:
    base: dict[str, float] = {
        m.DURATION: 100_000.0,  # ns
        m.SOL_SM: 20.0,
        m.SOL_MEMORY: 90.0,
        m.SOL_DRAM[0]: 90.0,
        m.DRAM_READ: 268_435_456.0,
        m.DRAM_WRITE: 268_435_456.0,
        m.OCC_THEORETICAL: 100.0,
        m.OCC_ACHIEVED: 85.0,
        m.WAVES: 60.0,
        m.OCC_LIMITS["registers"]: 8.0,
        m.OCC_LIMITS["warps (block size)"]: 8.0,
        m.OCC_LIMITS["shared memory"]: 32.0,
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 30.0,
        "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio": 99.0,
        "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": 2.0,
        "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": 5.0,
        "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio": 1.0,
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": 1e6,
        "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": 2e6,
        "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": 0.0,
    }
    base.update(values)
    return NcuKernel(
        index=0, name=name, grid=(1024, 1, 1), block=(256, 1, 1), metrics={k: Metric(value=v) for k, v in base.items()}
    )


def test_classifier_rules() -> None:
    assert classify(20, 90).kind is Bottleneck.MEMORY_BOUND
    assert classify(85, 40).kind is Bottleneck.COMPUTE_BOUND
    assert classify(55, 70, tensor_pipe=80).kind is Bottleneck.COMPUTE_BOUND
    small = classify(10, 12, waves=0.3)
    assert small.kind is Bottleneck.LATENCY_BOUND and "small grid" in small.reason
    occ = classify(30, 30, waves=4, occ_theoretical=25, limiter="registers")
    assert occ.kind is Bottleneck.OCCUPANCY_LIMITED and "registers" in occ.reason
    assert classify(30, 30, waves=4, occ_theoretical=100, occ_achieved=90).kind is Bottleneck.LATENCY_BOUND
    assert classify(None, 30).kind is Bottleneck.UNKNOWN


def test_roofline_position() -> None:
    point = roofline(1e9, 1e9, 1e-3, precision="fp32", peak_dram_bytes_per_s=3e12, peak_flops={"fp32": 60e12})
    assert point is not None and point.intensity == 1.0
    assert point.ridge_intensity == 20.0 and point.regime == "memory"
    assert point.pct_of_roof is not None and abs(point.pct_of_roof - 100 * 1e12 / 3e12) < 1e-6
    assert roofline(None, 1e9, 1e-3) is None
    bare = roofline(1e9, 2e9, 1e-3)
    assert bare is not None and bare.ridge_intensity is None and bare.intensity == 0.5


def test_digest_values_and_text() -> None:
    d = build_digest(NcuReport(kernels=[kernel()]), peak_dram_bytes_per_s=3e12, peak_flops={"fp32": 60e12})
    assert d is not None
    assert d.duration_us == 100.0
    assert d.classification.kind is Bottleneck.MEMORY_BOUND
    assert [s for s, _ in d.top_stalls] == ["long_scoreboard", "barrier", "wait"]  # "selected" is no stall
    assert d.occupancy_limiter == "none (full)"
    assert d.roofline is not None and d.roofline.flops == 4e6 and d.roofline.regime == "memory"
    text = d.to_text()
    assert len(text.encode()) < 2048
    assert "memory-bound" in text and "long_scoreboard" in text and "grid (1024,1,1)" in text


def test_missing_metrics_read_as_na() -> None:
    k = NcuKernel(index=0, name="bare", metrics={m.DURATION: Metric(value=5000.0)})
    d = build_digest([k])
    assert d is not None and d.sol_sm_pct is None and d.classification.kind is Bottleneck.UNKNOWN
    assert "n/a" in d.to_text() and d.roofline is None


def test_findings_sorted_by_speedup_and_text_stays_short() -> None:
    rules = [
        RuleResult(rule=f"R{i}", title=f"Rule {i}", message="x " * 400, type="OPTIMIZATION", speedup_pct=float(i))
        for i in range(6)
    ] + [RuleResult(rule="ok", title="fine", message="all good", type="OK", speedup_pct=99.0)]
    k = kernel()
    k.rules = rules
    d = build_digest([k])
    assert d is not None and [f.title for f in d.findings] == ["Rule 5", "Rule 4", "Rule 3"]
    assert len(d.to_text().encode()) <= 2000


def test_focus_is_the_longest_kernel_and_others_are_listed() -> None:
    a, b = kernel("small_kernel", **{m.DURATION: 10_000.0}), kernel("big_kernel", **{m.DURATION: 90_000.0})
    b.index = 1
    d = build_digest(NcuReport(kernels=[a, b]))
    assert d is not None and d.kernel == "big_kernel" and d.total_duration_us == 100.0
    assert d.top_kernels[0].name == "big_kernel" and round(d.top_kernels[0].share_pct) == 90
    assert "small_kernel" in d.to_text()
    only = build_digest(NcuReport(kernels=[a, b]), kernel_regex="small")
    assert only is not None and only.kernel == "small_kernel"
    assert build_digest(NcuReport(kernels=[a, b]), kernel_regex="nomatch") is None


def test_diff_reports_duration_and_class_change() -> None:
    before = build_digest([kernel("ref")])
    after = build_digest([kernel("cand", **{m.DURATION: 50_000.0, m.SOL_SM: 70.0, m.SOL_MEMORY: 40.0})])
    assert before is not None and after is not None
    delta = diff(before, after)
    assert delta.duration_change_pct == -50.0 and delta.speedup == 2.0
    text = delta.to_text()
    assert "memory-bound -> compute-bound" in text and "2.00x" in text and "SOL SM %: 20.0 -> 70.0" in text
