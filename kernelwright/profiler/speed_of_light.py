"""The speed of light of a problem on a device: the roofline's lower bound on any kernel's time.

    sol = speed_of_light(resolve_problem("1_relu"), Size.DEFAULT, Device.CUDA)
    prompt += sol.text() + f"\\nThe compiled reference takes {ref_s * 1e6:.0f} µs ({sol.room(ref_s):.1f}x)."

Two bounds, the larger wins:
- memory: the bytes the problem must read and write (its inputs, parameters and buffers, and its
  outputs, each tensor counted once) over the device's memory bandwidth;
- compute: its flops, counted by `torch.utils.flop_counter.FlopCounterMode` (matmuls,
  convolutions, attention; elementwise ops and reductions count 0, so such problems come out
  memory-bound, which is right for a roofline) over the peak of the dtype's pipe: tensor cores for
  fp16/bf16 (and fp8, int8, fp64 where the GPU has them); fp32 on the CUDA-core fp32 pipe unless
  TF32 is on in torch (`torch.backends.cuda.matmul.allow_tf32`; the harness turns it off for fp32
  problems) or the caller passes `tf32=True`. On a CPU both ceilings are measured
  (`hardware_specs.measured`), and only fp32 has a measured compute ceiling.

Counting runs the problem's default inputs (not the shape variants) on the `meta` device: shapes
and dtypes, no storage, so a default size of gigabytes costs milliseconds. A model that cannot run
on meta (data-dependent shapes, `.item()`) is run for real on the CPU when its inputs and
parameters take less than `CPU_FALLBACK_LIMIT` bytes; beyond that its flops (and output bytes) are
unknown and the figure is the byte bound only, which the text says.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from kernelwright.errors import ProblemError
from kernelwright.hardware_specs.ceilings import PIPE_LABELS, UNKNOWN, Ceilings, gpu_ceilings, host_ceilings
from kernelwright.hardware_specs.detect_cpu import detect_cpu
from kernelwright.hardware_specs.detection import detected_spec
from kernelwright.hardware_specs.schema import GpuSpec
from kernelwright.problems.model import Problem
from kernelwright.profiler.formatting import rate
from kernelwright.profiler.formatting import size as human_size
from kernelwright.vocabulary import Device, Size

if TYPE_CHECKING:  # torch (and problems.instance, which imports it) load on first use: start-up stays light
    import torch

    from kernelwright.problems.instance import ProblemInstance

log = logging.getLogger(__name__)

CPU_FALLBACK_LIMIT = 256 * 2**20  # inputs + parameters, in bytes, that may be built for real


@dataclass(frozen=True)
class Work:
    """What a problem's forward moves and computes at one size, counted once per process call."""

    size: Size  # the size counted (small falls back to default where the file has no small inputs)
    input_bytes: int
    param_bytes: int | None  # parameters and buffers; None when the model could not be built
    output_bytes: int | None  # None when the forward could not run
    flops: int | None  # None when the forward could not run
    dtype: str  # the floating dtype holding most of the bytes, else the problem's declared one
    counted_on: Literal["meta", "cpu"]
    notes: tuple[str, ...] = ()

    @property
    def bytes_moved(self) -> int:
        return self.input_bytes + (self.param_bytes or 0) + (self.output_bytes or 0)

    @property
    def bytes_counted(self) -> str:
        """What `bytes_moved` holds, in words."""
        if self.param_bytes is None:
            return "inputs only"
        return "inputs and parameters only" if self.output_bytes is None else "inputs, parameters and outputs"


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _nbytes(tensors: Iterator[torch.Tensor] | list[torch.Tensor], seen: set[int]) -> int:
    """Bytes of the tensors not seen before (a tensor passed twice, or returned as is, counts once)."""
    total = 0
    for t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total


def _main_dtype(tensors: list[torch.Tensor], declared: str) -> str:
    by_dtype: dict[torch.dtype, int] = {}
    for t in tensors:
        if t.is_floating_point():
            by_dtype[t.dtype] = by_dtype.get(t.dtype, 0) + t.numel() * t.element_size()
    if not by_dtype:
        return declared
    return str(max(by_dtype, key=lambda d: by_dtype[d])).removeprefix("torch.")


