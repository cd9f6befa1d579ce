"""Where a model's time goes: its aten ops ranked by self device time, with the roofline's room.

    report = profile_model(load_model("m.py:make", Device.CPU))

Steps: `warmup` untimed forwards; one forward traced (`trace.record_calls`: each call's arguments,
bytes and flops); `iterations` forwards under `torch.profiler` with `record_shapes=True`, read back
with `key_averages(group_by_input_shape=True)`, so an op at two shapes is two rows. A row's time is
its *self* time (CPU time on the CPU, CUDA time on a GPU): what the op itself spent, its children
not counted, so the rows never count a microsecond twice and their shares sum to at most 100% of
the model's total (the sum of every profiled event's self time). Each `aten::` row is matched to a
traced call by name and tensor shapes. Two kinds of op are not seen by the trace: a composite op
(`aten::linear`), whose work is in the ops it calls, ranked in their own right; and an op that
runs inside another (`copy_` inside `addmm` on the CPU, `mkldnn_convolution` inside
`convolution`): its row names the traced op it ran in (`inside`), the one to extract for it.

Roofline, per call: bytes over the device's bandwidth, flops over the peak of the dtype's pipe
(`hardware_specs.ceilings`: the spec table on a GPU, measured on a CPU, where only fp32 has a
compute ceiling); the larger is the speed of light, and `room` is the measured time per call over
it. Where neither bound is known the row says why ("n/a: ...").
"""

from __future__ import annotations

from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from kernelwright.hardware_specs.ceilings import Ceilings, gpu_ceilings, host_ceilings
from kernelwright.hardware_specs.detect_cpu import detect_cpu
from kernelwright.hardware_specs.detection import detected_spec
from kernelwright.ownmodel.loading import LoadedModel
from kernelwright.ownmodel.report import ModelProfile, OpRow, TensorSpec
from kernelwright.ownmodel.timing import TIMER, time_model
from kernelwright.ownmodel.trace import OpCall, TensorArg, record_calls
from kernelwright.vocabulary import Device

US = 1e-6


def device_ceilings(device: Device) -> Ceilings | None:
    """This machine's ceilings for `device` (a CPU's are measured: about a second, once per process)."""
    if device == Device.CPU:
        return host_ceilings(detect_cpu().model)
    spec = detected_spec()
    return gpu_ceilings(spec) if spec is not None else None


def _device_name(device: Device) -> str:
    if device == Device.CUDA:
        return str(torch.cuda.get_device_name())
    return detect_cpu().model or "this CPU"


def _self_time_us(event: Any, device: Device) -> float:
    if device == Device.CUDA:
        value = getattr(event, "self_device_time_total", None)
        return float(value if value is not None else event.self_cuda_time_total)
    return float(event.self_cpu_time_total)


def _main_dtype(call: OpCall) -> torch.dtype:
    tensors = [*call.tensors(), *(o for o in call.outputs if isinstance(o, TensorArg))]
    floating = [t for t in tensors if t.dtype.is_floating_point]
    pool = floating or tensors
    return max(pool, key=lambda t: torch.Size(t.shape).numel()).dtype


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _roofline(call: OpCall | None, call_s: float, ceilings: Ceilings | None, inside: str | None) -> dict[str, Any]:
    if call is None and inside is not None:
        return {"inside": inside, "roofline_note": f"n/a: runs inside {inside} (extract that for this time)"}
    if call is None:
        return {"roofline_note": "n/a: a composite op (its work is in the ops it calls, ranked in their own right)"}
    found: dict[str, Any] = {"flops": call.flops, "bytes": call.bytes}
    if ceilings is None:
        return found | {"roofline_note": "n/a: no bandwidth or peak known for this device"}
    dtype = dtype_name(_main_dtype(call))
    pipe = ceilings.pipe_for(dtype, tf32=bool(torch.backends.cuda.matmul.allow_tf32))
    bandwidth, peak = ceilings.bandwidth.value, ceilings.pipe(pipe).value
    memory_s = call.bytes / bandwidth if bandwidth else None
    compute_s: float | None = None
    if call.flops == 0:
        compute_s = 0.0
    elif call.flops and peak:
        compute_s = call.flops / peak
    known = [t for t in (memory_s, compute_s) if t is not None]
    if not known or max(known) <= 0:
        return found | {"roofline_note": f"n/a: no ceiling known for {dtype} on {ceilings.name}"}
    sol = max(known)
    bound = None if memory_s is None or compute_s is None else ("compute" if compute_s > memory_s else "memory")
    note = "" if bound else ("byte bound only: no peak for its flops" if memory_s else "flop bound only")
    return found | {"sol_s": sol, "bound": bound, "room": call_s / sol, "roofline_note": note}


_Key = tuple[str, tuple[tuple[int, ...], ...]]


def _shapes(raw: Any) -> list[list[int]]:
    """A profiler event's input shapes; a tensor list (or anything but a flat shape) is []: not matched on."""
    shapes = [list(s) if isinstance(s, list | tuple) else [] for s in (raw or [])]
    return [s if all(isinstance(d, int) for d in s) else [] for s in shapes]


