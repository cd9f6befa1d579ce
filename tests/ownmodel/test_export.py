"""`kernelwright export RUN --format kernelbench|package` (issue #32): a run's winner as a
self-contained KernelBench file `eval` judges correct, and as a package that runs where
kernelwright cannot be imported, under torch.compile(fullgraph=True), with autograd's gradients.

The runs are minimal folders, written the way `agent/runs.py` lays them out (config.json,
summary.json, candidates/NNN.py)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.ownmodel.export import region_path
from kernelwright.ownmodel.export.inline import kernelwright_imports, to_load_inline
from kernelwright.problems import resolve_problem
from tests.ownmodel.conftest import run_without_kernelwright

RELU = Path(resolve_problem("relu").path).parents[2] / "solutions" / "relu"


def make_run(runs: Path, run_id: str, problem: str, best: str, *, correct: bool = True) -> Path:
    folder = runs / run_id
    (folder / "candidates").mkdir(parents=True)
    (folder / "candidates" / "001.py").write_text(best)
    (folder / "config.json").write_text(json.dumps({"problem": problem, "device": "cpu", "size": "small"}))
    verdict = "correct" if correct else "incorrect"
    (folder / "summary.json").write_text(json.dumps({"best": {"index": 1, "verdict": verdict}, "problem": problem}))
    return folder


def _one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str], code: int) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == code
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_fast_form_candidate_becomes_plain_load_inline_with_the_same_source() -> None:
    original = (RELU / "cpp_fast.py").read_text()
    exported = to_load_inline(original, "cpp_fast.py")
    tree = ast.parse(exported)
    assert not kernelwright_imports(tree) and "load_kernels" not in exported
    assert "from torch.utils.cpp_extension import load_inline" in exported
    assert 'm.def("relu", &kw_export_relu)' in exported and "cpp_sources=[SOURCE," in exported
    source = next(n.value for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "SOURCE")
    assert 'extern "C" int relu(' in ast.literal_eval(source)  # the kernel's source, untouched
    cuda = to_load_inline((RELU / "cuda_fast.py").read_text(), "cuda_fast.py")
    assert "cuda_sources=[SOURCE, _KW_BINDINGS_0]" in cuda and "getCurrentCUDAStream().stream()" in cuda


def test_a_load_inline_winner_is_exported_as_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = (RELU / "cpp_correct.py").read_text()
    make_run(tmp_path / "runs", "r1", "relu", original)
    with pytest.raises(SystemExit) as info:
        main(["export", "r1", "--format", "kernelbench"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("# Exported by `kernelwright export r1 --format kernelbench`")
    assert text.split("\n", 1)[1] == original


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["export", "nope"], "no run 'nope'"),
        (["export", "bad"], "run bad has no correct candidate to export"),
        (["export", "good", "--format", "onnx"], "--format 'onnx': not a format"),
        (["export", "good", "--format", "package"], "--format package needs -o DIR"),
        (["export", "good", "--format", "package", "-o", "out/not-a-name"], "'not-a-name' is not a Python identifier"),
        (["export", "other", "--format", "kernelbench"], "it imports kernelwright.harness"),
    ],
)
def test_malformed_requests_end_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "bad", "relu", (RELU / "cpp_correct.py").read_text(), correct=False)
    make_run(runs, "good", "relu", (RELU / "cpp_correct.py").read_text())
    make_run(runs, "other", "relu", "from kernelwright.harness import x\nclass ModelNew: ...\n")
    line = _one_error_line(capsys, argv, 2)
    assert expected in line, line


def test_region_path_is_read_from_the_problem_dict() -> None:
    assert region_path(LAYER_NORM_PROBLEM) == "blocks.1.norm"
    assert region_path("PROBLEM = {'tags': []}\n") is None


LAYER_NORM_PROBLEM = '''"""A LayerNorm region of a small model (as `model extract --region` writes one)."""

import torch
import torch.nn as nn

PROBLEM = {"tags": ["region"], "region": {"kind": "module", "path": "blocks.1.norm", "spec": "user.py:make"}}


class Model(nn.LayerNorm):
    def __init__(self, d):
        super().__init__(d)


def get_inputs():
    return [torch.randn(4, 6, 32)]


def get_init_inputs():
    return [32]


def get_input_variants():
    return [[torch.randn(3, 32)]]
'''

# The winner in the fast form, with tensors named unlike the reference's (lined up by value).
LAYER_NORM_WINNER = '''import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cmath>
#include <cstdint>

extern "C" int layer_norm(const float* x, const float* w, const float* b, float* y,
                          int64_t rows, int64_t cols, double eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        double mean = 0.0, var = 0.0;
        for (int64_t c = 0; c < cols; ++c) mean += xr[c];
        mean /= cols;
        for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
        const double inv = 1.0 / std::sqrt(var / cols + eps);
        for (int64_t c = 0; c < cols; ++c) yr[c] = (float)((xr[c] - mean) * inv) * w[c] + b[c];
    }
    return 0;
}
"""

