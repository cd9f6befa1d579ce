"""Running a problem file's code: import it, construct inputs at a size, check what it returns."""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from kernelwright.errors import ProblemError
from kernelwright.problems.execution import exec_as_module
from kernelwright.problems.imports import is_installed, pip_package
from kernelwright.problems.model import Problem
from kernelwright.vocabulary import Size as Size  # re-exported: the harness imports it from here

_SCALARS = (int, float, bool)


def import_module(problem: Problem, *, module_name: str | None = None) -> ModuleType:
    """Execute the problem's source as a fresh module; an exception becomes a ProblemError."""
    name = module_name or f"kernelwright_problem_{problem.sha256[:16]}"
    try:
        module = exec_as_module(problem.source, problem.path, name)
    except Exception as exc:  # the file is the user's code: any failure is their fault, reported
        last = traceback.extract_tb(exc.__traceback__)[-1]
        message = f"{problem.path}:{last.lineno}: importing failed: {type(exc).__name__}: {exc}"
        missing = (exc.name or "").split(".")[0] if isinstance(exc, ModuleNotFoundError) else ""
        if missing and not is_installed(missing):
            raise ProblemError(message, hint=f"`pip install {pip_package(missing)}` installs {missing}") from exc
        raise ProblemError(message) from exc
    return module


def _call(problem: Problem, module: ModuleType, fn_name: str) -> Any:
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise ProblemError(f"{problem.path}: {fn_name} is not a function")
    try:
        return fn()
    except Exception as exc:  # user code
        raise ProblemError(f"{problem.path}: {fn_name}() raised {type(exc).__name__}: {exc}") from exc


def _check_inputs(problem: Problem, value: Any, what: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ProblemError(f"{problem.path}: {what} must return a list of tensors, got {type(value).__name__}")
    items = list(value)
    for i, item in enumerate(items):
        if not isinstance(item, (torch.Tensor, *_SCALARS)):
            raise ProblemError(f"{problem.path}: {what} item {i} is a {type(item).__name__}, not a tensor or number")
    if not any(isinstance(item, torch.Tensor) for item in items):
        raise ProblemError(f"{problem.path}: {what} returned no tensors")
    return items


def _check_init(problem: Problem, value: Any, what: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ProblemError(f"{problem.path}: {what} must return a list, got {type(value).__name__}")
    return list(value)


@dataclass(frozen=True)
class ProblemInstance:
    """A problem made concrete at one size: its module, constructor args, inputs and variants."""

    problem: Problem
    module: ModuleType
    size: Size
    init_inputs: list[Any]
    inputs: list[Any]
    variants: list[list[Any]]

    @property
    def model_class(self) -> type[torch.nn.Module]:
        return self.module.Model

    def make_model(self) -> torch.nn.Module:
        try:
            return self.model_class(*self.init_inputs)
        except Exception as exc:  # user code
            raise ProblemError(
                f"{self.problem.path}: Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}"
            ) from exc

    def input_sets(self) -> list[list[Any]]:
        """The default inputs followed by every shape variant."""
        return [self.inputs, *self.variants]


def materialize(
    problem: Problem,
    size: Size = Size.DEFAULT,
    *,
    seed: int = 0,
    module: ModuleType | None = None,
    shapes_only: bool = False,
) -> ProblemInstance:
    """Import the problem and build its inputs at `size` (small falls back to default when the
    file defines no small size); raises ProblemError for anything malformed. With `shapes_only`
    the input functions run under the meta device: tensors carry shape and dtype, no storage
    (the harness draws their values itself), and gigabytes of default inputs cost nothing."""
    module = module or import_module(problem)
    if not isinstance(getattr(module, "Model", None), type) or not issubclass(module.Model, torch.nn.Module):
        raise ProblemError(f"{problem.path}: Model is not a torch.nn.Module subclass")
    small = size == "small" and hasattr(module, "get_small_inputs")
    prefix = "get_small_" if small else "get_"
    torch.manual_seed(seed)
    init_name = f"{prefix}init_inputs" if hasattr(module, f"{prefix}init_inputs") else "get_init_inputs"
    init_inputs = (
        _check_init(problem, _call(problem, module, init_name), f"{init_name}()") if hasattr(module, init_name) else []
    )
    with torch.device("meta") if shapes_only else contextlib.nullcontext():
        inputs = _check_inputs(problem, _call(problem, module, f"{prefix}inputs"), f"{prefix}inputs()")
        variant_name = f"{prefix}input_variants"
        raw = _call(problem, module, variant_name) if hasattr(module, variant_name) else None
    variants: list[list[Any]] = []
    if raw is not None:
        if not isinstance(raw, list | tuple):
            raise ProblemError(f"{problem.path}: {variant_name}() must return a list of input lists")
        variants = [_check_inputs(problem, v, f"{variant_name}()[{i}]") for i, v in enumerate(raw)]
    return ProblemInstance(
        problem=problem,
        module=module,
        size=Size.SMALL if small else Size.DEFAULT,
        init_inputs=init_inputs,
        inputs=inputs,
        variants=variants,
    )
