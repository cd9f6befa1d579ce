"""Was a candidate's output final when its forward returned? (`lazy_output`)

Work that finishes after the call (a thread, a kernel launched later) is work the timer never
saw. In each correctness trial, once forward has returned and the device is synced, the
candidate's worker

1. reads the output at a few thousand random positions (`first_look`: microseconds, positions
   drawn only now, from the operating system's randomness);
2. copies the whole output (`copy_output`) and hands the *copy* over to the reference's process,
   so what is compared is the output as it was right after the call, whatever changes later;
3. checks that the copy agrees with the first look (`changed_while_copied`): a fill racing
   ahead of the copy (a thread writing values just before the copy reads them) shows there.

An output that was not final when copied fails the comparison. Only then does the harness ask
whether it settled (`settled_since`): the output, still alive, compared with the copy once
`WAIT_S` have passed since the copy; a change there names the failure `lazy_output` instead of
a plain mismatch. A correct output is not waited for: the copy was already right.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import torch

from kernelwright.harness.outputs import MAX_DEPTH  # the nesting the hand-over carries

SAMPLE = 4096  # positions read per output tensor in the first look
WAIT_S = 0.05  # how long after the copy an output is looked at again, when it failed
_perf_counter = time.perf_counter  # captured before any candidate is imported
_sleep = time.sleep


def output_tensors(value: Any, depth: int = 0) -> list[torch.Tensor]:
    """The tensors of an output (a tensor, or lists and tuples of them and of scalars)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple) and depth < MAX_DEPTH:
        return [t for v in value for t in output_tensors(v, depth + 1)]
    return []


def _plain(tensor: torch.Tensor) -> torch.Tensor:
    tensor = tensor.detach()
    return tensor if type(tensor) is torch.Tensor else tensor.as_subclass(torch.Tensor)


def copy_output(value: Any, depth: int = 0) -> Any:
    """The output with every tensor copied (plain tensors; lists, tuples and scalars kept)."""
    if isinstance(value, torch.Tensor):
        return _plain(value).clone()
    if isinstance(value, list | tuple) and depth < MAX_DEPTH:
        items = [copy_output(v, depth + 1) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


@dataclass(frozen=True)
class Look:
    """Values read at random positions of each output tensor (None: a tensor not looked at)."""

    positions: list[tuple[torch.Tensor, ...] | None]
    values: list[torch.Tensor | None]


def first_look(tensors: list[torch.Tensor], sample: int = SAMPLE) -> Look:
    """Read each tensor at up to `sample` random positions, now. The positions are drawn here,
    after the call returned, so no candidate code could have known them."""
    generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
    positions: list[tuple[torch.Tensor, ...] | None] = []
    values: list[torch.Tensor | None] = []
    for tensor in tensors:
        plain = _plain(tensor)
        if plain.layout != torch.strided or plain.numel() == 0 or plain.is_meta:
            positions.append(None)
            values.append(None)
            continue
        count = min(sample, plain.numel())
        index = tuple(torch.randint(0, size, (count,), generator=generator).to(plain.device) for size in plain.shape)
        positions.append(index)
        values.append(plain[index].clone() if index else plain.clone())
    return Look(positions, values)


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal element by element, NaN equal to NaN (an honest output may hold NaNs)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    if not (a.is_floating_point() or a.is_complex()):
        return False
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def changed_while_copied(look: Look, copies: list[torch.Tensor]) -> bool:
    """Does the copy disagree with the first look at the looked-at positions?"""
    for index, seen, copy in zip(look.positions, look.values, copies, strict=True):
        if index is None or seen is None:
            continue
        now = copy[index] if index else copy
        if not same_values(seen, now):
            return True
    return False


def settled_since(copies: list[torch.Tensor], live: list[torch.Tensor], copied_at: float, device: str) -> bool:
    """The live output still equals its copy `WAIT_S` after the copy was made (waiting out what
    is left of that), the device synced first."""
    left = copied_at + WAIT_S - _perf_counter()
    if left > 0:
        _sleep(left)
    if device == "cuda":
        torch.cuda.synchronize()
    return all(same_values(copy, _plain(now)) for copy, now in zip(copies, live, strict=True))


def now() -> float:
    """The clock `settled_since` measures from (captured before any candidate)."""
    return _perf_counter()
