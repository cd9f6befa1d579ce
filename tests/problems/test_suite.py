"""The built-in problem suite and the oracle solutions: static checks and small CPU runs only.

No C++/CUDA extension is built here (the harness tests do that).
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.problems.instance import import_module, materialize
from kernelwright.problems.loader import builtin_problems

SOLUTIONS = Path(__file__).resolve().parents[2] / "kernelwright" / "problems" / "solutions"
MANIFEST = SOLUTIONS / "manifest.json"
MAX_DEFAULT_INPUT_BYTES = 1.1 * 2**30  # "about 1 GB per input" at default size

PROBLEMS = builtin_problems()
BY_NAME = {p.name: p for p in PROBLEMS}


def _shapes(inputs: list) -> list[tuple | None]:
    return [tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in inputs]


def _flat_outputs(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    assert isinstance(out, list | tuple), f"forward returned {type(out).__name__}"
    return [t for item in out for t in _flat_outputs(item)]


# --- the suite as a whole ---------------------------------------------------------------------


def test_suite_size_and_levels():
    levels = Counter(p.level for p in PROBLEMS)
    assert len(PROBLEMS) >= 45
    assert levels[1] >= 25
    assert levels[2] >= 15
    assert levels[3] >= 5


def test_names_unique_and_ids_unique_per_level():
    names = Counter(p.name.lower() for p in PROBLEMS)
    assert [n for n, c in names.items() if c > 1] == []
    ids = Counter((p.level, p.id) for p in PROBLEMS)
    assert [k for k, c in ids.items() if c > 1] == []


def test_some_half_precision_problems():
    dtypes = Counter(p.meta.dtype for p in PROBLEMS)
    assert dtypes["float16"] + dtypes["bfloat16"] >= 3


# --- every problem ----------------------------------------------------------------------------


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.qualified)
def test_problem_static(problem):
    assert problem.builtin
    assert problem.has_small, "built-ins define get_small_inputs()"
    assert problem.has_variants, "built-ins define get_input_variants()"
    assert problem.level == int(problem.path.parent.name.removeprefix("level"))
    assert problem.meta.description
    assert problem.meta.tags
    tree = ast.parse(problem.source)
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    required = {
        "get_inputs",
        "get_init_inputs",
        "get_input_variants",
        "get_small_inputs",
        "get_small_init_inputs",
        "get_small_input_variants",
    }
    assert required <= functions
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    assert ast.get_docstring(model), "Model has a docstring saying what it computes"


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.qualified)
def test_problem_runs_small_on_cpu(problem):
    inst = materialize(problem, "small", seed=0)
    assert inst.size == "small"
    assert len(inst.variants) >= 1
    dtype = getattr(torch, problem.meta.dtype)
    default_shapes = _shapes(inst.inputs)
    torch.manual_seed(0)
    model = inst.make_model().eval()
    for params in model.parameters():
        assert params.dtype == dtype, "weights are in the problem's dtype"
    for i, inputs in enumerate(inst.input_sets()):
        assert len(inputs) == len(inst.inputs)
        if i > 0:
            assert _shapes(inputs) != default_shapes, f"variant {i - 1} has the default shapes"
        floats = [x for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
        assert floats and all(x.dtype == dtype for x in floats)
        with torch.no_grad():
            outs = _flat_outputs(model(*inputs))
        assert outs
        for out in outs:
            if out.is_floating_point():
                assert torch.isfinite(out).all(), f"non-finite output on input set {i}"


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.qualified)
def test_problem_default_shapes_without_allocating(problem):
    """Default-size inputs, built on the meta device: shapes, variants' shapes and sizes."""
    module = import_module(problem)
    with torch.device("meta"):
        inputs = module.get_inputs()
        variants = module.get_input_variants()
    shapes = _shapes(inputs)
    assert variants
    for variant in variants:
        assert len(variant) == len(inputs)
        assert _shapes(variant) != shapes
    for x in [*inputs, *(t for v in variants for t in v)]:
        if isinstance(x, torch.Tensor):
            assert x.numel() * x.element_size() <= MAX_DEFAULT_INPUT_BYTES, tuple(x.shape)
    assert isinstance(module.get_init_inputs(), list | tuple)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.qualified)
def test_input_constraints_hold_on_small_inputs(problem):
    inst = materialize(problem, "small", seed=1)
    for inputs in inst.input_sets():
        for index in problem.meta.input_constraints:
            kind, bound = problem.meta.constraint(index)
            x = inputs[index]
            if kind.value == "indices":
                assert not x.is_floating_point()
                assert int(x.min()) >= 0 and (bound is None or int(x.max()) < bound)
            elif kind.value == "mask":
                assert bool(((x == 0) | (x == 1)).all())
            elif kind.value == "distribution":
                assert bool((x >= 0).all())
                torch.testing.assert_close(x.sum(-1), torch.ones_like(x.sum(-1)))


# --- the oracle solutions ---------------------------------------------------------------------


