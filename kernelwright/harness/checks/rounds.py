"""One profiled round of the work-share check, attributed: whose code did the forward's work.

On a GPU the round is read from torch.profiler's raw events (`read_events`: names, device,
correlation ids, times and streams, straight from the profiler's results) rather than from its
`FunctionEvent`s, whose construction (shapes, stacks, memory, a parent tree for every event) was
most of a GPU round's cost: ~60 us an event, and a round of 50 short calls carries hundreds. On
the CPU the attribution needs each ATen op's parents and self time, which `FunctionEvent`s give.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelwright.harness.checks.recorder import REGION_PREFIX
from kernelwright.harness.checks.symbols import KernelMatcher
from kernelwright.harness.checks.torch_ops import NOT_WORK_KERNEL_MARKERS, NOT_WORK_TRANSFERS, PROFILED_NOT_WORK
from kernelwright.problems.candidate.kernel_names import in_torch_namespace

NOT_WORK = "(fills, copies and views)"  # the library entry of the ops that do no arithmetic
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")
"""The runtime calls that replay a CUDA graph. CUPTI gives every kernel of one replay the
correlation id of its launch call."""


@dataclass
class RoundFigures:
    """What one profiled round attributes: own and library time, the kernels seen, and how the
    candidate's own code was entered (extension regions are counted by the recorder elsewhere)."""

    own_ms: float = 0.0
    library: dict[str, float] = field(default_factory=dict)
    own_kernels: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    disowned: set[str] = field(default_factory=set)
    ops_inside: int = 0
    graph_kernels: list[str] = field(default_factory=list)
    """Own kernels that ran as part of a CUDA graph replay (their launch was a graph launch)."""
    own_op_calls: int = 0
    """Calls of operators the candidate registered itself (outermost ones)."""
    streams: set[int] = field(default_factory=set)
    """The device streams (CUPTI's ids) the round's kernels and copies ran on."""


def is_region(name: str, own_ops: frozenset[str]) -> bool:
    """A region of the candidate's own code: an extension function's call (`REGION_PREFIX`), or an
    operator it registered itself (`own_ops`, as the dispatcher records it: `ns::name`)."""
    return name.startswith(REGION_PREFIX) or name in own_ops


# -- the GPU: raw events ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ProfiledEvent:
    """What the GPU attribution reads of one profiler event."""

    name: str  # demangled, as torch.profiler names it
    on_device: bool  # a kernel, copy, fill or mirrored annotation on the GPU's timeline
    correlation: int  # a runtime call's and the device work it launched share it
    device_us: float = 0.0  # the device work's duration (0 for host events)
    stream: int = 0
    thread: int = 0
    start_ns: int = 0
    end_ns: int = 0


def read_events(prof: Any) -> list[ProfiledEvent]:
    """A finished round's events, from `prof.profiler.kineto_results` (what torch.profiler builds
    its `FunctionEvent`s from, with the same names, ids and durations)."""
    names: dict[str, str] = {}
    cuda = torch.autograd.DeviceType.CUDA
    events: list[ProfiledEvent] = []
    for ev in prof.profiler.kineto_results.events():
        if getattr(ev, "is_hidden_event", lambda: False)():
            continue
        raw = ev.name()
        name = names.get(raw)
        if name is None:
            name = names[raw] = torch._C._demangle(raw) if len(raw) > 1 else raw
        on_device = ev.device_type() == cuda
        start, end = ev.start_ns(), ev.end_ns()
        thread = ev.start_thread_id()
        timed = on_device and not ev.is_async() and thread == ev.end_thread_id()
        events.append(
            ProfiledEvent(
                name=name,
                on_device=on_device,
                correlation=int(ev.correlation_id()),
                device_us=(end - start) / 1e3 if timed else 0.0,
                stream=int(ev.device_resource_id()),
                thread=thread,
                start_ns=start,
                end_ns=end,
            )
        )
    return events


def graph_launch_ids(events: Sequence[ProfiledEvent]) -> set[int]:
    """The correlation ids of the CUDA graph replays among the profiled runtime calls."""
    return {ev.correlation for ev in events if not ev.on_device and ev.name.startswith(GRAPH_LAUNCHES)}


