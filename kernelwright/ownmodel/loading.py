"""Loading a user's model from `path/to/file.py:Factory`.

The factory is any callable taking no arguments and returning `(module, example_inputs)`: an
`nn.Module` and a tuple or list of tensors (numbers allowed beside them) that `module(*inputs)`
accepts. Everything that can go wrong here is the user's to fix, so each fault ends the command
with one line (UsageError, exit 2): a spec without `:`, a missing file, a file that fails to
import, a missing or non-callable factory, a factory that raises or returns the wrong thing, and
inputs the module's forward rejects (it is run once, under no_grad, to find out).
"""

from __future__ import annotations

import difflib
import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelwright.errors import UsageError
from kernelwright.problems.execution import exec_as_module
from kernelwright.vocabulary import Device

EXAMPLE_SPEC = "kernelwright/ownmodel/examples/mlp_block.py:mlp_block"
_SCALARS = (int, float, bool)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


@dataclass(frozen=True)
class LoadedModel:
    """A user's module and example inputs, on `device`, checked to run together."""

    spec: str  # as given: "path/to/file.py:Factory"
    path: Path
    factory: str
    module: torch.nn.Module
    inputs: tuple[Any, ...]
    device: Device

    def forward(self) -> Any:
        return self.module(*self.inputs)


def parse_spec(spec: str) -> tuple[Path, str]:
    """`file.py:Factory` → (path, factory name); a malformed spec is a UsageError."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name.isidentifier():
        raise UsageError(f"model {spec!r} must be FILE.py:FACTORY", hint=f"for example {EXAMPLE_SPEC}")
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"model file {path} does not exist")
    if path.suffix != ".py":
        raise UsageError(f"model file {path} must be a Python file (.py)")
    return path, name


def _import(path: Path) -> Any:
    source = path.read_text(encoding="utf-8")
    name = f"kernelwright_model_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]}"
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)  # the user's file may import its neighbours
    try:
        return exec_as_module(source, path, name)
    except Exception as exc:  # the user's code: any failure is theirs, reported in one line
        raise UsageError(f"{path}: importing failed: {_first_line(exc)}") from exc
    finally:
        sys.path.remove(folder)


def _factory(module: Any, path: Path, name: str) -> Callable[[], Any]:
    factory = getattr(module, name, None)
    if factory is None:
        public = [n for n in vars(module) if not n.startswith("_")]
        close = difflib.get_close_matches(name, public, n=3)
        raise UsageError(f"{path} has no {name!r}", hint=f"did you mean {', '.join(close)}?" if close else None)
    if not callable(factory):
        raise UsageError(f"{path}: {name} is a {type(factory).__name__}, not a callable factory")
    return factory  # type: ignore[no-any-return]


def _unpack(value: Any, where: str) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    expected = "must return (module, example_inputs)"
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise UsageError(f"{where} {expected}, got {type(value).__name__}")
    module, inputs = value
    if not isinstance(module, torch.nn.Module):
        raise UsageError(f"{where} {expected}: its module is a {type(module).__name__}, not a torch.nn.Module")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, tuple | list):
        raise UsageError(f"{where} {expected}: its inputs are a {type(inputs).__name__}, not a tuple or list")
    for i, item in enumerate(inputs):
        if not isinstance(item, (torch.Tensor, *_SCALARS)):
            raise UsageError(f"{where} {expected}: input {i} is a {type(item).__name__}, not a tensor or number")
    if not any(isinstance(item, torch.Tensor) for item in inputs):
        raise UsageError(f"{where} {expected}: its inputs hold no tensor")
    return module, tuple(inputs)


def load_model(spec: str, device: Device | str = Device.CPU) -> LoadedModel:
    """The model `spec` names, moved to `device` and run once to check its inputs fit (see the
    module doc for every fault, each a UsageError)."""
    path, name = parse_spec(spec)
    factory = _factory(_import(path), path, name)
    where = f"{path}:{name}()"
    try:
        value = factory()
    except Exception as exc:  # the user's factory
        raise UsageError(f"{where} raised {_first_line(exc)}") from exc
    module, inputs = _unpack(value, where)
    device = Device(device)
    module = module.to(device)
    inputs = tuple(item.to(device) if isinstance(item, torch.Tensor) else item for item in inputs)
    loaded = LoadedModel(spec=spec, path=path, factory=name, module=module, inputs=inputs, device=device)
    try:
        with torch.no_grad():
            loaded.forward()
    except Exception as exc:  # the user's forward on the user's inputs
        raise UsageError(f"the inputs of {where} do not fit the module: forward raised {_first_line(exc)}") from exc
    return loaded
