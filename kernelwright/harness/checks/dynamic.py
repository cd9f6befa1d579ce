"""Checks made while the candidate runs, inside its worker process:

- global state (TF32, matmul precision, default dtype, determinism, thread count) before and after;
- identity of torch's public functions and of the timers, before and after the candidate's import;
- whether the candidate's own kernels carried the forward pass (torch.profiler).
"""

from __future__ import annotations

import contextlib
import inspect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelwright.harness.checks import rounds
from kernelwright.harness.checks.rounds import NOT_WORK
from kernelwright.harness.checks.symbols import KernelMatcher
from kernelwright.harness.timing.timers import MISSING, WATCHED_TIMERS, resolve_attribute
from kernelwright.harness.verdicts import Reason

WORK_SHARE_TARGET_MS = 2.0  # profiled work per round: enough that per-op noise averages out
WORK_SHARE_MAX_CALLS = 100
_perf_counter = time.perf_counter  # captured before any candidate is imported


def disable_tf32() -> None:
    """fp32 matmuls and convolutions in full precision: the reference, the baselines and the
    candidate's process alike (`global_state` then sees a candidate that turns TF32 back on)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def warm_up_harness() -> None:
    """Run the harness's own machinery once (the profiler wraps some torch functions on first
    use), so the identity snapshot taken next sees only what the candidate changes."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]):
        torch.ones(2).sum()


def global_state() -> dict[str, Any]:
    """The process-wide flags a candidate could flip to change precision or the baselines' speed."""
    state: dict[str, Any] = {
        "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "default_dtype": str(torch.get_default_dtype()),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "num_threads": torch.get_num_threads(),
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "matmul.allow_fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "matmul.allow_bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    }
    return state


def state_changes(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[Reason, str]]:
    out = []
    for key, value in before.items():
        if after.get(key) != value:
            precision = (
                key in ("matmul.allow_tf32", "cudnn.allow_tf32", "float32_matmul_precision")
                or "reduced_precision" in key
            )
            reason = Reason.PRECISION_DOWNGRADE if precision else Reason.GLOBAL_STATE
            out.append((reason, f"the candidate changed {key} from {value!r} to {after.get(key)!r}"))
    return out


def _resolve_static(dotted: str) -> Any:
    parent, _, attr = dotted.rpartition(".")
    owner = resolve_attribute(parent)
    if owner is MISSING:
        return None
    try:
        return inspect.getattr_static(owner, attr)
    except AttributeError:
        return None


def identity_snapshot() -> dict[str, int]:
    """id() of every public callable of torch, torch.nn.functional, torch.Tensor and the timers."""
    snap: dict[str, int] = {}
    for prefix, namespace in (
        ("torch", torch),
        ("torch.nn.functional", torch.nn.functional),
        ("torch.Tensor", torch.Tensor),
        ("torch.nn.Module", torch.nn.Module),
    ):
        for name in dir(namespace):
            if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
                continue
            try:  # static lookup: a classmethod fetched with getattr is a new bound object each time
                value = inspect.getattr_static(namespace, name)
            except AttributeError:
                continue
            if callable(value) or isinstance(value, classmethod | staticmethod | property):
                snap[f"{prefix}.{name}"] = id(value)
    for dotted in WATCHED_TIMERS:
        value = _resolve_static(dotted)
        if value is not None:
            snap[dotted] = id(value)
    return snap


def identity_changes(before: dict[str, int], after: dict[str, int]) -> list[tuple[Reason, str]]:
    out = []
    for name, ident in before.items():
        if after.get(name, ident) != ident:
            reason = Reason.PATCHED_TIMER if name in WATCHED_TIMERS else Reason.PATCHED_TORCH
            out.append((reason, f"the candidate replaced {name}"))
    return out


@dataclass
class WorkShare:
    """How the forward pass's work divided between the candidate's kernels and library ops."""

    own_ms: float = 0.0
    library_ms: float = 0.0
    not_work_ms: float = 0.0
    """Allocation fills, copies and views: library time that does no arithmetic (counted as
    work only where the reference itself does little else)."""
    top_library_ops: list[tuple[str, float]] = field(default_factory=list)
    own_kernels: list[str] = field(default_factory=list)
    device: str = "cpu"
    calls_per_round: int = 1
    kernels: set[str] = field(default_factory=set)
    """Every GPU kernel seen (the reference's are what an own kernel may not be named like)."""
    streams: set[int] = field(default_factory=set)
    """The device streams its kernels ran on (the reference's: the current stream only)."""
    disowned: list[str] = field(default_factory=list)
    """Kernels the candidate's names matched but the reference launches too: counted as library."""
    ops_inside_per_call: float = 0.0
    """ATen ops the extension's functions called inside, per forward (CPU): each costs profiler
    overhead inside the function's clocked time while profiled."""
    graph_kernels: list[str] = field(default_factory=list)
    """Own kernels that ran from a CUDA graph replay (the candidate's forward replays a graph it
    captured from its own kernels)."""
    own_op_calls: int = 0
    """Calls of operators the candidate registered itself, over all profiled rounds."""

    @property
    def own_fraction(self) -> float:
        total = self.own_ms + self.library_ms
        return self.own_ms / total if total > 0 else 0.0


