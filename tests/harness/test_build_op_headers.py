"""The `.cu` of a `load_inline` build in torch's per-operator mode (#29): the operator lists keep
every operator the `.cu` names (in code, not in comments or strings; by its name, a `_`-suffixed
variant or a declaration of its header), and a host unit compiled against them is the same object
as with torch's full lists. Against the installed torch's own headers."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.harness.building import light_header, op_headers

INCLUDE = op_headers.torch_include()
NINJA = """\
cflags = -DTORCH_EXTENSION_NAME=kw -isystem /t/include -fPIC
cuda_cflags = -DTORCH_EXTENSION_NAME=kw -isystem /t/include --compiler-options '-fPIC'

rule cuda_compile
  command = $nvcc $cuda_cflags -c $in -o $out
"""
WRAPPER = """\
#include <torch/types.h>
#include <torch/extension.h>

void launch(const float* x, float* y, int64_t n);

torch::Tensor scaled_relu(torch::Tensor x, double s) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    auto scale = torch::full({1}, s, xc.options());
    launch(xc.data_ptr<float>(), out.data_ptr<float>(), xc.numel());
    return at::mul(out, scale) + torch::zeros_like(out);
}
"""


def _kept(code: str) -> set[str]:
    return set(op_headers.kept_operators(code, INCLUDE)[0])


def test_the_operators_the_code_names_are_kept_and_no_others() -> None:
    kept = _kept(WRAPPER)
    assert {"empty_like", "full", "mul", "zeros_like", "contiguous"} <= kept
    assert not {"conv2d", "matmul", "softmax", "addmm", "relu"} & kept  # relu: `scaled_relu` is not `relu_...`
    assert {"var", "std", "var_mean", "std_mean"} <= kept  # what ATen/Functions.h's own code calls
    listed = op_headers.kept_operators(WRAPPER, INCLUDE)[1]
    assert listed > 1000 and len(kept) < 60


@pytest.mark.parametrize(
    ("code", "operator"),
    [
        ("auto y = at::add_out(o, a, b);", "add"),  # X_out
        ("auto y = at::sum_outf(a, d, k, t, o);", "sum"),  # X_outf
        ("auto y = at::__and__(a, b);", "and"),  # a function its header declares, not named after it
        ("auto t = torch::for_blob(p, {4}).make_tensor();", "from_blob"),
        ("#define Z(x) torch::zeros_like(x)\nauto y = Z(a);", "zeros_like"),  # in a macro's body
        ("auto y = softmax(a, 1);", "softmax"),  # unqualified (argument-dependent lookup)
    ],
)
def test_every_way_of_naming_an_operator_keeps_it(code: str, operator: str) -> None:
    assert operator in _kept(code)


def test_names_in_comments_and_strings_do_not_count() -> None:
    kept = _kept('// at::conv2d is not used\nconst char* s = "matmul";\n/* softmax */ int a;')
    assert not {"conv2d", "matmul", "softmax"} & kept


def test_a_cu_that_names_native_or_the_switches_keeps_torch_s_lists(tmp_path: Path) -> None:
    for code in ("auto y = at::native::add(a, b);", "int x = TORCH_ASSERT_ONLY_METHOD_OPERATORS;"):
        trimmed, why = op_headers.trim(tmp_path, code)
        assert trimmed is None and why
    assert not (tmp_path / op_headers.FOLDER).exists()


def test_the_lists_are_torch_s_less_the_operators_not_named(tmp_path: Path) -> None:
    trimmed, why = op_headers.trim(tmp_path, WRAPPER)
    assert trimmed is not None, why
    for name in op_headers.LISTS:
        ours = (trimmed.folder / "ATen" / name).read_text().splitlines()
        theirs = (INCLUDE / "ATen" / name).read_text().splitlines()
        assert len(ours) == len(theirs)  # line for line: torch's line numbers in diagnostics
        changed = [(a, b) for a, b in zip(theirs, ours, strict=True) if a != b]
        assert all(a.startswith("#include <ATen/ops/") and b.startswith("// kernelwright") for a, b in changed)
    functions = (trimmed.folder / "ATen" / "Functions.h").read_text()
    assert "#include <ATen/ops/empty_like.h>" in functions and "#include <ATen/ops/conv2d.h>" not in functions
    assert "#include <ATen/ops/" not in (trimmed.folder / "ATen" / "NativeFunctions.h").read_text()
    assert trimmed.describe() == f"per-operator headers ({len(trimmed.kept)} of {trimmed.listed} operators)"


def test_the_cu_s_command_gets_the_mode_and_the_folder_first_and_main_cpp_nothing(tmp_path: Path) -> None:
    trimmed, _ = op_headers.trim(tmp_path, WRAPPER)
    assert trimmed is not None
    offered, why = op_headers.offer(NINJA, trimmed)
    assert offered is not None, why
    changed = [(a, b) for a, b in zip(NINJA.splitlines(), offered.splitlines(), strict=True) if a != b]
    assert changed == [
        (
            NINJA.splitlines()[1],
            f"cuda_cflags = -DAT_PER_OPERATOR_HEADERS -isystem {trimmed.folder} " + NINJA.splitlines()[1][14:],
        )
    ]
    assert op_headers.offer(NINJA.replace("rule cuda_compile", "rule other"), trimmed)[0] is None


def test_the_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert op_headers.enabled()
    monkeypatch.setenv(op_headers.ENV_SWITCH, "0")
    assert not op_headers.enabled()


@pytest.mark.skipif(
    shutil.which("g++") is None or shutil.which("objdump") is None or not sys.platform.startswith("linux"),
    reason="needs g++ and objdump",
)
def test_a_host_unit_compiles_to_the_same_object_with_the_trimmed_lists(tmp_path: Path) -> None:
    """The wrapper's host code, compiled by g++ as the host compile sees it: against the light
    header with torch's lists, and in the per-operator mode with the trimmed ones. Every section
    and relocation the same; a name the trimmed lists lack would have failed to compile."""
    assert light_header.light_reason(WRAPPER) == ""
    trimmed, _ = op_headers.trim(tmp_path, WRAPPER)
    assert trimmed is not None
    source = tmp_path / "wrapper.cpp"
    source.write_text(WRAPPER)
    base = [
        "g++",
        "-std=c++17",
        "-O2",
        "-fPIC",
        "-w",
        "-isystem",
        str(light_header.LIGHT_INCLUDE),
        "-isystem",
        str(INCLUDE),
        "-isystem",
        str(INCLUDE / "torch" / "csrc" / "api" / "include"),
        "-c",
        "wrapper.cpp",
    ]
    ways = {"full": [], "trimmed": [op_headers.DEFINE, "-isystem", str(trimmed.folder)]}
    for name, extra in ways.items():
        subprocess.run([*base[:1], *extra, *base[1:], "-o", f"{name}.o"], cwd=tmp_path, check=True, timeout=600)

    def sections(obj: str) -> list[str]:
        out = subprocess.run(["objdump", "-s", "-r", obj], cwd=tmp_path, capture_output=True, text=True, check=True)
        return out.stdout.splitlines()[2:]  # without the file's name

    assert sections("trimmed.o") == sections("full.o")
    # and the trimmed lists are what it was compiled against: without an operator it names, it fails
    functions = trimmed.folder / "ATen" / "Functions.h"
    functions.write_text(functions.read_text().replace("#include <ATen/ops/mul.h>", "// removed"))
    broken = subprocess.run(
        [*base[:1], *ways["trimmed"], *base[1:], "-o", "broken.o"], cwd=tmp_path, capture_output=True, text=True
    )
    assert broken.returncode != 0 and "mul" in broken.stderr
