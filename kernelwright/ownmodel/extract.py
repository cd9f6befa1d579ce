"""One ranked operator of a model, written as a KernelBench-format problem file.

The file's `Model.forward` is the aten call itself (`torch.ops.aten.addmm.default(x0, x1, x2)`),
its non-tensor arguments written as the trace saw them; `get_inputs` draws fresh tensors at the
recorded shapes and dtypes (contiguous: the trace's strides are not kept); `get_init_inputs` is
empty (a module's parameters are plain inputs of its aten ops); `get_input_variants` holds the
other shapes the trace saw for the same op called the same way. A `PROBLEM` dict says where it
came from. The file loads with `problems.loader` like any problem, so every command takes it.

What cannot be written is refused with one line (UsageError, exit 2): an op the trace never saw
(a composite op, whose work is in the ops it calls, or one that runs inside another op, which
the message names), an op with no tensor input, one that writes into its
inputs, one returning something other than tensors, and arguments with no literal form (a device,
a generator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelwright.errors import UsageError
from kernelwright.ownmodel.loading import LoadedModel
from kernelwright.ownmodel.profiling import dtype_name, rank_ops
from kernelwright.ownmodel.report import OpRow
from kernelwright.ownmodel.trace import OpCall, TensorArg
from kernelwright.problems.loader import load_problem_file

_PROBLEM_DTYPES = {"float32", "float16", "bfloat16", "float64", "int32", "int64"}
_SYMBOLS = (torch.dtype, torch.layout, torch.memory_format)


class _NoLiteral(Exception):
    """An argument with no literal form in a problem file."""


@dataclass
class _Writer:
    """Renders a call's arguments; tensors become x0, x1, ... in order."""

    tensors: list[TensorArg]

    def arg(self, value: Any) -> str:
        if isinstance(value, TensorArg):
            self.tensors.append(value)
            return f"x{len(self.tensors) - 1}"
        if isinstance(value, list | tuple):
            items = ", ".join(self.arg(v) for v in value)
            return f"[{items}]" if isinstance(value, list) else f"({items}{',' if len(value) == 1 else ''})"
        if value is None or isinstance(value, bool | int | str):
            return repr(value)
        if isinstance(value, float):
            return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
        if isinstance(value, _SYMBOLS):
            return str(value)  # torch.float32, torch.strided, torch.contiguous_format
        raise _NoLiteral(type(value).__name__)


def _signature(call: OpCall) -> str:
    """The call with tensors as placeholders: two calls with the same one fit one `forward`."""
    return _Writer([]).arg((call.args, sorted(call.kwargs.items())))


def _tensor_code(t: TensorArg) -> str:
    shape, dtype = repr(t.shape), f"torch.{dtype_name(t.dtype)}"
    if t.dtype == torch.bool:
        return f"torch.rand({shape}) < 0.5"
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return f"torch.randn({shape}, dtype={dtype})"
    return f"torch.randint({t.low}, {max(t.high, t.low + 1)}, {shape}, dtype={dtype})"


def _constraint(t: TensorArg) -> str:
    """How the fuzzer may redraw a non-floating input: a mask, indices within the range the trace
    saw, or not at all (negative integers: their meaning is the model's)."""
    if t.dtype == torch.bool:
        return "mask"
    return f"indices:{t.high}" if t.low >= 0 and t.high > 0 else "fixed"


def _inputs_code(tensors: list[TensorArg]) -> str:
    return "[" + ", ".join(_tensor_code(t) for t in tensors) + "]"


def select_row(rows: list[OpRow], selector: str) -> OpRow:
    """The row `--op` names: a rank (`1`) or an op (`gelu`, `aten::gelu`, `aten.gelu.default`), the best ranked first."""
    if selector.isdigit():
        rank = int(selector)
        if not 1 <= rank <= len(rows):
            raise UsageError(f"--op {rank}: the profile ranks {len(rows)} ops (1 to {len(rows)})")
        return rows[rank - 1]
    wanted = selector.removeprefix("aten::")
    for row in rows:
        if row.name == f"aten::{wanted}" or row.op == selector or row.name == selector:
            return row
    names = ", ".join(dict.fromkeys(r.name.removeprefix("aten::") for r in rows[:8]))
    raise UsageError(f"--op {selector!r}: no such op in the profile", hint=f"ranked first: {names}")


