"""Module regions: the submodules of a model whose aten ops form one chain torch.compile fuses.

    rows = rank_regions(load_model("m.py:make", Device.CPU))

A module's ops are every aten call made while its forward runs (its children's included), seen
below autograd by the trace (`trace.record_calls` with the module stack beside each call, from
forward pre/post hooks). Each op is sorted into a kind: `view` (no work: t, view, expand),
`pointwise` (torch's pointwise tag, copies), `reduction` (the reduction tag, norms, softmax),
`matmul` (mm, addmm, bmm, convolution), `attention` (scaled dot product: two matmuls in one) or
`other`. A module is fusible when it does some work, all of it pointwise, reduction or norm
around at most one matmul: what inductor emits as one GEMM with a fused prologue/epilogue, or
one fused kernel (a LayerNorm, `fc1` + `act` in a Sequential). A region is a fusible module
whose parent is not (the largest such chain; the whole model when it is fusible itself).

Each region's time is its forward's inclusive time, measured in a profile of its own: a
`record_function` range around the region's forward (CPU time on the CPU, the device time of
the kernels launched inside it on a GPU), per forward; its share is over the whole model's
forward measured the same way. Whether a region can be written as a standalone problem file is
said per row (`standalone_note`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from pydantic import BaseModel, Field
from torch.profiler import ProfilerActivity, profile, record_function

from kernelwright.ownmodel.layers import NotStandalone, layer_code
from kernelwright.ownmodel.loading import LoadedModel
from kernelwright.ownmodel.profiling import dtype_name
from kernelwright.ownmodel.report import ModelProfile, TensorSpec
from kernelwright.ownmodel.trace import OpCall, TensorArg, _Recorder
from kernelwright.vocabulary import Device

US = 1e-6
RANGE_PREFIX = "kw.module:"
_VIEWS = {"t", "view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "unsqueeze", "squeeze"}
_VIEWS |= {"alias", "detach", "slice", "select", "split", "chunk", "unbind", "as_strided", "lift_fresh"}
_COPIES = {"_to_copy", "copy_", "clone", "contiguous", "empty_like", "zeros_like", "ones_like", "fill_"}
_REDUCTIONS = {"native_layer_norm", "_softmax", "_log_softmax", "native_group_norm", "native_batch_norm"}
_REDUCTIONS |= {"_native_batch_norm_legit_no_training", "_fused_rms_norm", "rms_norm", "var_mean", "amax"}
_MATMULS = {"mm", "addmm", "bmm", "baddbmm", "convolution", "_convolution", "mkldnn_convolution", "matmul"}


def op_kind(call: OpCall) -> str:
    """view, pointwise, reduction, matmul, attention or other (see the module doc)."""
    name = call.name.removeprefix("aten::")
    if call.op.is_view or name in _VIEWS:
        return "view"
    if "scaled_dot_product" in name:
        return "attention"
    if name in _MATMULS:
        return "matmul"
    if torch.Tag.pointwise in call.op.tags or name in _COPIES:
        return "pointwise"
    if torch.Tag.reduction in call.op.tags or name in _REDUCTIONS:
        return "reduction"
    return "other"


def fusible(calls: list[OpCall]) -> bool:
    """Some work, all pointwise/reduction/norm around at most one matmul."""
    kinds = [op_kind(c) for c in calls]
    work = [k for k in kinds if k != "view"]
    return bool(work) and "other" not in work and "attention" not in work and work.count("matmul") <= 1


@dataclass
class ModuleTrace:
    """What one submodule did in one forward: its aten calls (children's included), and the
    tensor arguments of each of its calls."""

    path: str  # dotted, "" for the model itself
    module: torch.nn.Module
    calls: list[OpCall] = field(default_factory=list)
    inputs: list[list[Any]] = field(default_factory=list)  # per call: TensorArg, or the value given
    kwargs: list[dict[str, Any]] = field(default_factory=list)
    mutated_input: bool = False


class _StackRecorder(_Recorder):
    """The trace's recorder, each call also filed under every module on the stack."""

    def __init__(self, traces: dict[int, ModuleTrace]) -> None:
        super().__init__()
        self.traces = traces
        self.stack: list[int] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        before = len(self.calls)
        out = super().__torch_dispatch__(func, types, args, kwargs)
        for call in self.calls[before:]:
            for key in self.stack:
                self.traces[key].calls.append(call)
        return out


def _arg(value: Any) -> Any:
    return TensorArg.of(value) if isinstance(value, torch.Tensor) else value


def trace_modules(loaded: LoadedModel) -> dict[str, ModuleTrace]:
    """Every submodule's aten calls and call arguments in one forward, under no_grad; keyed by
    dotted path, in the model's module order (a module reached by two paths: its first)."""
    traces: dict[int, ModuleTrace] = {}
    for path, module in loaded.module.named_modules():
        traces.setdefault(id(module), ModuleTrace(path, module))
    recorder = _StackRecorder(traces)
    versions: dict[int, list[list[int]]] = {}  # a tensor's version counter moves when it is written in place

    def pre(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        trace = traces[id(module)]
        trace.inputs.append([_arg(a) for a in args])
        trace.kwargs.append({k: _arg(v) for k, v in kwargs.items()})
        versions.setdefault(id(module), []).append([a._version if isinstance(a, torch.Tensor) else 0 for a in args])
        recorder.stack.append(id(module))

    def post(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        recorder.stack.pop()
        before = versions[id(module)].pop()
        if any(isinstance(a, torch.Tensor) and a._version != v for a, v in zip(args, before, strict=True)):
            traces[id(module)].mutated_input = True

    with _hooks(loaded.module, pre, post), torch.no_grad(), recorder:
        loaded.forward()
    return {t.path: t for t in traces.values()}


@contextmanager
def _hooks(model: torch.nn.Module, pre: Any, post: Any) -> Iterator[None]:
    handles = []
    try:
        for module in {id(m): m for m in model.modules()}.values():
            handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
            handles.append(module.register_forward_hook(post, with_kwargs=True))
        yield
    finally:
        for handle in handles:
            handle.remove()


def find_regions(traces: dict[str, ModuleTrace]) -> list[ModuleTrace]:
    """The fusible modules whose parent is not fusible (see the module doc), in module order."""
    ok = {path: bool(t.inputs) and fusible(t.calls) for path, t in traces.items()}
    found = []
    for path, trace in traces.items():
        parent = path.rpartition(".")[0] if path else None
        if ok[path] and (parent is None or not ok.get(parent, False)):
            found.append(trace)
    return found


def standalone_note(trace: ModuleTrace) -> str:
    """Empty when `trace`'s module can be written as a standalone problem, else why not."""
    if not trace.inputs:
        return "never called in the model's forward"
    if trace.mutated_input:
        return "it writes into its inputs (in place)"
    if any(trace.kwargs):
        return "its forward is called with keyword arguments"
    others = {type(a).__name__ for call in trace.inputs for a in call if not isinstance(a, TensorArg)}
    if others:
        return f"its forward takes a {', '.join(sorted(others))} argument (only tensors are drawn as inputs)"
    if not trace.inputs[0]:
        return "its forward takes no tensor input"
    try:
        layer_code(trace.module)
    except NotStandalone as exc:
        return str(exc)
    return ""


class RegionRow(BaseModel):
    """One module region, ranked by its inclusive device time."""

    rank: int = Field(description="1 is the most time.")
    path: str = Field(description="Dotted submodule path; '' is the whole model.")
    module: str = Field(description="Its class, with a Sequential's layers: Sequential(Linear, GELU).")
    ops: list[str] = Field(description="Its aten ops in call order, views left out.")
    matmuls: int
    inputs: list[TensorSpec] = Field(description="The tensors its first call took.")
    time_s: float = Field(description="Inclusive device time per forward (CPU time on the CPU).")
    share: float = Field(description="time_s over the whole model's forward, measured the same way (0 to 1).")
    calls: float = Field(description="Calls per forward.")
    standalone_note: str = Field(
        default="", description="Empty: `model extract --region` writes it standalone; else why it cannot."
    )


class ModelReport(ModelProfile):
    """`model profile --json`: the ranked ops and the ranked module regions."""

    regions: list[RegionRow] = Field(default_factory=list)


def describe(module: torch.nn.Module) -> str:
    name = type(module).__name__
    if isinstance(module, torch.nn.Sequential):
        return f"{name}({', '.join(describe(m) for m in module)})"
    return name


def _time(event: Any, device: Device) -> float:
    if device == Device.CUDA:
        return float(event.device_time_total)
    return float(event.cpu_time_total)


def region_times(loaded: LoadedModel, paths: list[str], *, iterations: int = 5) -> tuple[dict[str, float], float]:
    """({path: inclusive time per forward in s}, the whole forward's time per forward)."""
    wanted = {id(loaded.module.get_submodule(p)): p for p in paths} | {id(loaded.module): ""}
    open_ranges: list[Any] = []

    def pre(module: torch.nn.Module, args: Any, kwargs: Any) -> None:
        if id(module) in wanted:
            rf = record_function(f"{RANGE_PREFIX}{wanted[id(module)]}")
            rf.__enter__()
            open_ranges.append(rf)

    def post(module: torch.nn.Module, args: Any, kwargs: Any, out: Any) -> None:
        if id(module) in wanted:
            open_ranges.pop().__exit__(None, None, None)

    activities = [ProfilerActivity.CPU]
    if loaded.device == Device.CUDA:
        activities.append(ProfilerActivity.CUDA)
    with torch.no_grad():
        loaded.forward()  # warm
    with _hooks(loaded.module, pre, post), torch.no_grad(), profile(activities=activities) as prof:
        for _ in range(iterations):
            loaded.forward()
        if loaded.device == Device.CUDA:
            torch.cuda.synchronize()
    times: dict[str, float] = {}
    for event in prof.events():
        if event.name.startswith(RANGE_PREFIX):
            path = event.name.removeprefix(RANGE_PREFIX)
            times[path] = times.get(path, 0.0) + _time(event, loaded.device) * US / iterations
    return times, times.get("", 0.0)


def rank_regions(loaded: LoadedModel, *, iterations: int = 5) -> list[RegionRow]:
    """The model's regions, most time first (see the module doc)."""
    traces = trace_modules(loaded)
    regions = find_regions(traces)
    times, total = region_times(loaded, [r.path for r in regions], iterations=iterations)
    rows = []
    for region in regions:
        work = [c for c in region.calls if op_kind(c) != "view"]
        first = [a for a in region.inputs[0] if isinstance(a, TensorArg)]
        rows.append(
            RegionRow(
                rank=0,
                path=region.path,
                module=describe(region.module),
                ops=[c.name.removeprefix("aten::") for c in work],
                matmuls=sum(op_kind(c) == "matmul" for c in work),
                inputs=[TensorSpec(shape=list(t.shape), dtype=dtype_name(t.dtype)) for t in first],
                time_s=times.get(region.path, 0.0),
                share=times.get(region.path, 0.0) / total if total else 0.0,
                calls=float(len(region.inputs)),
                standalone_note=standalone_note(region),
            )
        )
    rows.sort(key=lambda r: -r.time_s)
    return [row.model_copy(update={"rank": i}) for i, row in enumerate(rows, 1)]
