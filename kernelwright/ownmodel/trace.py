"""Every aten call of one forward, as the kernels see it.

A `TorchDispatchMode` sits below autograd, so composite ops arrive decomposed (`linear` as `t` and
`addmm`, `layer_norm` as `native_layer_norm`): the ops that launch work. Each call keeps its
overload, its arguments with each tensor replaced by a `TensorArg` (shape, dtype) and every other
argument as given (so the call can be written back as code), its outputs' specs, and what the
roofline needs: bytes touched (each distinct input and output tensor once) and flops (torch's own
flop formulas, `torch.utils.flop_counter`, which count matmuls, convolutions and attention and
nothing else, so elementwise ops come out memory-bound, as they are).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry


@dataclass(frozen=True)
class TensorArg:
    """A tensor argument, by shape and dtype (its values are drawn fresh when extracted); an
    integer tensor also keeps the range its values took (indices must stay in bounds)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    low: int = 0
    high: int = 0  # exclusive; 0 for a floating or empty tensor

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorArg:
        shape = tuple(int(d) for d in tensor.shape)
        if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
            return cls(shape, tensor.dtype)
        if tensor.numel() == 0:
            return cls(shape, tensor.dtype)
        return cls(shape, tensor.dtype, int(tensor.min()), int(tensor.max()) + 1)


@dataclass(frozen=True)
class OpCall:
    """One aten call: `op` as `torch.ops` names it and how to call it again."""

    op: torch._ops.OpOverload
    args: tuple[Any, ...]  # tensors replaced by TensorArg
    kwargs: dict[str, Any]
    outputs: tuple[Any, ...]  # flattened outputs: TensorArg, or the non-tensor value
    bytes: int
    flops: int | None  # None where torch has no formula (0 is counted for every op it skips)

    @property
    def name(self) -> str:
        """The profiler's name for it: `aten::addmm` (no overload)."""
        return str(self.op._schema.name)

    @property
    def qualified(self) -> str:
        """`aten.addmm.default`, as in `torch.ops.aten.addmm.default`."""
        return f"{self.op.namespace}.{self.op._schema.name.split('::')[-1]}.{self.op._overloadname}"

    def tensors(self) -> list[TensorArg]:
        leaves, _ = tree_flatten((self.args, self.kwargs))
        return [leaf for leaf in leaves if isinstance(leaf, TensorArg)]

    def shape_key(self) -> tuple[tuple[int, ...], ...]:
        """The shapes of the tensor arguments that are not scalars and not in a list, in argument
        order: what a profiler row is matched on (its shapes leave tensor lists empty)."""
        direct = [*self.args, *self.kwargs.values()]
        return tuple(a.shape for a in direct if isinstance(a, TensorArg) and a.shape)


def _replace_tensors(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return TensorArg.of(value)
    if isinstance(value, list):
        return [_replace_tensors(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_replace_tensors(v) for v in value)
    return value


def _bytes(values: list[Any]) -> int:
    seen: set[int] = set()
    total = 0
    for value in values:
        if isinstance(value, torch.Tensor) and id(value) not in seen:
            seen.add(id(value))
            total += value.numel() * value.element_size()
    return total


def _flops(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int | None:
    formula = flop_registry.get(op.overloadpacket)
    if formula is None:
        return 0
    try:
        return int(formula(*args, **kwargs, out_val=out))
    except Exception:  # a formula torch ships that does not take these arguments: the flops stay unknown
        return None


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[OpCall] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if isinstance(func, torch._ops.OpOverload):
            ins, _ = tree_flatten((args, kwargs))
            outs, _ = tree_flatten(out)
            self.calls.append(
                OpCall(
                    op=func,
                    args=_replace_tensors(tuple(args)),
                    kwargs={k: _replace_tensors(v) for k, v in kwargs.items()},
                    outputs=tuple(_replace_tensors(o) for o in outs),
                    bytes=_bytes(ins + outs),
                    flops=_flops(func, args, kwargs, out),
                )
            )
        return out


def record_calls(module: torch.nn.Module, inputs: tuple[Any, ...]) -> list[OpCall]:
    """The aten calls of one `module(*inputs)` under no_grad, in order."""
    recorder = _Recorder()
    with torch.no_grad(), recorder:
        module(*inputs)
    return recorder.calls
