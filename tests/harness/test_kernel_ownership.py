"""Which kernels count as the candidate's own: exact names read from its built libraries, never a
substring, never a kernel in PyTorch's namespaces, never one the reference launches too."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernelwright.harness.checks.symbols import KernelMatcher, own_kernels
from kernelwright.problems.candidate.kernel_names import base_name, in_torch_namespace, normalize, qualified_name
from kernelwright.profiler.ownership import kernel_ownership
from kernelwright.profiler.report import Metric, NcuKernel, NcuReport

ATEN_RELU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar"
    "(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()"
    "() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, "
    "at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
    "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::"
    "{lambda(float)#1}, std::array<char*, 2ul>)"
)


def test_names_are_read_without_return_type_templates_or_parameters() -> None:
    assert qualified_name("void ns::add_kernel<float, 4>(float const*, float*, long)") == "ns::add_kernel"
    assert base_name("void ns::add_kernel<float, 4>(float const*, float*, long)") == "add_kernel"
    assert base_name("relu_kernel(float const*, float*, long)") == "relu_kernel"
    assert base_name("(anonymous namespace)::k(float*)") == "k"
    assert qualified_name(ATEN_RELU) == "at::native::vectorized_elementwise_kernel"
    assert in_torch_namespace(ATEN_RELU)
    assert normalize("void k<float>(float const *, int)") == normalize("k<float>(float const*, int)")


def test_an_own_kernel_named_kernel_does_not_claim_atens() -> None:
    """The substring match this replaces made every ATen kernel own for a kernel called `kernel`."""
    by_source = KernelMatcher(by_name=["kernel", "vectorized_elementwise_kernel"])
    assert not by_source.owns(ATEN_RELU)  # in at::, whatever its name
    assert by_source.owns("kernel(float const*, float*, long)")
    exact = KernelMatcher(exact=["relu_kernel(float const*, float*, long)"])
    assert exact.owns("relu_kernel(float const*, float*, long)")
    assert exact.owns("void relu_kernel(float const *, float *, long)")
    assert not exact.owns("relu_kernel(double const*, double*, long)")
    assert not exact.owns("my_relu_kernel(float const*, float*, long)")


def test_profiler_ownership_matches_function_names_not_substrings() -> None:
    report = NcuReport(
        kernels=[
            NcuKernel(index=0, name=ATEN_RELU, metrics={"gpu__time_duration.sum": Metric(value=900.0)}),
            NcuKernel(
                index=1,
                name="kernel(float const*, float*, long)",
                metrics={"gpu__time_duration.sum": Metric(value=100.0)},
            ),
        ]
    )
    owned = kernel_ownership(report, ["kernel"])
    assert owned.own_kernels == ["kernel(float const*, float*, long)"]
    assert owned.own_pct == pytest.approx(10.0)


def _shared_object(folder: Path, source: str) -> Path:
    c_file = folder / "lib.c"
    c_file.write_text(source)
    library = folder / "lib.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(c_file)], check=True, timeout=60)
    return library


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("nm") is None, reason="needs cc and binutils")
def test_kernels_are_read_from_the_library_symbols(tmp_path: Path) -> None:
    """nvcc gives every __global__ function a host stub `__device_stub__<mangled>`; the library's
    own kernels are those, demangled; kernels declared in at:: never count."""
    cache = tmp_path / "cache"
    cache.mkdir()
    # nvcc's stub of kernel _Z11relu_kernelPKfPfl is the C++ function
    # __device_stub__Z11relu_kernelPKfPfl(float const*, float*, long), mangled in turn; a kernel
    # in a namespace has its stub there. Plain helpers without a stub are not kernels.
    library = _shared_object(
        cache,
        "void _Z11relu_kernelPKfPfl(void) {}\n"
        "void _Z35__device_stub__Z11relu_kernelPKfPflPKfPfl(void) {}\n"
        "void _ZN2at6native4fakeEPf(void) {}\n"
        "void _ZN2at6native35__device_stub__ZN2at6native4fakeEPfEPf(void) {}\n"
        "void helper(void) {}\n",
    )
    found = own_kernels([library], cache)
    assert found.read
    assert found.names == ("relu_kernel(float const*, float*, long)",)
    assert found.excluded == ("at::native::fake(float*)",)


def test_a_library_outside_the_build_cache_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.so"
    outside.write_bytes(b"\x7fELF")
    (tmp_path / "cache").mkdir()
    found = own_kernels([outside], tmp_path / "cache")
    assert not found.read and "not a library in the build cache" in found.note
