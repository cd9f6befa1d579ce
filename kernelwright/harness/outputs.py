"""A candidate's saved outputs, read as data only.

The candidate's worker writes its outputs to files; whoever reads them (the reference's process,
which compares them) never unpickles arbitrary globals (`weights_only=True`), never follows a
link, and accepts only plain CPU tensors, lists or tuples of them, and scalars.
"""

from __future__ import annotations

import io
import os
import pickle
import stat
from pathlib import Path
from typing import Any

import torch

MAX_OUTPUT_BYTES = 64 << 30  # the worker's RLIMIT_FSIZE: no honest output file is larger
_MAX_DEPTH = 4
_SCALARS = (int, float, bool, complex, type(None))


class UnsafeOutput(ValueError):
    """A candidate's output file that is not plain tensor data."""


def _check_output(value: Any, depth: int = 0) -> None:
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor or value.layout != torch.strided or value.device.type != "cpu":
            raise UnsafeOutput(f"not a plain CPU tensor: {type(value).__name__} {value.layout} on {value.device}")
        if value.numel() * value.element_size() > MAX_OUTPUT_BYTES:
            raise UnsafeOutput(f"tensor of {value.numel()} elements is larger than any output")
        return
    if isinstance(value, list | tuple) and depth < _MAX_DEPTH:
        for item in value:
            _check_output(item, depth + 1)
        return
    if not isinstance(value, _SCALARS):
        raise UnsafeOutput(f"unexpected {type(value).__name__} in the output")


def _load(path: Path) -> Any:
    """A candidate's saved output, as data: a regular file of its own (no link), at most
    MAX_OUTPUT_BYTES, unpickled with torch's weights-only loader (tensors, containers, numbers;
    no code), holding only plain CPU tensors, lists or tuples of them, and scalars."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise UnsafeOutput(f"{path.name} is not a regular file of the worker's own")
        if info.st_size > MAX_OUTPUT_BYTES:
            raise UnsafeOutput(f"{path.name} is {info.st_size} bytes")
        data = handle.read()
    value = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    _check_output(value)
    return value


def load_output(path: Path) -> tuple[Any, str | None]:
    try:
        return _load(path), None
    except (OSError, UnsafeOutput, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as exc:
        return None, f"its saved output could not be read as tensor data: {type(exc).__name__}: {exc}"
