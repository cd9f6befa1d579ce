"""A problem's shapes and sizes without allocating its tensors.

`get_inputs()` and the model are run under `torch.device("meta")`: factory calls (`torch.rand`,
`torch.randn`, ...) make meta tensors, which carry shape and dtype but no storage, and most
operators have meta kernels that infer the output's shape. A KernelBench level-1 problem whose
inputs take gigabytes is described in milliseconds. Where the forward cannot run on meta tensors
(data-dependent shapes, `.item()`), the output size is unknown and estimates say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from kernelwright.errors import ProblemError
from kernelwright.problems.instance import Size, import_module, materialize
from kernelwright.problems.model import Problem


@dataclass(frozen=True)
class TensorShape:
    shape: tuple[int, ...]
    dtype: str
    nbytes: int

    def describe(self) -> str:
        return f"{self.dtype}[{', '.join(str(d) for d in self.shape)}]"


Item = TensorShape | int | float | bool


def _describe(value: Any) -> Item:
    if isinstance(value, torch.Tensor):
        return TensorShape(
            tuple(value.shape), str(value.dtype).removeprefix("torch."), value.numel() * value.element_size()
        )
    return value  # a scalar argument


def describe_item(item: Item) -> str:
    """`float32[16, 1024]` for a tensor, the value itself for a scalar."""
    return item.describe() if isinstance(item, TensorShape) else repr(item)


def _nbytes(items: list[Item]) -> int:
    return sum(i.nbytes for i in items if isinstance(i, TensorShape))


def _outputs(value: Any) -> list[TensorShape]:
    if isinstance(value, torch.Tensor):
        return [
            TensorShape(
                tuple(value.shape), str(value.dtype).removeprefix("torch."), value.numel() * value.element_size()
            )
        ]
    if isinstance(value, list | tuple):
        return [shape for v in value for shape in _outputs(v)]
    return []


@dataclass(frozen=True)
class Footprint:
    """What one size of a problem holds: its inputs, shape variants, parameters and outputs."""

    size: Size
    inputs: list[Item]
    variants: list[list[Item]]
    param_bytes: int
    outputs: list[TensorShape] | None  # None: the forward could not run on meta tensors
    notes: list[str] = field(default_factory=list)
    init_inputs: list[str] = field(default_factory=list)  # the constructor's arguments, described

    @property
    def input_bytes(self) -> int:
        return _nbytes(self.inputs)

    @property
    def largest_input_bytes(self) -> int:
        """The largest input set, default shapes or a variant."""
        return max([self.input_bytes, *(_nbytes(v) for v in self.variants)])

    @property
    def output_bytes(self) -> int | None:
        return None if self.outputs is None else sum(o.nbytes for o in self.outputs)


def measure(problem: Problem, size: Size = Size.DEFAULT) -> Footprint:
    """Shapes, dtypes and byte counts of `problem` at `size`, with nothing allocated."""
    module = import_module(problem)
    notes: list[str] = []
    with torch.device("meta"):
        try:
            inst = materialize(problem, size, module=module)
        except ProblemError:
            inst = None  # input code that needs real values (numpy, .item()): build them for real below
        if inst is None:
            with torch.device("cpu"):
                inst = materialize(problem, size, module=module)
            notes.append("inputs were built for real: get_inputs() cannot run on the meta device")
        try:
            model = inst.make_model()
        except ProblemError as exc:
            raise ProblemError(f"{exc} (while building the model on the meta device)") from exc
        param_bytes = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
        outputs: list[TensorShape] | None
        try:
            with torch.no_grad():
                outputs = _outputs(model(*inst.inputs))
        except Exception as exc:  # the user's forward: data-dependent code cannot run on meta tensors
            outputs = None
            notes.append(f"output size unknown: the forward cannot run on meta tensors ({type(exc).__name__})")
    return Footprint(
        size=inst.size,
        inputs=[_describe(v) for v in inst.inputs],
        variants=[[_describe(v) for v in variant] for variant in inst.variants],
        param_bytes=param_bytes,
        outputs=outputs,
        notes=notes,
        init_inputs=[describe_item(_describe(v)) if isinstance(v, torch.Tensor) else repr(v) for v in inst.init_inputs],
    )


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"