def _key(name: str, shapes: list[list[int]]) -> _Key:
    return name, tuple(tuple(s) for s in shapes if s)


def _index(calls: list[OpCall]) -> dict[_Key, OpCall]:
    """The first traced call per (name, shape key): what a profiler row is matched to."""
    index: dict[_Key, OpCall] = {}
    for call in calls:
        index.setdefault((call.name, call.shape_key()), call)
    return index


def _hosts(events: Any, index: dict[_Key, OpCall]) -> dict[_Key, str]:
    """For an op the trace did not see, the nearest traced op(s) it ran inside (`copy_` inside
    `addmm`, `mkldnn_convolution` inside `convolution`): the one to extract for its time."""
    hosts: dict[_Key, dict[str, None]] = {}
    for event in events:
        key = _key(event.name, _shapes(event.input_shapes))
        if not event.name.startswith("aten::") or key in index:
            continue
        parent = event.cpu_parent
        while parent is not None and _key(parent.name, _shapes(parent.input_shapes)) not in index:
            parent = parent.cpu_parent
        if parent is not None:
            hosts.setdefault(key, {})[parent.name] = None
    return {key: ", ".join(names) for key, names in hosts.items()}


def _inputs(call: OpCall | None, shapes: list[list[int]]) -> list[TensorSpec]:
    if call is not None:
        return [TensorSpec(shape=list(t.shape), dtype=dtype_name(t.dtype)) for t in call.tensors() if t.shape]
    return [
        TensorSpec(shape=[int(d) for d in s], dtype="?") for s in shapes if s and all(isinstance(d, int) for d in s)
    ]


def rank_ops(
    loaded: LoadedModel, *, iterations: int = 5, warmup: int = 3, ceilings: Ceilings | None = None
) -> tuple[list[OpRow], float, list[OpCall]]:
    """(ranked rows, the model's self device time per forward in seconds, the traced calls)."""
    with torch.no_grad():
        for _ in range(warmup):
            loaded.forward()
    calls = record_calls(loaded.module, loaded.inputs)
    activities = [ProfilerActivity.CPU]
    if loaded.device == Device.CUDA:
        activities.append(ProfilerActivity.CUDA)
    with torch.no_grad(), profile(activities=activities, record_shapes=True) as prof:
        for _ in range(iterations):
            loaded.forward()
        if loaded.device == Device.CUDA:
            torch.cuda.synchronize()
    index = _index(calls)
    hosts = _hosts(prof.events(), index)
    events = prof.key_averages(group_by_input_shape=True)
    total_us = sum(_self_time_us(e, loaded.device) for e in events)
    rows: list[OpRow] = []
    for event in events:
        time_us = _self_time_us(event, loaded.device)
        if not event.key.startswith("aten::") or time_us <= 0:
            continue
        shapes = _shapes(event.input_shapes)
        key = _key(event.key, shapes)
        call = index.get(key)
        call_s = time_us * US / event.count
        rows.append(
            OpRow(
                rank=0,
                name=event.key,
                op=call.qualified if call else None,
                inputs=_inputs(call, shapes),
                time_s=time_us * US / iterations,
                share=time_us / total_us if total_us else 0.0,
                calls=event.count / iterations,
                call_s=call_s,
                **_roofline(call, call_s, ceilings, hosts.get(key)),
            )
        )
    rows.sort(key=lambda r: -r.time_s)
    ranked = [row.model_copy(update={"rank": i}) for i, row in enumerate(rows, 1)]
    return ranked, total_us * US / iterations, calls


def profile_model(
    loaded: LoadedModel,
    *,
    iterations: int = 5,
    repeats: int = 20,
    compile: bool = True,
    roofline: bool = True,
    ceilings: Ceilings | None = None,
) -> ModelProfile:
    """Ranked ops with the roofline's room, and the whole model eager vs torch.compile (see the
    module doc). `ceilings` overrides the device's (tests, a remote device); `roofline=False`
    skips them (every row says n/a)."""
    if roofline and ceilings is None:
        ceilings = device_ceilings(loaded.device)
    ops, total_s, _ = rank_ops(loaded, iterations=iterations, ceilings=ceilings if roofline else None)
    eager, compiled, note = time_model(loaded, repeats=repeats, compile=compile)
    cuda = loaded.device == Device.CUDA
    return ModelProfile(
        model=loaded.spec,
        device=str(loaded.device),
        device_name=_device_name(loaded.device),
        time_kind="CUDA time" if cuda else "CPU time",
        iterations=iterations,
        total_s=total_s,
        ops=ops,
        eager=eager,
        compiled=compiled,
        compile_note=note,
        timer=TIMER,
        bandwidth_source=ceilings.bandwidth.source if ceilings and roofline else "",
        peak_source=", ".join(f"{k}: {v.source}" for k, v in ceilings.pipes.items()) if ceilings and roofline else "",
    )
