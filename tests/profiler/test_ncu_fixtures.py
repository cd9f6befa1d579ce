"""Digest, classifier, roofline and diff against reports recorded on an H100 (tests/data/ncu/NOTE.md),
read through ncu_report and through the CSV fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.profiler import Bottleneck, build_digest, diff, load_report
from kernelwright.profiler.csv_fallback import from_csv_exports
from kernelwright.profiler.reader import ncu_report_available

DATA = Path(__file__).parent.parent / "data" / "ncu"
REPORTS = ("multi_cnn", "relu_reference", "relu_candidate", "transpose_source", "transpose_no_warpstate")
needs_module = pytest.mark.skipif(not ncu_report_available(), reason="ncu_report not installed")


def fixture(name: str) -> Path:
    path = DATA / f"{name}.ncu-rep"
    if not path.exists():
        pytest.skip(f"fixture {path.name} not recorded")
    return path


def csv_report(name: str):  # type: ignore[no-untyped-def]
    raw, details = DATA / f"{name}.raw.csv", DATA / f"{name}.details.csv"
    if not raw.exists():
        pytest.skip(f"fixture {raw.name} not recorded")
    return from_csv_exports(raw.read_text(), details.read_text() if details.exists() else None)


@needs_module
@pytest.mark.parametrize("name", REPORTS)
def test_every_fixture_digests_under_2kb(name: str) -> None:
    digest = build_digest(load_report(fixture(name)))
    assert digest is not None
    assert digest.duration_us is not None and digest.duration_us > 0
    assert digest.sol_sm_pct is not None and 0 <= digest.sol_sm_pct <= 100
    assert digest.grid is not None and digest.block is not None
    assert len(digest.to_text().encode()) < 2048


def test_multi_kernel_report_lists_kernels_and_launches() -> None:
    # multi_cnn.ncu-rep is 27 MB (cuDNN's kernels are embedded): the CSV exports are kept instead.
    report = csv_report("multi_cnn")
    assert len(report.kernels) >= 4 and len({k.name for k in report.kernels}) >= 3
    digest = build_digest(report)
    assert digest is not None and digest.launches_in_report == len(report.kernels)
    assert digest.top_kernels and sum(k.share_pct for k in digest.top_kernels) <= 100.01
    assert digest.total_duration_us is not None and digest.total_duration_us >= (digest.duration_us or 0)


@needs_module
def test_candidate_relu_is_memory_bound_with_its_launch_shape() -> None:
    digest = build_digest(load_report(fixture("relu_candidate")), kernel_regex="kw_relu")
    assert digest is not None and digest.kernel.startswith("kw_relu_kernel")
    assert digest.block == (256, 1, 1) and digest.threads_per_block == 256
    assert digest.classification.kind is Bottleneck.MEMORY_BOUND
    assert digest.dram_read_bytes and digest.dram_write_bytes and digest.dram_read_bytes > 1e8
    assert len(digest.top_stalls) == 3


@needs_module
def test_roofline_with_peaks() -> None:
    digest = build_digest(
        load_report(fixture("relu_candidate")), peak_dram_bytes_per_s=3.35e12, peak_flops={"fp32": 67e12}
    )
    assert digest is not None
    # ReLU does no FP32 add/mul/fma: no FLOPs counted, no roofline.
    assert digest.roofline is None or digest.roofline.regime == "memory"


@needs_module
def test_report_without_warp_state_has_no_stalls_but_digests() -> None:
    digest = build_digest(load_report(fixture("transpose_no_warpstate")))
    assert digest is not None and digest.top_stalls == []
    assert "top stalls (cycles/issue): n/a" in digest.to_text()


@needs_module
def test_transpose_shows_bank_conflicts_and_source_counters() -> None:
    report = load_report(fixture("transpose_source"))
    digest = build_digest(report)
    assert digest is not None and digest.smem_bank_conflicts is not None and digest.smem_bank_conflicts > 0
    assert digest.smem_static_bytes == 32 * 32 * 4
    assert any(name.startswith("smsp__pcsamp") or "source" in name.lower() for name in report.kernels[0].metrics)


def test_diff_of_reference_and_candidate() -> None:
    # The reference's .ncu-rep is too large to keep (9.5 MB); its CSV export stands in for it.
    base = build_digest(csv_report("relu_reference"))
    cand = build_digest(csv_report("relu_candidate"))
    assert base is not None and cand is not None
    delta = diff(base, cand)
    assert delta.speedup is not None and 0.3 < delta.speedup < 3
    assert "duration us" in delta.to_text() and delta.baseline_class and delta.candidate_class


@pytest.mark.parametrize("name", ["relu_candidate", "relu_reference", "multi_cnn", "transpose_no_warpstate"])
def test_csv_fallback_agrees_with_ncu_report(name: str) -> None:
    from_csv = csv_report(name)
    digest = build_digest(from_csv)
    assert digest is not None and digest.duration_us and digest.duration_us > 0
    if not ncu_report_available():
        return
    native = build_digest(load_report(fixture(name)))
    assert native is not None
    assert len(from_csv.kernels) == len(load_report(fixture(name)).kernels)
    assert digest.duration_us == pytest.approx(native.duration_us, rel=0.02)
    assert digest.sol_memory_pct == pytest.approx(native.sol_memory_pct, rel=0.02, abs=0.2)
    assert digest.classification.kind is native.classification.kind
    assert digest.grid == native.grid and digest.block == native.block


@needs_module
def test_ncu_kernel_names_cross_check_the_candidates_own_kernels() -> None:
    from kernelwright.harness.checks.static.analysis import analyze_candidate
    from kernelwright.profiler import kernel_ownership

    own = analyze_candidate((DATA / "src" / "relu_candidate.py").read_text()).cuda_kernels
    assert own == ("kw_relu_kernel",)
    mine = kernel_ownership(load_report(fixture("relu_candidate")), own)
    assert mine.own_pct == 100.0 and mine.own_kernels == ["kw_relu_kernel"] and not mine.other_kernels
    theirs = kernel_ownership(csv_report("relu_reference"), own)  # PyTorch's relu: none of it is "own"
    assert theirs.own_pct == 0.0 and theirs.total_us > 0 and theirs.other_kernels
    assert "0% of" in theirs.to_text() and "vectorized_elementwise_kernel" in theirs.to_text()
    empty = kernel_ownership(csv_report("relu_reference"), ())
    assert "none found in the source" in empty.to_text()
