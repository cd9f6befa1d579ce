"""The fast-build path: C++/CUDA without torch headers, compiled with g++/nvcc -shared, called via ctypes."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import torch

from kernelwright import fastext
from kernelwright.harness.session import evaluate
from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import bundled_solutions
from tests.candidates import harness_options

SCALE = r"""
#include <cstdint>
extern "C" int scale(const float* x, float* y, int64_t n, double s) {
    if (n < 0) return 7;
    for (int64_t i = 0; i < n; ++i) y[i] = (float)(x[i] * s);
    return 0;
}
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KERNELWRIGHT_FASTEXT_CACHE", str(tmp_path / "fastext"))
    return tmp_path / "fastext"


def test_builds_calls_and_caches(cache: Path) -> None:
    start = time.perf_counter()
    lib = fastext.load_kernels("kw_scale", SCALE, {"scale": "ptr, ptr, i64, f64"}, lang="cpp")
    cold = time.perf_counter() - start
    x = torch.randn(1000)
    y = torch.empty_like(x)
    lib.scale(x, y, x.numel(), 2.5)
    assert torch.allclose(y, x * 2.5)
    start = time.perf_counter()
    fastext.load_kernels("kw_scale", SCALE, {"scale": "ptr, ptr, i64, f64"}, lang="cpp")
    assert time.perf_counter() - start < cold  # the second load compiles nothing
    assert len(list(cache.rglob("libkw_scale.so"))) == 1


def test_errors_are_clear(cache: Path) -> None:
    with pytest.raises(fastext.KernelBuildError, match="Error building extension 'kw_broken'"):
        fastext.load_kernels("kw_broken", 'extern "C" int f( { return 0; }', {"f": ""}, lang="cpp")
    with pytest.raises(ValueError, match="unknown argument type"):
        fastext.load_kernels("kw_scale", SCALE, {"scale": "ptr, pointer"}, lang="cpp")
    lib = fastext.load_kernels("kw_scale", SCALE, {"scale": "ptr, ptr, i64, f64"}, lang="cpp")
    with pytest.raises(TypeError, match="takes 4 arguments"):
        lib.scale(torch.zeros(1))
    with pytest.raises(RuntimeError, match="error code 7"):
        lib.scale(torch.zeros(1), torch.zeros(1), -1, 1.0)
    with pytest.raises(fastext.KernelBuildError, match="no extern"):
        fastext.load_kernels("kw_scale", SCALE, {"missing": "ptr"}, lang="cpp")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (compiles without a GPU)")
def test_cuda_source_compiles_with_nvcc_without_a_gpu(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_CUDA_ARCH", "sm_90a")
    source = (Path(fastext.__file__).parent / "problems/solutions/relu/cuda_fast.py").read_text()
    kernel = source.split('r"""', 1)[1].split('"""', 1)[0]
    library, cached, _ = fastext._build("kw_relu_cuda_fast_test", kernel, "cuda", ())
    assert library.is_file() and not cached


@pytest.mark.slow
def test_fast_form_candidate_goes_through_the_harness(shared_home: Path) -> None:
    [entry] = [s for s in bundled_solutions("relu") if s.path.stem == "cpp_fast"]
    opts = harness_options(shared_home, "cpu", timing=True)
    [first] = evaluate(resolve_problem("relu"), [entry.path], opts)
    assert first.verdict.value == "correct", first.message
    assert first.backend == "cpp" and first.timings["candidate"].n >= 10
    [again] = evaluate(resolve_problem("relu"), [entry.path], opts)
    assert again.build_cached is True
