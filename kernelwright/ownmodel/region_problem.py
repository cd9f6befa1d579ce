"""One module region of a model, written as a KernelBench-format problem file.

    path = extract_region(loaded, "mlp.fc1", Path("problems/"))   # or a rank: "1"

The file's `Model` is the submodule, built standalone from its constructor arguments
(`layers.layer_code`: `class Model(nn.Linear)`, parameter names kept), `get_init_inputs` its
shape arguments, `get_inputs` fresh tensors at the shapes and dtypes the model called it with
(other shapes it was called with are `get_input_variants`), and `PROBLEM["region"]` says where
it came from: `{"kind": "module", "path": <dotted path>, "spec": <FILE.py:FACTORY>}`, what
`kernelwright export` and `model verify` read to put the winner back.

A path that names no submodule, a region never called, and a module that cannot be written
standalone (`regions.standalone_note`: a class of the user's own, buffers, in-place, keyword
arguments) each end the command with one line (UsageError, exit 2).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import torch

from kernelwright.errors import UsageError
from kernelwright.ownmodel.extract import _constraint, _tensor_code
from kernelwright.ownmodel.layers import LayerCode, layer_code
from kernelwright.ownmodel.loading import LoadedModel
from kernelwright.ownmodel.profiling import dtype_name
from kernelwright.ownmodel.regions import ModuleTrace, RegionRow, rank_regions, standalone_note, trace_modules
from kernelwright.ownmodel.trace import TensorArg
from kernelwright.problems.loader import load_problem_file

_PROBLEM_DTYPES = {"float32", "float16", "bfloat16", "float64", "int32", "int64"}


@dataclass(frozen=True)
class Region:
    """A submodule ready to be written: its trace and its code."""

    path: str
    trace: ModuleTrace
    code: LayerCode
    row: RegionRow | None = None  # where it was picked by rank

    @property
    def label(self) -> str:
        return f"`{self.path}`" if self.path else "the whole model"

    def input_sets(self) -> list[list[TensorArg]]:
        """The tensors of its first call, then those of each call at other shapes or dtypes."""
        seen: set[tuple[tuple[tuple[int, ...], torch.dtype], ...]] = set()
        found = []
        for call in self.trace.inputs:
            tensors = [a for a in call if isinstance(a, TensorArg)]
            key = tuple((t.shape, t.dtype) for t in tensors)
            if key not in seen:
                seen.add(key)
                found.append(tensors)
        return found


def _no_such_path(loaded: LoadedModel, path: str) -> UsageError:
    names = [p for p, _ in loaded.module.named_modules() if p]
    close = difflib.get_close_matches(path, names, n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"its submodules: {', '.join(names[:8]) or 'none'}"
    return UsageError(f"--region {path!r}: {loaded.spec} has no submodule of that path", hint=hint)


def find_region(loaded: LoadedModel, selector: str) -> Region:
    """The region `selector` names: a rank in `rank_regions` (`1`, or `#1`) or a dotted submodule
    path (any submodule, ranked or not; a number that is also a child's name, as in a Sequential,
    is that child: `#1` is then the rank); refused in one line when it cannot be written standalone."""
    row: RegionRow | None = None
    names = {p for p, _ in loaded.module.named_modules()}
    number = selector.removeprefix("#")
    if number.isdigit() and (selector.startswith("#") or selector not in names):
        rows = rank_regions(loaded)
        if not 1 <= int(number) <= len(rows):
            raise UsageError(f"--region {selector}: the profile ranks {len(rows)} regions (1 to {len(rows)})")
        row = rows[int(number) - 1]
        path = row.path
    else:
        path = selector
        try:
            loaded.module.get_submodule(path)
        except AttributeError:
            raise _no_such_path(loaded, path) from None
    trace = trace_modules(loaded)[path]
    why = standalone_note(trace)
    if why:
        raise UsageError(
            f"cannot extract region {path!r} ({type(trace.module).__name__}): {why}",
            hint="extract its ops with --op, or name a submodule inside it",
        )
    return Region(path=path, trace=trace, code=layer_code(trace.module), row=row)


def _inputs_code(tensors: list[TensorArg]) -> str:
    return "[" + ", ".join(_tensor_code(t) for t in tensors) + "]"


def region_source(region: Region, spec: str) -> str:
    """The problem file's text for `region` (see the module doc)."""
    sets = region.input_sets()
    first, variants = sets[0], sets[1:]
    main = max(first, key=lambda t: torch.Size(t.shape).numel())
    dtype = dtype_name(main.dtype)
    where = f"{region.label} of {spec}"
    share = f": rank {region.row.rank}, {region.row.share:.1%} of the model's time" if region.row else ""
    meta: dict[str, object] = {
        "tags": ["extracted", "region", type(region.trace.module).__name__.lower()],
        "dtype": dtype if dtype in _PROBLEM_DTYPES else "float32",
        "description": f"{where} ({region.code.base}){share}.",
        "region": {"kind": "module", "path": region.path, "spec": spec},
    }
    constraints = {i: _constraint(t) for i, t in enumerate(first) if not t.dtype.is_floating_point}
    if constraints:
        meta["input_constraints"] = constraints
    code = region.code
    params = "".join(f", {p}" for p in code.params)
    ordered = "from collections import OrderedDict\n\n" if "OrderedDict(" in code.super_args else ""
    variant_lines = "".join(f"\n        {_inputs_code(v)}," for v in variants)
    closing = "\n    " if variants else ""
    return f'''"""{where}, standalone, at the shapes the model called it with (written by
`kernelwright model extract --region`)."""

{ordered}import torch
import torch.nn as nn

PROBLEM = {meta!r}


class Model({code.base}):
    """The model's {region.path or "module"} as {code.base} builds it. Its parameters keep the
    model's names, so the model's state_dict for it loads here; a ModelNew must keep those names
    and draw its parameters as this class does (e.g. from a {code.base} built the same way)."""

    def __init__(self{params}):
        super().__init__({code.super_args})


def get_inputs():
    return {_inputs_code(first)}


def get_init_inputs():
    return {list(code.init_inputs)!r}


def get_input_variants():
    # Other shapes the model called it with.
    return [{variant_lines}{closing}]
'''


def region_file_name(region: Region) -> str:
    stem = region.path.replace(".", "_") or "model"
    return f"{region.row.rank}_region_{stem}.py" if region.row else f"region_{stem}.py"


def write_region(region: Region, spec: str, out_dir: Path) -> Path:
    """Write `region`'s problem file in `out_dir`, checked with the problem loader."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / region_file_name(region)
    path.write_text(region_source(region, spec), encoding="utf-8")
    load_problem_file(path)  # what every command will do with it: a file it refuses is our bug
    return path


def extract_region(loaded: LoadedModel, selector: str, out_dir: Path) -> Path:
    """`find_region` then `write_region`; returns the file's path."""
    return write_region(find_region(loaded, selector), loaded.spec, out_dir)