def outermost_own_op_calls(events: Sequence[ProfiledEvent], own_ops: frozenset[str]) -> int:
    """Host calls of the candidate's own operators not inside another region of its code (the
    same thread, within that region's span)."""
    if not own_ops:
        return 0
    regions = [(k, ev) for k, ev in enumerate(events) if not ev.on_device and is_region(ev.name, own_ops)]
    count = 0
    for k, ev in regions:
        if ev.name not in own_ops:
            continue
        inside = any(
            j != k
            and outer.thread == ev.thread
            and outer.start_ns <= ev.start_ns
            and ev.end_ns <= outer.end_ns
            and (outer.start_ns, -outer.end_ns, j) < (ev.start_ns, -ev.end_ns, k)
            for j, outer in regions
        )
        count += not inside
    return count


def attribute_cuda(
    events: Sequence[ProfiledEvent], own: KernelMatcher, not_own: frozenset[str], own_ops: frozenset[str] = frozenset()
) -> RoundFigures:
    """One GPU round's figures: a kernel is the candidate's when `own` matches it exactly and the
    reference does not launch a kernel of the same name (`not_own`), however it was launched
    (directly, from an operator the candidate registered, or replayed from a CUDA graph: those
    are recorded in `graph_kernels`). Fills and device-to-device copies are no work (`NOT_WORK`)."""
    out = RoundFigures(own_op_calls=outermost_own_op_calls(events, own_ops))
    graphs = graph_launch_ids(events)
    for ev in events:
        if not ev.on_device or ev.name.startswith(REGION_PREFIX):
            continue  # only device work: our own record_function regions are mirrored on the GPU timeline
        ms = ev.device_us / 1e3
        out.seen.add(ev.name)
        out.streams.add(ev.stream)
        if ev.name in NOT_WORK_TRANSFERS or (
            in_torch_namespace(ev.name) and any(m in ev.name for m in NOT_WORK_KERNEL_MARKERS)
        ):
            out.library[NOT_WORK] = out.library.get(NOT_WORK, 0.0) + ms  # a fill or a copy: no arithmetic
            continue
        if own.owns(ev.name) and ev.name not in not_own:
            out.own_ms += ms
            out.own_kernels.append(ev.name)
            if ev.correlation in graphs:
                out.graph_kernels.append(ev.name)
        else:
            if own.owns(ev.name):
                out.disowned.add(ev.name)
            out.library[ev.name] = out.library.get(ev.name, 0.0) + ms
    return out


# -- the CPU: FunctionEvents -----------------------------------------------------------------------
def _has_region_ancestor(event: Any, own_ops: frozenset[str] = frozenset()) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if is_region(parent.name, own_ops):
            return True
        parent = parent.cpu_parent
    return False


def attribute_cpu(events: Sequence[Any], own_ops: frozenset[str] = frozenset()) -> RoundFigures:
    """One CPU round's figures from torch.profiler's `FunctionEvent`s: the candidate's own time
    is that of its regions (extension calls and its own operators, `own_ops`), less the ATen ops
    called inside them."""
    out = RoundFigures()
    out.own_op_calls = sum(1 for ev in events if ev.name in own_ops and not _has_region_ancestor(ev, own_ops))
    for ev in events:
        if is_region(ev.name, own_ops) and not _has_region_ancestor(ev, own_ops):
            out.own_ms += ev.cpu_time_total / 1e3
            name = ev.name
            out.own_kernels.append(name[len(REGION_PREFIX) :] if name.startswith(REGION_PREFIX) else name)
    for ev in events:
        if not ev.name.startswith("aten::"):
            continue
        ms = ev.self_cpu_time_total / 1e3
        in_region = _has_region_ancestor(ev, own_ops)
        out.ops_inside += in_region
        if ev.name in PROFILED_NOT_WORK:
            if not in_region:
                out.library[NOT_WORK] = out.library.get(NOT_WORK, 0.0) + ms
            continue
        out.library[ev.name] = out.library.get(ev.name, 0.0) + ms
        if in_region:
            out.own_ms -= ms  # a library op called from inside the candidate's code is not its work
    out.own_ms = max(out.own_ms, 0.0)
    return out
