"""The runtime of an exported package (copied into it as `_runtime.py`; imports torch only, never
kernelwright): the winner as a `torch.library.custom_op`, its fake implementation, its autograd,
the guards, and `patch(model, path=...)`.

The op is `NAMESPACE::OP(Tensor[] inputs, Tensor[] params) -> Tensor[]`: the region's inputs and
the region module's own parameters and buffers (in the reference `Model`'s order), so one op
serves every instance of the module and `torch.compile` sees the weights as graph inputs.
- real implementation: the winner's `ModelNew` (package `kernel.py`, whose extension was built at
  export and is imported from the package, never rebuilt), its tensors taken from `params`;
- fake implementation: the reference `Model` (package `reference.py`) run on the fake tensors;
  outputs are new contiguous tensors of the reference's shapes and dtypes;
- backward: the reference forward recomputed under `enable_grad`, its vector-Jacobian product.

A patched module's `forward` calls the op only for what the winner was verified for (export.json:
the problem's input shapes and dtypes, the reference's parameter shapes and dtypes, the device,
autocast off, eval mode where the region has dropout or batch statistics; layout is not
guarded, the harness feeds strided views too); any other call runs
the module's original forward and warns once per reason (`FallbackWarning`; not while
torch.compile traces, where a warning would break the graph).
"""

from __future__ import annotations

import importlib
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.func import functional_call


class FallbackWarning(UserWarning):
    """A call the exported kernel was not verified for ran the original forward instead."""


def _outputs(value: Any) -> list[torch.Tensor]:
    return list(value) if isinstance(value, tuple | list) else [value]


def _attr(module: nn.Module, name: str) -> Any:
    value: Any = module
    for part in name.split("."):
        value = getattr(value, part)
    return value


def _dtype(name: str) -> torch.dtype:
    value = getattr(torch, name)
    assert isinstance(value, torch.dtype), name
    return value


def _describe(t: Any) -> str:
    if isinstance(t, torch.Tensor):
        return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)} on {t.device.type}"
    return type(t).__name__


