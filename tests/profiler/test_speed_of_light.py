"""The speed-of-light figure: bytes and flops counted on meta (or, for small models that need real
values, on the CPU), over the ceilings of a spec-table GPU, a live-detected one, or this CPU."""

from __future__ import annotations

import importlib
import math
import resource
import textwrap
from pathlib import Path

import pytest

from kernelwright.errors import ProblemError
from kernelwright.hardware_specs import get_spec
from kernelwright.hardware_specs.ceilings import Ceiling, Ceilings
from kernelwright.hardware_specs.detect_gpu import merge
from kernelwright.hardware_specs.live_gpu import GpuLive
from kernelwright.problems import Problem, load_problem_file, resolve_problem
from kernelwright.profiler.speed_of_light import CPU_FALLBACK_LIMIT, count_work, speed_of_light
from kernelwright.vocabulary import Size

# The module itself (its helpers are patched in some tests).
sol_module = importlib.import_module("kernelwright.profiler.speed_of_light")
H100_BW = 3350e9
# Fixed ceilings for tests that are about counting, not about measuring this machine.
FAKE_CPU = Ceilings(
    device="cpu",
    name="a test CPU",
    bandwidth=Ceiling(10e9, "measured on this CPU: test"),
    pipes={"cpu_fp32": Ceiling(100e9, "measured on this CPU: test")},
)


def write_problem(tmp_path: Path, body: str, name: str = "1_case.py") -> Problem:
    path = tmp_path / name
    path.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent(body))
    return load_problem_file(path)


RECT_MATMUL = """
class Model(nn.Module):
    def forward(self, a, b):
        return a @ b

def get_inputs():
    return [torch.randn(64, 32), torch.randn(32, 48)]
"""


def test_matmul_flops_are_2mnk_for_the_suite_problem_at_both_sizes() -> None:
    problem = resolve_problem("15_matmul_square")
    small = count_work(problem, Size.SMALL)
    default = count_work(problem, Size.DEFAULT)
    assert small.flops == 2 * 128**3
    assert default.flops == 2 * 4096**3
    assert default.bytes_moved == 3 * 4096 * 4096 * 4  # A, B read; C written
    assert default.counted_on == "meta"


def test_rectangular_matmul_written_here(tmp_path: Path) -> None:
    work = count_work(write_problem(tmp_path, RECT_MATMUL))
    assert work.flops == 2 * 64 * 48 * 32
    assert work.bytes_moved == (64 * 32 + 32 * 48 + 64 * 48) * 4
    assert work.dtype == "float32"


def test_relu_at_default_size_is_memory_bound_and_allocates_nothing() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    work = count_work(resolve_problem("1_relu"), Size.DEFAULT)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    numel = 16384 * 12288
    assert work.counted_on == "meta"
    assert work.bytes_moved == 2 * numel * 4
    assert work.flops == 0
    assert grown_mib < 400  # the input alone would be 768 MiB had it been allocated
    sol = speed_of_light(resolve_problem("1_relu"), Size.DEFAULT, "cuda", get_spec("h100"))
    assert sol.bound == "memory"
    assert sol.compute_s == 0.0


def test_parameters_are_counted_for_layer_norm_and_conv() -> None:
    ln = count_work(resolve_problem("13_layer_norm"), Size.DEFAULT)
    assert ln.param_bytes == 2 * 4096 * 4
    assert ln.bytes_moved == 2 * 16 * 2048 * 4096 * 4 + 2 * 4096 * 4
    conv = count_work(resolve_problem("20_conv2d"), Size.SMALL)  # x [2, 8, 16, 16], 8 -> 16 channels, 3x3
    assert conv.param_bytes == (16 * 8 * 9 + 16) * 4
    assert conv.bytes_moved == (2 * 8 * 16 * 16 + 16 * 8 * 9 + 16 + 2 * 16 * 16 * 16) * 4
    assert conv.flops == 2 * (2 * 16 * 16 * 16) * (8 * 9)


def test_h100_spec_gives_the_expected_times() -> None:
    h100 = get_spec("H100 SXM")
    relu = speed_of_light(resolve_problem("1_relu"), Size.DEFAULT, "cuda", h100)
    assert relu.bandwidth_bytes_per_s == H100_BW
    assert relu.time_s == pytest.approx(2 * 16384 * 12288 * 4 / H100_BW)
    assert relu.bandwidth_source == "spec table: H100 SXM"

    matmul = speed_of_light(resolve_problem("15_matmul_square"), Size.DEFAULT, "cuda", h100, tf32=False)
    assert (matmul.pipe, matmul.peak_flops, matmul.bound) == ("cuda_fp32", 67e12, "compute")
    assert matmul.time_s == pytest.approx(2 * 4096**3 / 67e12)
    assert matmul.room(2 * 2 * 4096**3 / 67e12) == pytest.approx(2.0)
    tf32 = speed_of_light(resolve_problem("15_matmul_square"), Size.DEFAULT, "cuda", h100, tf32=True)
    assert (tf32.pipe, tf32.peak_flops) == ("tensor_tf32", 495e12)
    bf16 = speed_of_light(resolve_problem("30_matmul_bf16"), Size.DEFAULT, "cuda", h100)
    assert (bf16.dtype, bf16.pipe, bf16.peak_flops) == ("bfloat16", "tensor_bf16", 989e12)
    assert bf16.compute_s == pytest.approx(2 * 8192**3 / 989e12)


