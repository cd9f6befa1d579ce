"""The whole model's forward, eager against torch.compile, on the same device in the same process.

The timer is deliberately simple: `time.perf_counter` around each call, with
`torch.cuda.synchronize()` before and after on a GPU (so a call's time is its kernels' time, not
its launches'), after `warmup` untimed calls (the compiled model's first call compiles). Calls are
interleaved, eager then compiled, so drift on a busy machine lands on both. Reported: the median,
quartiles and extremes of `repeats` calls. This is not the harness's timing (no L2 flush, no fresh
inputs, no clean-process cross-check): it says where a model stands, it judges no candidate.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from kernelwright.ownmodel.loading import LoadedModel
from kernelwright.ownmodel.report import Timing
from kernelwright.vocabulary import Device

TIMER = "time.perf_counter per call (CUDA synchronised around each), after warm-up; eager and compiled interleaved"


def _timing(label: str, times: list[float]) -> Timing:
    ordered = sorted(times)
    q1, _, q3 = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else (ordered[0],) * 3
    return Timing(
        label=label,
        median_s=statistics.median(ordered),
        q1_s=q1,
        q3_s=q3,
        min_s=ordered[0],
        max_s=ordered[-1],
        repeats=len(ordered),
    )


def _timed(fn: Callable[[], Any], sync: Callable[[], None]) -> float:
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def time_model(
    loaded: LoadedModel, *, repeats: int = 20, warmup: int = 3, compile: bool = True
) -> tuple[Timing, Timing | None, str]:
    """(eager, compiled or None, a note on why compiled is missing)."""
    sync: Callable[[], None] = torch.cuda.synchronize if loaded.device == Device.CUDA else (lambda: None)
    eager = loaded.forward
    runners: dict[str, Callable[[], Any]] = {"eager": eager}
    note = ""
    if compile:
        compiled_module = torch.compile(loaded.module)
        try:
            with torch.no_grad():
                compiled_module(*loaded.inputs)  # compiles here, outside the timing
            runners["torch.compile"] = lambda: compiled_module(*loaded.inputs)
        except Exception as exc:  # no C++ compiler, an op inductor cannot lower: reported, eager still timed
            note = f"torch.compile failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    else:
        note = "torch.compile not timed (--no-compile)"
    times: dict[str, list[float]] = {label: [] for label in runners}
    with torch.no_grad():
        for _ in range(warmup):
            for fn in runners.values():
                fn()
        for _ in range(repeats):
            for label, fn in runners.items():
                times[label].append(_timed(fn, sync))
    compiled = _timing("torch.compile", times["torch.compile"]) if "torch.compile" in times else None
    return _timing("eager", times["eager"]), compiled, note