def _manifest() -> list[dict]:
    """The oracle entries (no `suite`); the adversarial ones are checked in test_adversarial_manifest.py."""
    return [e for e in _all_entries() if "suite" not in e]


def _all_entries() -> list[dict]:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


def test_manifest_entries_valid():
    entries = _manifest()
    assert isinstance(entries, list) and entries
    reasons = {r.value for r in Reason}
    files = set()
    for entry in entries:
        assert set(entry) == {"problem", "file", "backend", "expected", "reason", "note"}, entry
        assert entry["problem"] in BY_NAME, entry["problem"]
        assert entry["backend"] in {"cpp", "cuda"}
        assert entry["expected"] in {Verdict.CORRECT, Verdict.INCORRECT, Verdict.REJECTED}
        if entry["expected"] == "correct":
            assert entry["reason"] is None
        else:
            assert entry["reason"] in reasons
        assert isinstance(entry["note"], str) and entry["note"]
        assert entry["file"] not in files, "one entry per file"
        files.add(entry["file"])
        path = SOLUTIONS / entry["file"]
        assert path.is_file(), entry["file"]
        assert path.parent.name == entry["problem"]


@pytest.mark.parametrize("entry", _manifest() if MANIFEST.exists() else [], ids=lambda e: e["file"])
def test_solution_file_shape(entry):
    """ModelNew exists, kernels go through load_inline with a distinct name, the backend matches."""
    source = (SOLUTIONS / entry["file"]).read_text(encoding="utf-8")
    tree = ast.parse(source)
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assert "ModelNew" in classes
    assert "Model" not in classes
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name | ast.Attribute)
        and _call_name(n) in ("load_inline", "load_kernels")
    ]
    assert len(calls) == 1
    if _call_name(calls[0]) == "load_kernels":  # the fast-build form: name first, lang keyword
        name = calls[0].args[0]
        lang = {k.arg: k.value for k in calls[0].keywords}["lang"]
        assert isinstance(name, ast.Constant) and name.value.startswith("kw_")
        assert isinstance(lang, ast.Constant) and lang.value == entry["backend"]
        assert ("__global__" in source) == (entry["backend"] == "cuda")
        return
    keywords = {k.arg: k.value for k in calls[0].keywords}
    assert isinstance(keywords.get("name"), ast.Constant)
    assert keywords["name"].value.startswith("kw_")
    if entry["backend"] == "cuda":
        assert "cuda_sources" in keywords
        assert "__global__" in source
    else:
        assert "cuda_sources" not in keywords
        assert "__global__" not in source


def _call_name(node: ast.Call) -> str:
    return node.func.id if isinstance(node.func, ast.Name) else node.func.attr


def test_extension_names_distinct():
    names = []
    for entry in _manifest():
        tree = ast.parse((SOLUTIONS / entry["file"]).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _call_name(node) == "load_inline":
                names += [k.value.value for k in node.keywords if k.arg == "name"]
    assert len(names) == len(set(names))


def test_manifest_coverage():
    entries = _manifest()
    assert len({e["problem"] for e in entries}) >= 10

    def count(backend: str, correct: bool) -> int:
        return sum(1 for e in entries if e["backend"] == backend and (e["expected"] == "correct") == correct)

    assert count("cpp", True) >= 6
    assert count("cuda", True) >= 4
    assert count("cpp", False) >= 3
    assert count("cuda", False) >= 3


def test_every_solution_file_is_in_the_manifest():
    listed = {e["file"] for e in _all_entries()} | {e["problem_file"] for e in _all_entries() if "problem_file" in e}
    on_disk = {p.relative_to(SOLUTIONS).as_posix() for p in SOLUTIONS.rglob("*.py") if not p.name.startswith("_")}
    assert on_disk == listed


# --- the GPU demo's problem (issue #29) ---------------------------------------------------------


def test_gelu_layernorm_bf16_is_the_own_model_region_with_an_affine_a_kernel_cannot_skip():
    """The module `nn.Sequential(nn.GELU(), nn.LayerNorm(n))` in bf16 that the own-model flow
    extracted and measured, with its weight and bias drawn away from ones and zeros."""
    problem = BY_NAME["gelu_layernorm_bf16"]
    assert problem.meta.dtype == "bfloat16" and problem.level == 2
    inst = materialize(problem, "small", seed=0)
    torch.manual_seed(0)
    model = inst.make_model().eval()
    region = torch.nn.Sequential(torch.nn.GELU(), torch.nn.LayerNorm(256, eps=1e-5, dtype=torch.bfloat16)).eval()
    region[1].load_state_dict({"weight": model.weight, "bias": model.bias})
    with torch.no_grad():
        for inputs in inst.input_sets():
            assert torch.equal(model(*inputs), region(*inputs))
    assert (model.weight.float() - 1).abs().max() > 0.1 and model.bias.float().abs().max() > 0.1
    with torch.device("meta"):
        module = import_module(problem)
        assert [tuple(x.shape) for x in module.get_inputs()] == [(8, 1024, 4096)]  # the shape measured