def _forward(inst: ProblemInstance, model: torch.nn.Module, seen: set[int]) -> tuple[int, int]:
    """(output bytes, flops) of one forward; raises whatever the user's forward raises."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = model(*inst.inputs)
    return _nbytes(_tensors(out), seen), int(counter.get_total_flops())


def _count(inst: ProblemInstance, on: Literal["meta", "cpu"], notes: list[str]) -> Work | None:
    """Count on the current default device. On meta, None when the model or its forward fails (the
    caller retries on the CPU); on the CPU, a model that cannot be built raises ProblemError and a
    forward that fails leaves flops and outputs unknown."""
    seen: set[int] = set()
    tensors = list(_tensors(inst.inputs))
    input_bytes = _nbytes(tensors, seen)
    try:
        model = inst.make_model()
    except ProblemError as exc:
        if on == "cpu":
            raise
        notes.append(f"the model cannot be built on meta ({exc.message.split(': ', 1)[-1]})")
        return None
    params = [*model.parameters(), *model.buffers()]
    param_bytes = _nbytes(params, seen)
    dtype = _main_dtype([*tensors, *params], inst.problem.meta.dtype)
    try:
        output_bytes, flops = _forward(inst, model, seen)
    except Exception as exc:  # the user's forward: data-dependent code cannot run on meta tensors
        notes.append(f"the forward cannot run on {on} ({type(exc).__name__})")
        if on == "meta" and input_bytes + param_bytes < CPU_FALLBACK_LIMIT:
            return None
        if on == "meta":
            notes.append(
                f"inputs and parameters take {human_size(input_bytes + param_bytes)}, over the "
                f"{human_size(CPU_FALLBACK_LIMIT)} that may be built for real"
            )
        notes.append("flops and outputs unknown")
        return Work(inst.size, input_bytes, param_bytes, None, None, dtype, on, tuple(notes))
    return Work(inst.size, input_bytes, param_bytes, output_bytes, flops, dtype, on, tuple(notes))


def count_work(problem: Problem, size: Size | str = Size.DEFAULT) -> Work:
    """Bytes and flops of `problem`'s forward at `size` (meta first, small problems for real on the
    CPU after). A malformed problem (no Model, inputs that are not tensors, a constructor that
    raises) raises ProblemError."""
    import torch

    from kernelwright.problems.instance import import_module, materialize

    module = import_module(problem)
    notes: list[str] = []
    with torch.device("meta"):
        try:
            inst: ProblemInstance | None = materialize(problem, Size(size), module=module)
        except ProblemError:
            inst = None  # input code that needs real values (numpy, .item()): built for real below
        work = _count(inst, "meta", notes) if inst is not None else None
    if work is not None:
        return work
    if inst is None:
        notes.append("inputs built for real: get_inputs() cannot run on the meta device")
    elif (input_bytes := _nbytes(_tensors(inst.inputs), set())) >= CPU_FALLBACK_LIMIT:
        notes.append(
            f"inputs over {human_size(CPU_FALLBACK_LIMIT)} are not built for real: only they are counted, "
            "flops, parameters and outputs unknown"
        )
        return Work(inst.size, input_bytes, None, None, None, problem.meta.dtype, "meta", tuple(notes))
    with torch.device("cpu"):
        real = materialize(problem, Size(size), module=module)
        work = _count(real, "cpu", notes)
    assert work is not None  # on the CPU, _count answers or raises
    return work if work.flops is None else replace(work, notes=(*work.notes, "counted on real CPU tensors"))


def _duration(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


@dataclass(frozen=True)
class SpeedOfLight:
    """The roofline's lower bound on a problem's time on one device, with what it rests on."""

    problem: str
    size: str
    device: str
    device_name: str
    dtype: str
    pipe: str  # a key of `hardware_specs.ceilings.PIPE_LABELS`: "cuda_fp32", "tensor_bf16", ...
    tf32: bool
    bytes_moved: int
    bytes_counted: str  # "inputs, parameters and outputs" unless the model or its forward could not run
    flops: int | None  # None: the forward could not be counted
    bandwidth_bytes_per_s: float | None
    peak_flops: float | None
    bandwidth_source: str  # "spec table: H100 SXM", "measured on this CPU: ...", "unknown", ...
    peak_source: str
    memory_s: float | None
    compute_s: float | None
    time_s: float | None  # the larger known bound; None when neither is known
    bound: Literal["memory", "compute"] | None  # None unless both bounds are known
    notes: tuple[str, ...] = field(default_factory=tuple)

    def room(self, time_s: float) -> float:
        """How many times slower than the speed of light `time_s` is (1.0: at the roofline)."""
        if not self.time_s:
            raise ValueError(f"no speed of light for {self.problem} on {self.device_name}: ceilings unknown")
        return time_s / self.time_s

    def _memory_line(self) -> str:
        moved = f"{human_size(self.bytes_moved)} moved ({self.bytes_counted}, each once)"
        if self.memory_s is None:
            return f"Memory: {moved}; bandwidth unknown."
        rate_ = rate(self.bandwidth_bytes_per_s, "B/s")
        return f"Memory: {moved} at {rate_} ({self.bandwidth_source}) = {_duration(self.memory_s)}."

    def _compute_line(self) -> str:
        if self.flops is None:
            return "Compute: flops unknown (the forward could not be counted): the byte bound only."
        if self.flops == 0:
            return "Compute: 0 flop counted (FlopCounterMode counts matmuls, convolutions and attention, not elementwise ops)."
        pipe = PIPE_LABELS.get(self.pipe, self.pipe)
        if self.dtype == "float32" and self.device == Device.CUDA:
            pipe += f", TF32 {'on' if self.tf32 else 'off'} in torch"
        work = f"{rate(self.flops, 'FLOP')} ({self.dtype}) on {pipe}"
        if self.compute_s is None:
            return f"Compute: {work}; no peak known for it ({self.peak_source}): the byte bound only."
        return (
            f"Compute: {work} at {rate(self.peak_flops, 'FLOP/s')} ({self.peak_source}) = {_duration(self.compute_s)}."
        )

    def text(self) -> str:
        """2-4 lines for a prompt; no reference time (the caller adds times and `room`)."""
        where = f"{self.problem} ({self.size} size) on {self.device_name}"
        if self.time_s is None:
            head = f"Speed of light for {where}: unknown (no bandwidth or peak known for this device)."
        else:
            only = "the byte bound" if self.memory_s is not None else "the flop bound"
            kind = f"{self.bound}-bound" if self.bound else f"only {only} is known"
            head = f"Speed of light for {where}: {_duration(self.time_s)} ({kind})."
        tail = "No kernel can run faster than this."
        if self.notes:
            tail += " Note: " + "; ".join(self.notes) + "."
        return "\n".join((head, self._memory_line(), self._compute_line(), tail))


def _ceilings(device: str, gpu: GpuSpec | None) -> Ceilings | None:
    if device == Device.CPU:
        return host_ceilings(detect_cpu().model)
    spec = gpu or detected_spec()
    return gpu_ceilings(spec) if spec is not None else None


def speed_of_light(
    problem: Problem,
    size: Size | str = Size.DEFAULT,
    device: Device | str = Device.CUDA,
    gpu: GpuSpec | None = None,
    *,
    tf32: bool | None = None,
    ceilings: Ceilings | None = None,
) -> SpeedOfLight:
    """The speed of light of `problem` at `size` on `device` (see the module doc). `gpu` picks a
    spec (default: this machine's, `detected_spec()`); `ceilings` overrides both (tests, a remote
    device); `tf32` None reads torch's flag. Raises ProblemError for a malformed problem."""
    import torch

    device = Device(device)
    work = count_work(problem, size)
    ceilings = ceilings or _ceilings(device, gpu)
    notes = list(work.notes)
    if ceilings is None:
        notes.append("no GPU detected and no spec given")
    use_tf32 = bool(torch.backends.cuda.matmul.allow_tf32) if tf32 is None else tf32
    pipe = ceilings.pipe_for(work.dtype, tf32=use_tf32) if ceilings else "none"
    bandwidth = ceilings.bandwidth if ceilings else None
    peak = ceilings.pipe(pipe) if ceilings else None
    bw_value = bandwidth.value if bandwidth else None
    peak_value = peak.value if peak else None
    memory_s = work.bytes_moved / bw_value if bw_value else None
    compute_s = 0.0 if work.flops == 0 else (work.flops / peak_value if work.flops and peak_value else None)
    known = [t for t in (memory_s, compute_s) if t is not None]
    bound: Literal["memory", "compute"] | None = None
    if memory_s is not None and compute_s is not None:
        bound = "compute" if compute_s > memory_s else "memory"
    return SpeedOfLight(
        problem=problem.qualified,
        size=str(work.size),
        device=str(device),
        device_name=ceilings.name if ceilings else "an undetected GPU",
        dtype=work.dtype,
        pipe=pipe,
        tf32=use_tf32,
        bytes_moved=work.bytes_moved,
        bytes_counted=work.bytes_counted,
        flops=work.flops,
        bandwidth_bytes_per_s=bw_value,
        peak_flops=peak_value,
        bandwidth_source=bandwidth.source if bandwidth else UNKNOWN,
        peak_source=peak.source if peak else UNKNOWN,
        memory_s=memory_s,
        compute_s=compute_s,
        time_s=max(known) if known and max(known) > 0 else None,  # 0 flop over no bandwidth bounds nothing
        bound=bound,
        notes=tuple(notes),
    )