def measure_work_share(
    call: Callable[[], Any],
    *,
    device: str,
    own: KernelMatcher,
    not_own: frozenset[str] = frozenset(),
    repeats: int = 5,
    target_ms: float = WORK_SHARE_TARGET_MS,
    max_calls: int = WORK_SHARE_MAX_CALLS,
    while_profiled: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    own_ops: frozenset[str] = frozenset(),
) -> WorkShare:
    """Profile `call` and attribute time per call: on CUDA by kernel (own: the candidate's
    __global__ kernels read from its built libraries, and its Triton kernels, matched exactly;
    never a kernel in `not_own`, the reference's), on the CPU by aten op (inside vs outside the
    extension's regions and the candidate's own operators, `own_ops`: `ns::name` as registered).

    Each of `repeats` profiled rounds runs enough calls to cover about `target_ms` (an op of a few
    microseconds is mostly profiler and thread wake-up noise on its own), and the fastest round is
    kept: interference from the rest of the machine only ever adds time."""
    from torch.profiler import ProfilerActivity, profile

    def run(n: int) -> None:
        for _ in range(n):
            call()
        if device == "cuda":
            torch.cuda.synchronize()

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    run(1)  # unprofiled warm-up: first-call costs (allocator, lazy init) would skew the comparison
    call_ms = float("inf")
    for _ in range(3):  # the fastest of a few: one slow call must not shrink the rounds to a single call
        start = _perf_counter()
        run(1)
        call_ms = min(call_ms, (_perf_counter() - start) * 1e3)
    calls = max(1, min(max_calls, math.ceil(target_ms / max(call_ms, 1e-3))))
    best: tuple[float, dict[str, float], list[str]] | None = None
    kernels: set[str] = set()
    seen: set[str] = set()
    disowned: set[str] = set()
    streams: set[int] = set()
    ops_inside = 0.0
    graph_kernels: set[str] = set()
    own_op_calls = 0
    for _ in range(repeats):
        with profile(activities=activities) as prof, while_profiled():
            run(calls)
        if device == "cuda":
            figures = rounds.attribute_cuda(rounds.read_events(prof), own, not_own, own_ops)
        else:
            figures = rounds.attribute_cpu(list(prof.events()), own_ops)
        ops_inside = max(ops_inside, figures.ops_inside / calls)
        own_ms, library = figures.own_ms / calls, {name: ms / calls for name, ms in figures.library.items()}
        kernels.update(figures.own_kernels)
        graph_kernels.update(figures.graph_kernels)
        own_op_calls += figures.own_op_calls
        seen |= figures.seen
        disowned |= figures.disowned
        streams |= figures.streams
        if best is None or own_ms + sum(library.values()) < best[0] + sum(best[1].values()):
            best = (own_ms, library, figures.own_kernels)
    assert best is not None
    library_ops = dict(best[1])
    not_work = library_ops.pop(NOT_WORK, 0.0)
    share = WorkShare(
        device=device, own_ms=best[0], library_ms=sum(library_ops.values()), not_work_ms=not_work, calls_per_round=calls
    )
    share.top_library_ops = sorted(library_ops.items(), key=lambda kv: -kv[1])[:3]
    share.own_kernels = sorted(kernels)
    share.kernels = seen
    share.disowned = sorted(disowned)
    share.streams = streams
    share.ops_inside_per_call = ops_inside
    share.graph_kernels = sorted(graph_kernels)
    share.own_op_calls = own_op_calls
    return share


def output_pass_ms(output: Any, device: str, repeats: int = 5) -> float:
    """The fastest time of one copy of the output (a read and a write of every output byte): the
    least an own kernel that produces or finishes the output costs (policy engineering)."""
    tensors = _tensors(output)
    if not tensors:
        return 0.0
    best = float("inf")
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = _perf_counter()
        for t in tensors:
            t.clone()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, (_perf_counter() - start) * 1e3)
    return best


def _tensors(value: Any) -> list[torch.Tensor]:
    items = value if isinstance(value, list | tuple) else [value]
    return [t for t in items if isinstance(t, torch.Tensor) and t.numel() > 0]


def _spans(tensors: list[torch.Tensor]) -> list[tuple[int, int]]:
    return [
        (t.untyped_storage().data_ptr(), t.untyped_storage().data_ptr() + t.untyped_storage().nbytes()) for t in tensors
    ]


def shares_memory(output: Any, others: Any) -> bool:
    """Does any output tensor share memory with any tensor in `others`?"""
    spans = _spans(_tensors(others))
    return any(start < hi and lo < end for start, end in _spans(_tensors(output)) for lo, hi in spans)


def aliases_input(output: Any, inputs: list[Any]) -> bool:
    """Does any output tensor share memory with an input?"""
    return shares_memory(output, list(inputs))
