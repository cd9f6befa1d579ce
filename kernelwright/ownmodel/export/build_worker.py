"""The export's subprocess (`python -m kernelwright.ownmodel.export.build_worker JOB.json`): the
steps that run the user's and the candidate's code, kept out of the command's process and under
its timeout. It builds each `load_inline` extension of the package's kernel ahead of time (the
`.so` and its C++/CUDA source land in the package), reads the problem's verified shapes, and
lines the winner's tensors up with the reference's. Builds go through the harness's candidate
loader into its build cache, so a winner `eval` (or the run) already built is not compiled again.

Lining up: the harness judged `ModelNew` against `Model` with both built under the same seed
(KernelBench's convention), so each tensor of the winner equals one of the reference's. Each is
matched by name where the reference has that name and the values agree, else to the first
unmatched reference tensor of equal value; a tensor with no match (weights the winner derives)
cannot take the user's module's parameters, and the export says so.

Writes JSON to the job's `result` path: {"ok": true, ...} or {"ok": false, "kind": "build" |
"crash" | "usage", "message": ...}.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

SEED = 0


class _Refused(Exception):
    """What the export cannot do with this winner (a usage error in the command)."""


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _build(folder: Path, candidate: Path, cache_root: Path) -> list[str]:
    """Build the candidate's extensions as the harness does (its loader, its content-addressed
    cache: a kernel `eval` built is not compiled again) and copy each library and its source
    into the package; returns the extensions' names."""
    from kernelwright.problems.candidate.loader import load_candidate

    builds: list[dict[str, Any]] = []
    load_candidate(candidate, cache_root, builds=builds)
    names = []
    for build in builds:
        name, library = str(build["name"]), Path(str(build["library"]))
        shutil.copy2(library, folder / f"{name}.so")
        for source, suffix in (("main.cpp", ".cpp"), ("cuda.cu", ".cu")):
            if (library.parent / source).is_file():
                shutil.copy2(library.parent / source, folder / f"{name}{suffix}")
        names.append(name)
    return names


def _signatures(instance: Any) -> list[list[dict[str, Any]]]:
    import torch

    out = []
    for i, inputs in enumerate(instance.input_sets()):
        row = []
        for j, value in enumerate(inputs):
            if not isinstance(value, torch.Tensor):
                raise _Refused(f"input {j} of input set {i} is a {type(value).__name__}: the op takes tensors only")
            row.append({"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")})
        out.append(row)
    return out


def _line_up(reference: Any, winner: Any) -> tuple[list[dict[str, Any]], dict[str, str]]:
    import torch

    theirs = dict([*reference.named_parameters(), *reference.named_buffers()])
    mine = dict([*winner.named_parameters(), *winner.named_buffers()])
    used: set[str] = set()
    mapping: dict[str, str] = {}

    def same(a: torch.Tensor, b: torch.Tensor) -> bool:
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a.detach().cpu(), b.detach().cpu()))

    for name, tensor in mine.items():
        if name in theirs and name not in used and same(tensor, theirs[name]):
            match: str | None = name
        else:
            match = next((n for n, t in theirs.items() if n not in used and same(tensor, t)), None)
        if match is None:
            raise _Refused(
                f"the winner's tensor {name} {list(tensor.shape)} equals none of the reference Model's "
                "(a weight it derives itself cannot take the module's own parameters)"
            )
        used.add(match)
        mapping[name] = match
    tensors = [
        {"name": n, "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")} for n, t in theirs.items()
    ]
    return tensors, mapping


def _single_output(reference: Any, inputs: list[Any]) -> bool:
    """Whether the region returns one tensor (else a tuple): the reference run on meta tensors."""
    import torch
    from torch.func import functional_call

    tensors = {n: t.to("meta") for n, t in [*reference.named_parameters(), *reference.named_buffers()]}
    with torch.no_grad():
        out = functional_call(reference, tensors, tuple(inputs))
    if isinstance(out, tuple | list):
        if not all(isinstance(o, torch.Tensor) for o in out):
            raise _Refused("the region returns something other than tensors")
        return False
    if not isinstance(out, torch.Tensor):
        raise _Refused(f"the region returns a {type(out).__name__}, not tensors")
    return True


def _train_sensitive(reference: Any, source: str) -> bool:
    """Whether the region may compute otherwise in training mode (dropout, batch statistics): the
    op, judged in eval mode, then stands aside for a module in training mode. Erring towards yes."""
    from torch import nn

    kinds = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm)
    if any(isinstance(m, kinds) for m in reference.modules()):
        return True
    return re.search(r"\btraining\b|dropout|batch_norm|instance_norm", source, re.IGNORECASE) is not None


def run(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    from kernelwright.problems import load_problem_file
    from kernelwright.problems.instance import materialize
    from kernelwright.vocabulary import Size

    folder = Path(job["folder"])
    try:
        built = _build(folder, Path(job["candidate"]), Path(job["cache_root"]))
    except Exception as exc:  # the compiler's output is in the message
        kind = "build" if "Error building extension" in str(exc) else "crash"
        return {"ok": False, "kind": kind, "message": f"{type(exc).__name__}: {exc}"[-4000:]}
    if sorted(built) != sorted(job["extensions"]):
        message = f"the winner built {sorted(built)}, its load_inline calls name {sorted(job['extensions'])}"
        return {"ok": False, "kind": "usage", "message": message}
    try:
        problem = load_problem_file(folder / "reference.py")
        instance = materialize(problem, Size(job["size"]), seed=SEED, shapes_only=True)
        signatures = _signatures(instance)
        reference_module = _load(folder / "reference.py", "_kw_export_reference")
        kernel = _load(folder / "kernel.py", "_kw_export_kernel")
        torch.manual_seed(SEED)
        reference = reference_module.Model(*instance.init_inputs)
        torch.manual_seed(SEED)
        winner = kernel.ModelNew(*instance.init_inputs)
        tensors, mapping = _line_up(reference, winner)
        single = _single_output(reference, instance.inputs)
        sensitive = _train_sensitive(reference, problem.source)
    except _Refused as exc:
        return {"ok": False, "kind": "usage", "message": str(exc)}
    except Exception as exc:  # the candidate's or the problem's code
        detail = traceback.format_exc(limit=-3)
        return {"ok": False, "kind": "crash", "message": f"{type(exc).__name__}: {exc}\n{detail}"[-4000:]}
    small = instance.size == Size.SMALL
    return {
        "ok": True,
        "signatures": signatures,
        "tensors": tensors,
        "winner_tensors": mapping,
        "inputs_fn": "get_small_inputs" if small else "get_inputs",
        "init_fn": "get_small_init_inputs"
        if small and hasattr(instance.module, "get_small_init_inputs")
        else "get_init_inputs",
        "seed": SEED,
        "single_output": single,
        "train_sensitive": sensitive,
    }


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[1]).read_text())
    result = run(job)
    Path(job["result"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
