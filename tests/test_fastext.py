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


# -- what a load_inline CUDA build's cache key says about its architectures ----------------------


def _fake_smi(folder: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """An `nvidia-smi` on PATH that runs `body` (shell), and a fresh answer from it."""
    smi = folder / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\n{body}\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    fastext.gpu_capabilities.cache_clear()


@pytest.fixture
def smi_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield tmp_path
    fastext.gpu_capabilities.cache_clear()


def _cuda_key() -> str:
    from kernelwright.problems.candidate.cache import cache_key

    return cache_key({"name": "k", "cuda_sources": "__global__ void k() {}"}, with_cuda=True)


def test_a_cuda_build_key_names_the_gpus_torch_would_build_for(
    smi_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With TORCH_CUDA_ARCH_LIST unset torch builds for the visible GPUs, so a cache shared with a
    host of another GPU (a home folder on a network disk) must not hand over this one's build."""
    _fake_smi(smi_folder, monkeypatch, 'echo "9.0"; echo "9.0"')
    assert fastext.gpu_capabilities() == ("9.0", "9.0")
    assert fastext.cuda_arch_key() == "read: 9.0"
    hopper = _cuda_key()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # another GPU of the same kind: the same build
    assert _cuda_key() == hopper
    _fake_smi(smi_folder, monkeypatch, 'echo "8.0"')
    ampere = _cuda_key()
    assert ampere != hopper
    # Named architectures decide the flags whatever the GPUs: the key is the variable's value.
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    named = _cuda_key()
    _fake_smi(smi_folder, monkeypatch, 'echo "9.0"')
    assert _cuda_key() == named and fastext.cuda_arch_key() == "9.0"
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "native")  # torch reads the GPUs for "native" too
    assert fastext.cuda_arch_key() == "native: 9.0"


def test_with_gpus_of_several_kinds_the_key_says_which_are_visible(
    smi_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_smi(smi_folder, monkeypatch, 'echo "9.0"; echo "8.0"')
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    first = _cuda_key()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert _cuda_key() != first
    assert "CUDA_VISIBLE_DEVICES=1" in fastext.cuda_arch_key()


@pytest.mark.parametrize(
    "body",
    [
        "exit 9",  # a driver that fails
        'echo "Field \\"compute_cap\\" is not a valid field to query."; exit 2',  # before driver 510
        'echo "[N/A]"',  # an answer that is not a capability
        "",  # no GPU
    ],
)
def test_without_an_answer_from_nvidia_smi_the_key_is_the_variable_as_before(
    smi_folder: Path, monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    _fake_smi(smi_folder, monkeypatch, body)
    assert fastext.gpu_capabilities() == ()
    assert fastext.cuda_arch_key() == ""
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
    assert fastext.cuda_arch_key() == "8.0;9.0"


def test_a_cpu_build_key_does_not_ask_for_gpus(smi_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_smi(smi_folder, monkeypatch, "echo asked >&2; exit 1")
    assert "arch" not in fastext.toolchain(with_cuda=False)
    assert fastext.gpu_capabilities.cache_info().currsize == 0