def test_text_names_sources_pipe_and_no_reference_time() -> None:
    sol = speed_of_light(resolve_problem("15_matmul_square"), Size.DEFAULT, "cuda", get_spec("h100"), tf32=False)
    text = sol.text()
    assert 2 <= len(text.splitlines()) <= 4
    assert "NVIDIA H100 SXM" in text
    assert "spec table: H100 SXM" in text
    assert "CUDA cores (fp32), TF32 off in torch" in text
    assert "compute-bound" in text
    assert "reference" not in text.lower()


def test_cpu_uses_measured_ceilings() -> None:
    sol = speed_of_light(resolve_problem("1_relu"), Size.SMALL, "cpu")
    assert sol.bandwidth_source.startswith("measured on this CPU")
    assert sol.peak_source.startswith("measured on this CPU")
    assert sol.time_s is not None and math.isfinite(sol.time_s) and sol.time_s > 0
    assert "measured on this CPU" in sol.text()


def test_bf16_on_cpu_has_no_compute_ceiling(tmp_path: Path) -> None:
    problem = write_problem(
        tmp_path,
        """
        class Model(nn.Module):
            def forward(self, a, b):
                return a @ b

        def get_inputs():
            return [torch.randn(64, 32, dtype=torch.bfloat16), torch.randn(32, 48, dtype=torch.bfloat16)]
        """,
    )
    sol = speed_of_light(problem, device="cpu", ceilings=FAKE_CPU)
    assert (sol.pipe, sol.compute_s, sol.bound) == ("none", None, None)
    assert sol.time_s == sol.memory_s
    assert "byte bound only" in sol.text()


def test_forward_that_fails_on_meta_falls_back_to_cpu(tmp_path: Path) -> None:
    problem = write_problem(
        tmp_path,
        """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(32, 16))

            def forward(self, x):
                scale = float(x.abs().max().item())  # needs real values
                return (x @ self.w) / scale

        def get_inputs():
            return [torch.randn(8, 32)]
        """,
    )
    work = count_work(problem)
    assert work.counted_on == "cpu"
    assert work.flops == 2 * 8 * 32 * 16
    assert work.param_bytes == 32 * 16 * 4
    assert work.bytes_moved == (8 * 32 + 32 * 16 + 8 * 16) * 4
    assert any("cannot run on meta" in n for n in work.notes)


def test_large_problem_that_fails_on_meta_keeps_the_byte_bound(tmp_path: Path) -> None:
    rows = CPU_FALLBACK_LIMIT // (4 * 1024) + 1  # just over the limit
    problem = write_problem(
        tmp_path,
        f"""
        class Model(nn.Module):
            def forward(self, x):
                return x * x.sum().item()

        def get_inputs():
            return [torch.randn({rows}, 1024)]
        """,
    )
    sol = speed_of_light(problem, device="cuda", gpu=get_spec("h100"))
    assert sol.flops is None and sol.bound is None
    assert sol.bytes_moved == rows * 1024 * 4
    assert sol.time_s == pytest.approx(rows * 1024 * 4 / H100_BW)
    assert "flops unknown" in sol.text()
    assert "inputs and parameters only" in sol.text()


def test_get_inputs_that_needs_real_values_is_built_for_real(tmp_path: Path) -> None:
    problem = write_problem(
        tmp_path,
        """
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x)

        def get_inputs():
            n = int(torch.tensor(16).item())  # fails on meta
            return [torch.randn(n, 4)]
        """,
    )
    work = count_work(problem)
    assert work.bytes_moved == 2 * 16 * 4 * 4
    assert any("built for real" in n for n in work.notes)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("class Model:\n    pass\n\ndef get_inputs():\n    return [torch.randn(2)]\n", "not a torch.nn.Module"),
        (
            "class Model(nn.Module):\n    def forward(self, x):\n        return x\n\n"
            "def get_inputs():\n    return 'x'\n",
            "must return a list",
        ),
        (
            "class Model(nn.Module):\n    def __init__(self):\n        raise RuntimeError('boom')\n\n"
            "def get_inputs():\n    return [torch.randn(2)]\n",
            "boom",
        ),
    ],
)
def test_malformed_problem_is_a_problem_error(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ProblemError, match=message):
        speed_of_light(write_problem(tmp_path, body), device="cpu", ceilings=FAKE_CPU)


def test_gpu_not_in_the_table_uses_live_detection() -> None:
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
    sol = speed_of_light(resolve_problem("15_matmul_square"), Size.SMALL, "cuda", spec, tf32=False)
    assert sol.bandwidth_source.startswith("derived from live detection")
    assert sol.bandwidth_bytes_per_s == pytest.approx(672.1e9, rel=1e-3)
    assert sol.peak_source.startswith("derived from live detection")
    assert sol.peak_flops == pytest.approx(2 * 128 * 60 * 2500e6)
    bf16 = speed_of_light(resolve_problem("30_matmul_bf16"), Size.SMALL, "cuda", spec)
    assert (bf16.peak_flops, bf16.peak_source, bf16.compute_s) == (None, "unknown", None)


def test_no_gpu_and_no_spec_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sol_module, "detected_spec", lambda: None)
    sol = speed_of_light(resolve_problem("1_relu"), Size.SMALL, "cuda")
    assert sol.time_s is None and sol.bandwidth_source == "unknown"
    assert "unknown" in sol.text()
    with pytest.raises(ValueError, match="no speed of light"):
        sol.room(1.0)
