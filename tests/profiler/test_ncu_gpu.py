"""Profiling on a real GPU with ncu (marked gpu: skipped on machines without one)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from kernelwright.profiler import (
    Bottleneck,
    NcuOptions,
    build_digest,
    load_report,
    profile_problem,
    run_ncu,
)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(shutil.which("ncu") is None, reason="needs ncu on PATH")]
CANDIDATE = Path(__file__).parent.parent / "data" / "ncu" / "src" / "relu_candidate.py"

# A plain copy kernel. (`y.copy_(x)` on same-dtype contiguous tensors is a cudaMemcpyAsync, which
# ncu does not profile as a kernel.) Triton reads the kernel's source, so it runs from a file.
_COPY = """
import torch, triton, triton.language as tl

@triton.jit
def kw_copy_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=mask), mask=mask)

x = torch.randn(256 * 1024 * 1024, device='cuda'); y = torch.empty_like(x)
grid = (triton.cdiv(x.numel(), 4096),)
for _ in range(3): kw_copy_kernel[grid](x, y, x.numel(), BLOCK=4096)
torch.cuda.synchronize(); torch.cuda.profiler.start()
kw_copy_kernel[grid](x, y, x.numel(), BLOCK=4096)
torch.cuda.synchronize(); torch.cuda.profiler.stop()
assert torch.equal(x, y)
"""
_GEMM = """
import torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); b = torch.randn_like(a)
for _ in range(2): torch.matmul(a, b)
torch.cuda.synchronize(); torch.cuda.profiler.start(); torch.matmul(a, b); torch.cuda.synchronize()
torch.cuda.profiler.stop()
"""


def _assert_sane(digest) -> None:  # type: ignore[no-untyped-def]
    assert digest is not None
    assert digest.duration_us is not None and digest.duration_us > 0
    for value in (digest.sol_sm_pct, digest.sol_memory_pct):
        assert value is not None and 0 <= value <= 100
    assert len(digest.to_text().encode()) < 2048


def test_profile_cuda_candidate(tmp_path: Path) -> None:
    result = profile_problem("1_relu", CANDIDATE, report_path=tmp_path / "cand.ncu-rep", timeout_s=300)
    assert result.ok, result.one_line() + result.stderr_tail
    report = load_report(result.report_path)  # type: ignore[arg-type]
    digest = build_digest(report, kernel_regex="kw_relu")
    _assert_sane(digest)
    assert digest is not None
    from kernelwright.problems import resolve_problem
    from kernelwright.problems.instance import import_module

    module = import_module(resolve_problem("1_relu"))
    n = module.batch_size * module.dim
    assert digest.block == (256, 1, 1), digest.block
    assert digest.grid == ((n + 255) // 256, 1, 1), (digest.grid, n, report.source)
    # A one-element-per-thread kernel streams DRAM but may sit under NCU's 60% line (memory-latency):
    # memory must be the dominant side either way, and it is never compute-bound.
    assert digest.classification.kind in {Bottleneck.MEMORY_BOUND, Bottleneck.LATENCY_BOUND}, digest.to_text()
    assert digest.sol_memory_pct > digest.sol_sm_pct, digest.to_text()  # type: ignore[operator]
    # ncu's kernel records agree with the harness's static view of which kernels are the candidate's
    from kernelwright.harness.checks.static.analysis import analyze_candidate
    from kernelwright.profiler import kernel_ownership

    owned = kernel_ownership(report, analyze_candidate(CANDIDATE.read_text()).cuda_kernels)
    assert owned.own_pct is not None and owned.own_pct > 99, owned.to_text()


def test_profile_pytorch_op(tmp_path: Path) -> None:
    result = profile_problem("1_relu", report_path=tmp_path / "ref.ncu-rep", size="small", timeout_s=120)
    assert result.ok, result.one_line() + result.stderr_tail
    digest = build_digest(load_report(result.report_path))  # type: ignore[arg-type]
    _assert_sane(digest)
    assert digest is not None and digest.registers_per_thread is not None


def test_copy_is_memory_bound(tmp_path: Path) -> None:
    script = tmp_path / "kw_copy_probe.py"  # not copy.py: that would shadow the stdlib module
    script.write_text(_COPY)
    opts = NcuOptions(profile_from_start=False, launch_count=1, kernel_regex="kw_copy")
    result = run_ncu([sys.executable, str(script)], tmp_path / "copy.ncu-rep", opts, timeout_s=180)
    assert result.ok, result.one_line() + result.stderr_tail
    digest = build_digest(load_report(result.report_path))  # type: ignore[arg-type]
    _assert_sane(digest)
    assert digest is not None and digest.classification.kind is Bottleneck.MEMORY_BOUND, digest.to_text()


def test_bf16_gemm_is_compute_bound(tmp_path: Path) -> None:
    opts = NcuOptions(profile_from_start=False, launch_count=1)
    result = run_ncu([sys.executable, "-c", _GEMM], tmp_path / "gemm.ncu-rep", opts, timeout_s=240)
    assert result.ok, result.one_line() + result.stderr_tail
    digest = build_digest(load_report(result.report_path))  # type: ignore[arg-type]
    _assert_sane(digest)
    assert digest is not None and digest.classification.kind is Bottleneck.COMPUTE_BOUND, digest.to_text()


def test_sweep_over_input_sets(tmp_path: Path) -> None:
    from kernelwright.profiler import SweepSpec, run_sweep

    result = run_sweep(SweepSpec(problem="1_relu", size="small", runs=3), work_dir=tmp_path, timeout_s=240)
    assert result.ok, result.message + result.stderr_tail
    assert {p.input_set for p in result.points} == {0, 1, 2}
    assert all(p.mean and p.mean > 0 for p in result.points)


def test_cli_profile_and_doctor(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kernelwright.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["profile", "1_relu", "--size", "small", "--out", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "reference.ncu-rep").exists()
    res = runner.invoke(app, ["doctor"])
    assert "ncu counters" in res.output and res.exit_code == 0, res.output