def _call_for(row: OpRow, calls: list[OpCall]) -> OpCall:
    shapes = [spec.shape for spec in row.inputs]
    call = next(
        (c for c in calls if c.qualified == row.op and [list(t.shape) for t in c.tensors() if t.shape] == shapes), None
    )
    if call is None and row.inside is not None:
        raise UsageError(
            f"cannot extract {row.name} (rank {row.rank}): it runs inside {row.inside}, which the trace saw",
            hint=f"extract --op {row.inside.split(', ')[0]}",
        )
    if call is None:
        raise UsageError(
            f"cannot extract {row.name} (rank {row.rank}): a composite op, not seen below autograd",
            hint="extract the ops it calls, ranked in their own right",
        )
    return call


def _check(call: OpCall, row: OpRow) -> None:
    what = f"cannot extract {call.qualified} (rank {row.rank})"
    if not call.tensors():
        raise UsageError(f"{what}: it takes no tensor input")
    if call.op._schema.is_mutable:
        raise UsageError(f"{what}: it writes into its inputs (in-place or out=)")
    others = [type(o).__name__ for o in call.outputs if not isinstance(o, TensorArg)]
    if others or not call.outputs:
        raise UsageError(f"{what}: it returns {', '.join(others) or 'nothing'}, not tensors")


def problem_source(call: OpCall, row: OpRow, origin: str, variants: list[list[TensorArg]]) -> str:
    """The problem file's text for `call` (see the module doc)."""
    tensors: list[TensorArg] = []
    writer = _Writer(tensors)
    try:
        args = [writer.arg(a) for a in call.args] + [f"{k}={writer.arg(v)}" for k, v in call.kwargs.items()]
    except _NoLiteral as exc:
        raise UsageError(
            f"cannot extract {call.qualified} (rank {row.rank}): an argument of type {exc} has no literal form"
        ) from exc
    params = ", ".join(f"x{i}" for i in range(len(tensors)))
    main = max(tensors, key=lambda t: torch.Size(t.shape).numel())
    dtype = dtype_name(main.dtype)
    constraints = {i: _constraint(t) for i, t in enumerate(tensors) if not t.dtype.is_floating_point}
    meta: dict[str, object] = {
        "tags": ["extracted", call.qualified.split(".")[1]],
        "dtype": dtype if dtype in _PROBLEM_DTYPES else "float32",
        "description": f"{call.qualified} from {origin}: rank {row.rank}, {row.share:.1%} of the model's time.",
    }
    if constraints:
        meta["input_constraints"] = constraints
    variant_lines = "".join(f"\n        {_inputs_code(v)}," for v in variants)
    closing = "\n    " if variants else ""
    return f'''"""{call.qualified} at the shapes {origin} called it with (written by `kernelwright model extract`)."""

import torch
import torch.nn as nn

PROBLEM = {meta!r}


class Model(nn.Module):
    """One aten operator of the model, called as the trace saw it."""

    def __init__(self):
        super().__init__()

    def forward(self, {params}):
        return torch.ops.{call.qualified}({", ".join(args)})


def get_inputs():
    return {_inputs_code(tensors)}


def get_init_inputs():
    return []


def get_input_variants():
    # Other shapes the trace saw for the same op, called the same way.
    return [{variant_lines}{closing}]
'''


def _variants(call: OpCall, calls: list[OpCall]) -> list[list[TensorArg]]:
    def key(c: OpCall) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return tuple((t.shape, t.dtype) for t in c.tensors())

    signature, seen = _signature(call), {key(call)}
    found: list[list[TensorArg]] = []
    for other in calls:
        if other.op == call.op and key(other) not in seen and _signature(other) == signature:
            seen.add(key(other))
            found.append(other.tensors())
    return found


def extract_op(loaded: LoadedModel, selector: str, out_dir: Path) -> Path:
    """Profile `loaded`, pick the row `selector` names (a rank or an op name) and write it as
    `out_dir/<rank>_<op>.py`; returns the path (checked with the problem loader)."""
    rows, _, calls = rank_ops(loaded)
    row = select_row(rows, selector)
    call = _call_for(row, calls)
    _check(call, row)
    source = problem_source(call, row, f"{loaded.path.name}:{loaded.factory}", _variants(call, calls))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{row.rank}_{call.qualified.split('.')[1]}.py"
    path.write_text(source, encoding="utf-8")
    load_problem_file(path)  # what every command will do with it: a file it refuses is our bug
    return path
