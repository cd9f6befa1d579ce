"""Verify in place: the user's whole model against itself with its regions replaced by their
candidates, written as one problem and one candidate the harness judges like any other.

    files = write_verify(loaded, [RegionCandidate("up", Path("best.py"))], Path("verify/"))
    # then, from the CLI: evaluate_files(load_problem_file(files.problem), [files.candidate], opts)

- The problem's `Model` is the model the factory builds (the user's file imported by absolute
  path, once per process), `get_inputs` fresh tensors at the example inputs' shapes and dtypes.
- The candidate copies in each region's candidate file (`compose`: its `ModelNew` renamed
  `_KwRegion<i>`), builds the same model, constructs each region's class from the region
  problem's init inputs (`region_problem`: the shapes the submodule was built with) and loads
  the submodule's parameters into it by name, strictly. Its `forward` runs the model with each
  region's submodule forward replaced by its candidate's for the call (an instance attribute set
  around the call, then removed), so what the harness's static checks read (`ModelNew.forward`
  reaches the regions, and their kernels) is what runs.

Both are built after the harness seeds the weights (the same seed for Model and ModelNew), so
the model's parameters are equal in both; a factory that draws them from another source must
draw the same ones twice. Everything else is the harness's, unchanged: the fuzzing, the hack
checks, the timing against eager and torch.compile of the whole model. The rest of the model is
PyTorch by definition, so the CLI judges under policy `engineering` (library ops beside the
candidate's own kernels, their share reported), never `strict`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

from kernelwright.errors import UsageError
from kernelwright.ownmodel.compose import compose
from kernelwright.ownmodel.extract import _constraint, _tensor_code
from kernelwright.ownmodel.loading import LoadedModel
from kernelwright.ownmodel.profiling import dtype_name
from kernelwright.ownmodel.region_problem import Region, find_region, write_region
from kernelwright.ownmodel.trace import TensorArg
from kernelwright.problems.loader import load_problem_file

_PROBLEM_DTYPES = {"float32", "float16", "bfloat16", "float64", "int32", "int64"}


@dataclass(frozen=True)
class RegionCandidate:
    """`--region PATH=CANDIDATE.py`."""

    path: str
    candidate: Path

    @classmethod
    def parse(cls, text: str) -> RegionCandidate:
        path, sep, file = text.partition("=")
        if not sep or not file:
            raise UsageError(f"--region {text!r} must be PATH=CANDIDATE.py", hint="for example --region up=best.py")
        candidate = Path(file)
        if not candidate.is_file():
            raise UsageError(f"--region {text!r}: candidate file {candidate} does not exist")
        return cls(path.strip(), candidate)


@dataclass(frozen=True)
class VerifyFiles:
    problem: Path  # the whole model
    candidate: Path  # the model with its regions replaced
    regions: dict[str, tuple[Path, Path]]  # region path -> (its problem file, its candidate file)


_LOADER = '''
_KW_MODEL_FILE = {file!r}
_KW_FACTORY = {factory!r}
_KW_MODULE_NAME = {name!r}


def _kw_user_module():
    """The model's file, imported once per process (the problem and the candidate share it)."""
    if _KW_MODULE_NAME not in sys.modules:
        folder = os.path.dirname(_KW_MODEL_FILE)
        if folder not in sys.path:
            sys.path.insert(0, folder)  # the file may import its neighbours
        spec = importlib.util.spec_from_file_location(_KW_MODULE_NAME, _KW_MODEL_FILE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[_KW_MODULE_NAME] = module
        spec.loader.exec_module(module)
    return sys.modules[_KW_MODULE_NAME]


def _kw_build_model():
    """The module the factory returns (its example inputs are not used: get_inputs draws them)."""
    module, _ = getattr(_kw_user_module(), _KW_FACTORY)()
    return module
'''


def _inputs(loaded: LoadedModel) -> tuple[str, str, dict[int, str], str]:
    """(forward's parameters, get_inputs's list, input constraints, the main dtype)."""
    names, items, constraints = [], [], {}
    for i, value in enumerate(loaded.inputs):
        names.append(f"x{i}")
        if isinstance(value, torch.Tensor):
            arg = TensorArg.of(value)
            items.append(_tensor_code(arg))
            if not arg.dtype.is_floating_point:
                constraints[i] = _constraint(arg)
        else:
            items.append(repr(value))
    tensors = [v for v in loaded.inputs if isinstance(v, torch.Tensor)]
    dtype = dtype_name(max(tensors, key=lambda t: t.numel()).dtype)
    return ", ".join(names), "[" + ", ".join(items) + "]", constraints, dtype


def _loader(loaded: LoadedModel) -> str:
    file = str(loaded.path.resolve())
    name = f"kernelwright_verify_{hashlib.sha256(file.encode()).hexdigest()[:16]}"
    return _LOADER.format(file=file, factory=loaded.factory, name=name)


def problem_source(loaded: LoadedModel, regions: list[Region]) -> str:
    params, inputs, constraints, dtype = _inputs(loaded)
    where = ", ".join(r.label for r in regions)
    meta: dict[str, object] = {
        "tags": ["verify", "whole-model"],
        "dtype": dtype if dtype in _PROBLEM_DTYPES else "float32",
        "description": f"{loaded.spec}, the whole model, to verify {where} replaced in place.",
    }
    if constraints:
        meta["input_constraints"] = constraints
    return f'''"""{loaded.spec}: the whole model as its factory builds it (written by `kernelwright model verify`)."""

import importlib.util
import os
import sys

import torch
import torch.nn as nn

PROBLEM = {meta!r}
{_loader(loaded)}

class Model(nn.Module):
    """The user's model, unchanged."""

    def __init__(self):
        super().__init__()
        self.model = _kw_build_model()

    def forward(self, {params}):
        return self.model({params})


def get_inputs():
    return {inputs}


def get_init_inputs():
    return []
'''


def candidate_source(loaded: LoadedModel, regions: list[Region], candidates: list[Path]) -> str:
    unique = list(dict.fromkeys(c.resolve() for c in candidates))
    pieces, future = compose([(str(c), c.read_text(encoding="utf-8")) for c in unique])
    class_of = {c: p.class_name for c, p in zip(unique, pieces, strict=True)}
    params = _inputs(loaded)[0]
    copied = "".join(
        f"\n# ---- candidate {p.label} (its ModelNew is {p.class_name}) ----\n\n{p.source.rstrip()}\n\n" for p in pieces
    )
    build, patch = [], []
    for i, (region, candidate) in enumerate(zip(regions, candidates, strict=True)):
        build.append(
            f"        self.region_{i} = {class_of[candidate.resolve()]}(*{list(region.code.init_inputs)!r})\n"
            f"        self.region_{i}.load_state_dict(self.model.get_submodule({region.path!r}).state_dict(), strict=True)\n"
        )
        patch.append(f"({region.path!r}, self.region_{i})")
    where = ", ".join(f"{r.label} by {c}" for r, c in zip(regions, candidates, strict=True))
    return f'''{"from __future__ import annotations" + chr(10) if future else ""}"""{loaded.spec} with {where} (written by `kernelwright model verify`)."""
{copied}
# ---- the model, with its regions replaced ----

import contextlib
import importlib.util
import os
import sys

import torch
import torch.nn as nn
{_loader(loaded)}

@contextlib.contextmanager
def _kw_in_place(model, regions):
    """Each region's submodule runs its candidate's forward for the duration of one call."""
    subs = [(model.get_submodule(path), region) for path, region in regions]
    for sub, region in subs:
        sub.forward = region.forward
    try:
        yield
    finally:
        for sub, _ in subs:
            del sub.forward


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = _kw_build_model()
{"".join(build)}
    def forward(self, {params}):
        with _kw_in_place(self.model, ({", ".join(patch)},)):
            return self.model({params})
'''


def write_verify(loaded: LoadedModel, pairs: list[RegionCandidate], out_dir: Path) -> VerifyFiles:
    """Each region's problem file, the whole model's problem and the patched candidate, in
    `out_dir` (see the module doc); a bad region or candidate is a UsageError."""
    if not pairs:
        raise UsageError("no region to verify", hint="--region PATH=CANDIDATE.py (a path from `model profile`)")
    paths = [p.path for p in pairs]
    twice = sorted({p for p in paths if paths.count(p) > 1})
    if twice:
        raise UsageError(f"--region {twice[0]!r} is given twice")
    regions = [find_region(loaded, p.path) for p in pairs]
    for a in regions:
        for b in regions:
            if a is not b and (a.path == "" or b.path.startswith(a.path + ".")):
                raise UsageError(f"--region {b.path!r} is inside --region {a.path!r}: give one of them")
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"verify_{loaded.path.stem}_{loaded.factory}"
    problem = out_dir / f"{stem}.py"
    candidate = out_dir / f"{stem}_patched.py"
    problem.write_text(problem_source(loaded, regions), encoding="utf-8")
    candidate.write_text(candidate_source(loaded, regions, [p.candidate for p in pairs]), encoding="utf-8")
    load_problem_file(problem)  # a file the loader refuses is our bug
    written = {
        r.path: (write_region(r, loaded.spec, out_dir), p.candidate) for r, p in zip(regions, pairs, strict=True)
    }
    return VerifyFiles(problem=problem, candidate=candidate, regions=written)
