"""Standard torch.nn layers written back as code from their constructor arguments: how a module
region of a user's model becomes a standalone problem file.

The problem's `Model` subclasses the region's own class (`class Model(nn.Linear)`, or
`nn.Sequential` holding the chain), so its parameters have the names the user's submodule gives
them (`weight`, `bias`; `0.weight` in a Sequential): the model's state_dict for the region loads
into it, and into a candidate that keeps those names. Shape arguments (in_features,
normalized_shape) become the Model's constructor parameters, given by `get_init_inputs`; the
others (bias, eps, approximate, dtype) are written as literals.

Written: Linear, LayerNorm, RMSNorm, GELU, ReLU, SiLU, Mish, Hardswish, LeakyReLU, Tanh, Sigmoid,
Softmax, LogSoftmax, Dropout (in eval mode) and Identity, and Sequentials of them. Anything else
is refused with the reason (`NotStandalone`): a class of the user's own (its forward is code the
problem file would have to import), a subclass of a standard layer, a layer with buffers (state
the file cannot carry), an in-place activation, Dropout in training mode, a forward replaced on
the instance.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from kernelwright.ownmodel.profiling import dtype_name


class NotStandalone(Exception):
    """Why a module cannot be written as a standalone problem (one line)."""


@dataclass(frozen=True)
class LayerCode:
    """A module as code: `class Model(<base>)` whose `__init__(<params>)` calls
    `super().__init__(<super_args>)`; `init_inputs` are the params' values, in order."""

    base: str
    params: tuple[str, ...]
    init_inputs: tuple[Any, ...]
    super_args: str


_Spec = tuple[list[tuple[str, Any]], list[str]]  # (shape args: name, value), literal keyword args


def _dtype(module: nn.Module) -> list[str]:
    dtypes = {p.dtype for p in module.parameters()}
    if len(dtypes) > 1:
        raise NotStandalone(f"its parameters mix dtypes ({', '.join(sorted(map(dtype_name, dtypes)))})")
    dtype = next(iter(dtypes), torch.float32)
    return [] if dtype == torch.float32 else [f"dtype=torch.{dtype_name(dtype)}"]


def _not_inplace(module: nn.Module) -> list[str]:
    if getattr(module, "inplace", False):
        raise NotStandalone(f"its {type(module).__name__} works in place (inplace=True), writing into its input")
    return []


def _linear(m: Any) -> _Spec:
    return [("in_features", m.in_features), ("out_features", m.out_features)], [
        f"bias={m.bias is not None}",
        *_dtype(m),
    ]


def _layer_norm(m: Any) -> _Spec:
    kw = [f"eps={m.eps!r}", f"elementwise_affine={m.elementwise_affine}"]
    if m.elementwise_affine:
        kw += [f"bias={m.bias is not None}", *_dtype(m)]
    return [("normalized_shape", list(m.normalized_shape))], kw


def _rms_norm(m: Any) -> _Spec:
    return [("normalized_shape", list(m.normalized_shape))], [
        f"eps={m.eps!r}",
        f"elementwise_affine={m.elementwise_affine}",
        *_dtype(m),
    ]


def _dropout(m: Any) -> _Spec:
    if m.training and m.p > 0:
        raise NotStandalone("its Dropout is in training mode (it draws random numbers: no reference to match)")
    return [], [f"p={m.p!r}"]


_LAYERS: dict[type[nn.Module], Callable[[Any], _Spec]] = {
    nn.Linear: _linear,
    nn.LayerNorm: _layer_norm,
    nn.GELU: lambda m: ([], [f"approximate={m.approximate!r}"]),
    nn.ReLU: lambda m: ([], _not_inplace(m)),
    nn.SiLU: lambda m: ([], _not_inplace(m)),
    nn.Mish: lambda m: ([], _not_inplace(m)),
    nn.Hardswish: lambda m: ([], _not_inplace(m)),
    nn.LeakyReLU: lambda m: ([], [f"negative_slope={m.negative_slope!r}", *_not_inplace(m)]),
    nn.Tanh: lambda m: ([], []),
    nn.Sigmoid: lambda m: ([], []),
    nn.Identity: lambda m: ([], []),
    nn.Softmax: lambda m: ([], [f"dim={m.dim!r}"]),
    nn.LogSoftmax: lambda m: ([], [f"dim={m.dim!r}"]),
    nn.Dropout: _dropout,
}
if hasattr(nn, "RMSNorm"):  # torch 2.4 and later
    _LAYERS[nn.RMSNorm] = _rms_norm

SUPPORTED = ", ".join(t.__name__ for t in _LAYERS) + " and Sequentials of them"


def _check(module: nn.Module) -> None:
    cls = type(module)
    if module._buffers:
        names = ", ".join(module._buffers)
        raise NotStandalone(f"its {cls.__name__} holds buffers ({names}): state a problem file cannot carry")
    if cls not in _LAYERS and cls is not nn.Sequential:
        standard = next((t for t in (*_LAYERS, nn.Sequential) if isinstance(module, t)), None)
        if standard is not None:
            raise NotStandalone(f"a {cls.__name__}, a subclass of nn.{standard.__name__} (its code is the user's)")
        if cls.__module__.startswith("torch."):
            raise NotStandalone(f"a {cls.__name__}: only {SUPPORTED} are written standalone")
        raise NotStandalone(f"a {cls.__name__}, a class of the model's own: only {SUPPORTED} are written standalone")
    if "forward" in vars(module):
        raise NotStandalone(f"its {cls.__name__}'s forward is replaced on the instance")


def _suffix(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _child(module: nn.Module, suffix: str, params: list[tuple[str, Any]]) -> str:
    """`nn.Linear(in_features_0, out_features_0, bias=True)`, its shape args added to `params`."""
    _check(module)
    if isinstance(module, nn.Sequential):
        return f"nn.Sequential({_items(module, suffix, params)})"
    shapes, literals = _LAYERS[type(module)](module)
    names = [f"{name}{suffix}" for name, _ in shapes]
    params.extend((n, v) for n, (_, v) in zip(names, shapes, strict=True))
    return f"nn.{type(module).__name__}({', '.join([*names, *literals])})"


def _items(seq: nn.Sequential, suffix: str, params: list[tuple[str, Any]]) -> str:
    children = [(n, m) for n, m in seq._modules.items() if m is not None]
    names = [n for n, _ in children]
    code = [_child(m, f"{suffix}_{_suffix(n)}", params) for n, m in children]
    if names == [str(i) for i in range(len(names))]:
        return ", ".join(code)
    pairs = ", ".join(f"({n!r}, {c})" for n, c in zip(names, code, strict=True))
    return f"OrderedDict([{pairs}])"


def layer_code(module: nn.Module) -> LayerCode:
    """`module` as a Model class (see the module doc); NotStandalone says why it cannot be."""
    params: list[tuple[str, Any]] = []
    _check(module)
    if isinstance(module, nn.Sequential):
        args = _items(module, "", params)
        base = "nn.Sequential"
    else:
        shapes, literals = _LAYERS[type(module)](module)
        params.extend(shapes)
        args = ", ".join([*(n for n, _ in shapes), *literals])
        base = f"nn.{type(module).__name__}"
    return LayerCode(
        base=base,
        params=tuple(n for n, _ in params),
        init_inputs=tuple(v for _, v in params),
        super_args=args,
    )
