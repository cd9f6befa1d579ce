"""The hardware block of the coder's prompt, and the CPU ceilings measured for it."""

from __future__ import annotations

import math

import pytest
import torch

from kernelwright.hardware_specs import brief as brief_module
from kernelwright.hardware_specs import get_spec
from kernelwright.hardware_specs.brief import cpu_brief, hardware_brief
from kernelwright.hardware_specs.ceilings import gpu_ceilings
from kernelwright.hardware_specs.detect_cpu import CpuInfo
from kernelwright.hardware_specs.detect_gpu import merge
from kernelwright.hardware_specs.live_gpu import GpuLive
from kernelwright.hardware_specs.measured import cpu_ceilings


def test_measured_ceilings_are_positive_finite_and_cached() -> None:
    first = cpu_ceilings()
    assert first is cpu_ceilings()  # measured once per process
    assert first.threads == torch.get_num_threads()
    for value in (first.bandwidth_bytes_per_s, first.fp32_matmul_flops):
        assert math.isfinite(value) and value > 0  # a machine reading: nothing stricter holds under noise


def test_cpu_brief_names_the_measured_ceilings_and_threads() -> None:
    text = hardware_brief("cpu")
    assert "Measured memory bandwidth" in text
    assert "Measured fp32 matmul peak" in text
    assert "measured on this CPU" in text
    assert f"torch with {torch.get_num_threads()} threads" in text
    assert 4 <= len(text.splitlines()) <= 10


@pytest.mark.parametrize(
    ("extensions", "expected"),
    [
        (["avx2", "fma"], "AVX2 (avx2, fma); no AVX-512, no AMX"),
        (["avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"], "AVX-512 (f, bf16); AMX (tile, bf16)"),
        (["neon", "sve"], "NEON/SVE (neon, sve)"),
        ([], "none of AVX2, AVX-512, AMX, NEON reported"),
    ],
)
def test_cpu_brief_lists_vector_extensions(extensions: list[str], expected: str) -> None:
    text = cpu_brief(CpuInfo(model="Test CPU", isa_extensions=extensions, torch_threads=2))
    assert expected in text
    assert "CPU: Test CPU" in text


def test_gpu_brief_from_the_spec_table() -> None:
    text = hardware_brief("cuda", gpu=get_spec("h100"))
    lines = text.splitlines()
    assert 6 <= len(lines) <= 10
    for expected in (
        "NVIDIA H100 SXM",
        "compute capability 9.0 (table)",
        "SMs: 132 (table)",
        "shared memory 228 KB (table)",
        "per block (opt-in max) 227 KB (table)",
        "registers 65536 (table)",
        "L2 cache: 50 MB (table)",
        "3.35 TB/s (table)",
        "bf16 989 TFLOP/s",
        "fp32 67 TFLOP/s (table)",
        "Clocks: boost unknown",  # the table has no sourced boost clock for it: not guessed
    ):
        assert expected in text


def test_gpu_brief_marks_live_figures() -> None:
    live = GpuLive(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        compute_capability="9.0",
        sms=132,
        shared_mem_per_sm_kb=228,
        shared_mem_per_block_optin_kb=227,
        registers_per_sm=65536,
        clock_sm_max_mhz=1980,
    )
    text = hardware_brief("cuda", gpu=merge(live).spec)
    assert "SMs: 132 (live)" in text
    assert "boost 1980 MHz (live)" in text
    assert "3.35 TB/s (table)" in text


def test_gpu_not_in_the_table_is_derived_or_unknown() -> None:
    live = GpuLive(
        index=0,
        name="NVIDIA Test GPU",
        compute_capability="8.9",
        sms=60,
        clock_sm_max_mhz=2500,
        memory_clock_mhz=10501,
        memory_bus_width_bits=256,
    )
    spec = merge(live).spec
    text = hardware_brief("cuda", gpu=spec)
    assert "NVIDIA Test GPU" in text
    assert "672 GB/s (derived)" in text
    assert "fp32 38.4 TFLOP/s (derived)" in text
    assert "Tensor cores, dense peaks: unknown" in text
    assert gpu_ceilings(spec).bandwidth.source.startswith("derived from live detection")


def test_cuda_with_no_gpu_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(brief_module, "_this_gpu", lambda: None)
    assert "none visible" in hardware_brief("cuda")