lib = load_kernels("kw_test_export_ln", SOURCE, {"layer_norm": "ptr, ptr, ptr, ptr, i64, i64, f64"}, lang="cpp")


class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d))
        self.beta = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        lib.layer_norm(x, self.gamma.contiguous(), self.beta.contiguous(), y, x.numel() // cols, cols, 1e-5)
        return y
'''

# Runs where kernelwright cannot be imported: the package, torch, nothing else of ours.
USER_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])

import copy
import warnings

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

import kw_ln


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 32)
        self.norm = nn.LayerNorm(32)

    def forward(self, x):
        return self.norm(torch.relu(self.fc(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())

    def forward(self, x):
        return self.blocks(x) * 2.0


class Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


torch.manual_seed(1)
ref = Net()
with torch.no_grad():
    for p in ref.parameters():
        p.add_(torch.randn_like(p) * 0.3)  # not LayerNorm's ones and zeros: the op must use these
state = copy.deepcopy(ref.state_dict())
model = copy.deepcopy(ref)
assert kw_ln.patch(model) is model
assert type(model.blocks[1].norm).__name__ == "LayerNorm" and type(model.blocks[0].norm) is nn.LayerNorm
assert list(model.state_dict()) == list(state)
model.load_state_dict(state, strict=True)

def same(a, b, tol=1e-5):
    assert a.shape == b.shape and torch.allclose(a, b, atol=tol, rtol=tol), (a - b).abs().max()

x = torch.randn(4, 6, 32)
with Ops() as ops:
    out = model(x)
assert "kw_ln.layer_norm_region.default" in ops.names, ops.names
same(out, ref(x))
small = torch.randn(3, 32)  # the problem's held-out variant: verified too
with warnings.catch_warnings():
    warnings.simplefilter("error")
    same(model(small), ref(small))

xg = x.clone().requires_grad_()
rg = x.clone().requires_grad_()
(model(xg).square().sum()).backward()
(ref(rg).square().sum()).backward()
same(xg.grad, rg.grad, 1e-4)
for (name, a), b in zip(model.named_parameters(), ref.parameters()):
    same(a.grad, b.grad, 1e-4)

compiled = torch.compile(model, fullgraph=True, backend=sys.argv[2])
cg = x.clone().requires_grad_()
out_c = compiled(cg)
same(out_c, ref(x))
out_c.square().sum().backward()
same(cg.grad, rg.grad, 1e-4)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    odd = torch.randn(5, 7, 32)
    same(model(odd), ref(odd))
    same(model(odd), ref(odd))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(x)
messages = [str(w.message) for w in caught if issubclass(w.category, kw_ln.FallbackWarning)]
assert len(messages) == 2, messages
assert "float32[5, 7, 32]" in messages[0] and "not a verified shape" in messages[0], messages[0]
assert "autocast" in messages[1], messages[1]

for path, expected in (("blocks.9", "has no submodule"), ("blocks.1.fc", "does not hold the region's tensors")):
    try:
        kw_ln.patch(copy.deepcopy(ref), path=path)
    except ValueError as exc:
        assert expected in str(exc), exc
    else:
        raise SystemExit(f"patch at {path} was accepted")
print("OK")
"""


def layer_norm_run(tmp_path: Path) -> Path:
    problem = tmp_path / "layer_norm_region.py"
    problem.write_text(LAYER_NORM_PROBLEM)
    make_run(tmp_path / "runs", "r1", str(problem), LAYER_NORM_WINNER)
    return problem


# The two tests below build one extension: the second finds it in the session's build cache.
@pytest.mark.slow
@pytest.mark.xdist_group("export_layer_norm")
def test_the_exported_kernelbench_file_is_judged_correct_by_eval(tmp_path: Path) -> None:
    problem = layer_norm_run(tmp_path)
    out = tmp_path / "layer_norm_export.py"
    with pytest.raises(SystemExit) as info:
        main(["export", "r1", "--format", "kernelbench", "-o", str(out)])
    assert info.value.code == 0
    assert not kernelwright_imports(ast.parse(out.read_text()))
    with pytest.raises(SystemExit) as info:
        main(["eval", str(problem), str(out), "--device", "cpu", "--no-timing"])
    assert info.value.code == 0


@pytest.mark.slow
@pytest.mark.xdist_group("export_layer_norm")
def test_the_package_runs_without_kernelwright_compiled_and_with_gradients(tmp_path: Path) -> None:
    layer_norm_run(tmp_path)
    out = tmp_path / "site" / "kw_ln"
    with pytest.raises(SystemExit) as info:
        main(["export", "r1", "--format", "package", "-o", str(out)])
    assert info.value.code == 0
    files = {p.name for p in out.iterdir()}
    assert {"__init__.py", "_runtime.py", "kernel.py", "reference.py", "export.json", "kw_test_export_ln.so"} <= files
    spec = json.loads((out / "export.json").read_text())
    assert spec["winner_tensors"] == {"gamma": "weight", "beta": "bias"}
    assert [[t["shape"] for t in s] for s in spec["signatures"]] == [[[4, 6, 32]], [[3, 32]]]
    run_without_kernelwright(USER_SCRIPT, [str(out.parent), "aot_eager"], tmp_path)


# A winner with no extension (plain PyTorch) exercises the package's patching without a build.
RELU_IN_TORCH = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0.0)
"""


def test_a_one_op_problem_patches_only_a_named_module_computing_that_op(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    import torch
    from torch import nn
    from torch.utils._python_dispatch import TorchDispatchMode

    make_run(tmp_path / "runs", "r1", "relu", RELU_IN_TORCH)
    out = tmp_path / "site" / "kw_relu_pkg"
    with pytest.raises(SystemExit) as info:  # a relative -o (the test runs in tmp_path)
        main(["export", "r1", "--format", "package", "-o", "site/kw_relu_pkg", "--name", "kw_relu_test"])
    assert info.value.code == 0
    assert not list(out.glob("*.so"))  # nothing to build
    monkeypatch.syspath_prepend(str(out.parent))
    package = importlib.import_module("kw_relu_pkg")
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Tanh())
    for path, expected in ((None, "name the submodule to patch"), ("2", "does not compute the exported region")):
        with pytest.raises(ValueError, match=expected):
            package.patch(model, path=path)
    assert package.patch(model, path="1") is model

    class Ops(TorchDispatchMode):
        names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.names.append(str(func))
            return func(*args, **(kwargs or {}))

    x = torch.randn(64, 1024)
    with torch.no_grad(), Ops():
        got = model(x)
    assert "kw_relu_test.relu.default" in Ops.names and "aten.relu.default" not in Ops.names
    with torch.no_grad():
        assert torch.equal(got, torch.tanh(torch.relu(model[0](x))))
    # A region that computes otherwise in training mode (dropout, batch statistics) was judged in
    # eval mode: a module in training mode falls back, and says so once.
    package.spec["train_sensitive"] = True
    with pytest.warns(package.FallbackWarning, match="training mode"):
        model(x)
    model.eval()
    with torch.no_grad(), Ops():
        Ops.names.clear()
        model(x)
    assert "kw_relu_test.relu.default" in Ops.names
    package.unpatch(model, path="1")
    assert type(model[1]) is nn.ReLU


def test_dropout_and_batch_statistics_make_a_region_train_sensitive() -> None:
    from torch import nn

    from kernelwright.ownmodel.export.build_worker import _train_sensitive

    assert _train_sensitive(nn.Sequential(nn.Linear(2, 2), nn.Dropout()), "")
    assert _train_sensitive(nn.BatchNorm1d(3), "")
    assert _train_sensitive(nn.Linear(2, 2), "return F.dropout(x, 0.1, self.training)")
    assert not _train_sensitive(nn.LayerNorm(4), "return self.norm(x)")