class Exported:
    """One exported region: the op, its registrations and the patcher (see the module doc)."""

    def __init__(self, package: str, folder: Path) -> None:
        self.spec: dict[str, Any] = json.loads((folder / "export.json").read_text(encoding="utf-8"))
        self.qualname = f"{self.spec['namespace']}::{self.spec['op']}"
        self.reference = importlib.import_module(f"{package}.reference")
        self.kernel = importlib.import_module(f"{package}.kernel")
        self.device: str = self.spec["device"]
        self.signatures = [[(tuple(t["shape"]), _dtype(t["dtype"])) for t in sig] for sig in self.spec["signatures"]]
        self.tensors = [(t["name"], tuple(t["shape"]), _dtype(t["dtype"])) for t in self.spec["tensors"]]
        self.names = [name for name, _, _ in self.tensors]
        self._init_inputs = self._seeded(lambda: list(getattr(self.reference, self.spec["init_fn"])()))
        self._ref = self._make_reference().eval()  # the harness judged the winner in eval mode
        self._given = [(mine, self.names.index(theirs)) for mine, theirs in self.spec["winner_tensors"].items()]
        self._winners: dict[str, nn.Module] = {}
        self._warned: set[str] = set()
        self._patched: dict[type, type] = {}
        self.op = self._define()
        self.overload = getattr(getattr(torch.ops, self.spec["namespace"]), self.spec["op"]).default

    def _seeded(self, make: Callable[[], Any]) -> Any:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.spec["seed"]))
            return make()

    def _make_reference(self) -> nn.Module:
        """The reference Model whose tensors every call replaces: on the meta device (no memory),
        on the CPU where its constructor cannot run there."""
        try:
            with torch.device("meta"):
                return self._seeded(lambda: self.reference.Model(*self._init_inputs))
        except (RuntimeError, NotImplementedError):
            return self._seeded(lambda: self.reference.Model(*self._init_inputs))

    def _winner(self, device: torch.device) -> nn.Module:
        key = str(device)
        if key not in self._winners:
            made = self._seeded(lambda: self.kernel.ModelNew(*self._init_inputs))
            self._winners[key] = made.to(device).eval()
        return self._winners[key]

    def run_reference(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        """The reference region on these inputs and tensors (any device, fake tensors included)."""
        return _outputs(functional_call(self._ref, dict(zip(self.names, params, strict=True)), tuple(inputs)))

    def _impl(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        winner = self._winner(inputs[0].device if inputs else params[0].device)
        given = {mine: params[i] for mine, i in self._given}
        outs = _outputs(functional_call(winner, given, tuple(inputs)))
        storages = {t.untyped_storage().data_ptr() for t in [*inputs, *params]}
        results = []
        for out in outs:
            out = out.contiguous()
            results.append(out.clone() if out.untyped_storage().data_ptr() in storages else out)
        return results

    def _fake(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        return [torch.empty(o.shape, dtype=o.dtype, device=o.device) for o in self.run_reference(inputs, params)]

    def _setup(self, ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        xs, ps = inputs
        ctx.count = len(xs)
        ctx.save_for_backward(*xs, *ps)

    def _backward(self, ctx: Any, grads: list[torch.Tensor | None]) -> tuple[list[Any], list[Any]]:
        saved = list(ctx.saved_tensors)
        leaves = [t.detach().requires_grad_(t.is_floating_point() or t.is_complex()) for t in saved]
        with torch.enable_grad():
            outs = self.run_reference(leaves[: ctx.count], leaves[ctx.count :])
            pairs = [(o, g) for o, g in zip(outs, grads, strict=True) if g is not None and o.requires_grad]
            wanted = [t for t in leaves if t.requires_grad]
            found = (
                torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs], allow_unused=True)
                if pairs and wanted
                else [None] * len(wanted)
            )
        it = iter(found)
        full = [next(it) if t.requires_grad else None for t in leaves]
        return full[: ctx.count], full[ctx.count :]

    def _define(self) -> Any:
        op = torch.library.custom_op(
            self.qualname,
            self._impl,
            mutates_args=(),
            device_types=self.device,
            schema="(Tensor[] inputs, Tensor[] params) -> Tensor[]",
        )
        op.register_fake(self._fake)
        op.register_autograd(self._backward, setup_context=self._setup)
        return op

    # The guards: traced by torch.compile like any Python, so they become its guards too.
    def _why_not(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        if kwargs or len(args) != len(self.signatures[0]):
            return "arguments"
        for a in args:
            if not isinstance(a, torch.Tensor):
                return "arguments"
        params = [_attr(module, name) for name in self.names]
        for t in [*args, *params]:
            if t.device.type != self.device:
                return "device"
        if torch.is_autocast_enabled(self.device):
            return "autocast"
        if module.training and self.spec["train_sensitive"]:
            return "training"
        matched = False
        for signature in self.signatures:
            fits = True
            for a, (shape, dtype) in zip(args, signature, strict=False):
                if a.dtype != dtype or tuple(a.shape) != shape:
                    fits = False
            if fits:
                matched = True
        if not matched:
            return "inputs"
        for p, (_, shape, dtype) in zip(params, self.tensors, strict=False):
            if p.dtype != dtype or tuple(p.shape) != shape:
                return "parameters"
        return None

    def _explain(self, reason: str, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        verified = "; ".join(
            ", ".join(f"{d}{list(s)}".replace("torch.", "") for s, d in sig) for sig in self.signatures
        )
        given = ", ".join([_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()])
        why = {
            "arguments": f"it takes {len(self.signatures[0])} positional tensors, got ({given})",
            "device": f"it was verified on {self.device}, got ({given})",
            "autocast": f"autocast is on for {self.device}; it was verified without autocast",
            "training": "the region behaves differently in training mode (dropout, batch statistics); "
            "it was verified in eval mode",
            "inputs": f"inputs ({given}) are not a verified shape/dtype (verified: {verified})",
            "parameters": "the module's parameters differ in shape or dtype from the verified "
            + ", ".join(f"{n} {d}{list(s)}".replace("torch.", "") for n, s, d in self.tensors),
        }[reason]
        return f"{self.qualname}: {type(module).__name__}.forward falls back to its original code: {why}"

    def call(
        self, module: nn.Module, original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A patched module's forward: the op where verified, else the original forward."""
        reason = self._why_not(module, args, kwargs)
        if reason is not None:
            if not torch.compiler.is_compiling() and reason not in self._warned:
                self._warned.add(reason)
                warnings.warn(self._explain(reason, module, args, kwargs), FallbackWarning, stacklevel=5)
            return original(module, *args, **kwargs)
        outs = self.overload(list(args), [_attr(module, name) for name in self.names])
        return outs[0] if self.spec["single_output"] else tuple(outs)

    def _check_equivalent(self, module: nn.Module, path: str, original: Callable[..., Any]) -> None:
        """The module computes the exported region: its original forward against the reference on
        the problem's own inputs (seeded), with the module's tensors."""
        tensors = [*module.parameters(), *module.buffers()]
        device = tensors[0].device if tensors else torch.device("cpu")
        inputs = self._seeded(lambda: list(getattr(self.reference, self.spec["inputs_fn"])()))
        inputs = [t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs]
        params = [_attr(module, name) for name in self.names]
        modes = {m: m.training for m in module.modules()}
        module.train(False)  # as the harness ran the reference: no dropout, no running-stat updates
        try:
            with torch.no_grad():
                theirs = _outputs(original(module, *inputs))
                ours = self.run_reference(inputs, params)
        except Exception as exc:  # the user's module on the problem's inputs: its error is the answer
            raise ValueError(
                f"{self.qualname}: module {path!r} ({type(module).__name__}) does not take the region's "
                f"inputs ({', '.join(_describe(t) for t in inputs)}): {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            for m, mode in modes.items():
                m.training = mode
        atol, rtol = self.spec["atol"], self.spec["rtol"]
        same = len(theirs) == len(ours) and all(
            isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, atol=atol, rtol=rtol)
            for a, b in zip(theirs, ours, strict=False)
        )
        if not same:
            raise ValueError(
                f"{self.qualname}: module {path!r} ({type(module).__name__}) does not compute the exported region "
                f"({self.spec['problem']}): its forward and the reference differ on the problem's inputs"
            )

    def _patched_class(self, cls: type) -> type:
        if cls not in self._patched:
            exported = self

            def forward(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
                return exported.call(module, cls.forward, args, kwargs)  # type: ignore[attr-defined]

            attrs = {"forward": forward, "_kw_exported": self, "_kw_original_class": cls, "__module__": cls.__module__}
            self._patched[cls] = type(cls.__name__, (cls,), attrs)
        return self._patched[cls]

    def patch(self, model: nn.Module, path: str | None = None, *, check: bool = True) -> nn.Module:
        """Patch the submodule at `path` (default: the region's recorded path) so its forward calls
        the op; parameters, their names and the state_dict are unchanged. Returns `model`.

        With `check`, the module's original forward is first compared with the reference region on
        the problem's inputs: a module that does not compute the region is refused (ValueError).
        For a one-operator problem (`model extract`), name a submodule whose forward is exactly
        that operator on its inputs (for example an `nn.GELU` for aten.gelu)."""
        path = self.spec.get("region_path") if path is None else path
        if path is None:
            raise ValueError(
                f"{self.qualname}: name the submodule to patch, patch(model, path='...'): the problem "
                f"{self.spec['problem']} records no module path (its Model is one operator, or a region "
                "given by hand); the module's forward must compute exactly that"
            )
        try:
            module = model.get_submodule(path)
        except AttributeError:
            raise ValueError(f"{self.qualname}: {type(model).__name__} has no submodule {path!r}") from None
        if getattr(type(module), "_kw_exported", None) is self:
            return model
        problems = []
        for name, shape, _ in self.tensors:
            try:
                value = _attr(module, name)
            except AttributeError:
                problems.append(f"no tensor {name}")
                continue
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
                problems.append(f"{name} is not a tensor of shape {list(shape)}")
        if problems:
            raise ValueError(
                f"{self.qualname}: module {path!r} ({type(module).__name__}) does not hold the region's tensors: "
                + "; ".join(problems)
            )
        if check:
            self._check_equivalent(module, path, type(module).forward)
        module.__class__ = self._patched_class(type(module))
        return model

    def unpatch(self, model: nn.Module, path: str | None = None) -> nn.Module:
        """Undo `patch` on the submodule at `path`."""
        path = self.spec.get("region_path") if path is None else path
        module = model.get_submodule(path or "")
        original = getattr(type(module), "_kw_original_class", None)
        if original is not None:
            module.__class__ = original
        return model
