"""A device's ceilings for a roofline, each with where it comes from: memory bandwidth and the
peak FLOP/s of each pipe.

One answer for the speed-of-light figure (`profiler.speed_of_light`) and the hardware brief
(`brief`), so the two never disagree. A GPU's figures come from its spec (the table entry, with
live detection merged over it by `detect_gpu`); the source of each says which: "spec table: H100
SXM", "live detection (...)", "derived from live detection (...)". A CPU's are measured
(`measured`). What nobody can source is "unknown", never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelwright.hardware_specs.measured import cpu_ceilings
from kernelwright.hardware_specs.schema import GpuSpec

UNKNOWN = "unknown"

# FP32 fused multiply-adds per clock per SM, by compute capability (CUDA C++ Programming Guide,
# "Arithmetic Instructions" throughput table: 32-bit floating-point add, multiply, multiply-add).
# Used only for a GPU whose spec has no fp32 figure.
_FP32_LANES_PER_SM = {"7.0": 64, "7.5": 64, "8.0": 64, "8.6": 128, "8.7": 128, "8.9": 128, "9.0": 128}

PIPE_LABELS = {
    "cuda_fp64": "the CUDA cores (fp64)",
    "cuda_fp32": "the CUDA cores (fp32)",
    "tensor_fp64": "the tensor cores (fp64)",
    "tensor_tf32": "the tensor cores (tf32)",
    "tensor_bf16": "the tensor cores (bf16)",
    "tensor_fp16": "the tensor cores (fp16)",
    "tensor_fp8": "the tensor cores (fp8)",
    "tensor_int8": "the tensor cores (int8)",
    "cpu_fp32": "this CPU's fp32 matmul",
    "none": "no known pipe",
}


@dataclass(frozen=True)
class Ceiling:
    """One ceiling: bytes/s or FLOP/s (None when unknown) and where the figure comes from."""

    value: float | None
    source: str = UNKNOWN


@dataclass(frozen=True)
class Ceilings:
    """A device's bandwidth and per-pipe peaks (`cuda_fp32`, `tensor_bf16`, `cpu_fp32`, ...)."""

    device: str  # "cuda" or "cpu"
    name: str  # "NVIDIA H100 SXM", the CPU's model
    bandwidth: Ceiling
    pipes: dict[str, Ceiling] = field(default_factory=dict)

    def pipe(self, key: str) -> Ceiling:
        return self.pipes.get(key, Ceiling(None))

    def pipe_for(self, dtype: str, *, tf32: bool = False) -> str:
        """The pipe a problem's flops in `dtype` run on: tensor cores where the dtype allows on a GPU
        (fp32 only with TF32 on; fp64 on the CUDA cores where no tensor core does fp64), the measured
        fp32 matmul on a CPU; "none" where no pipe is known (bf16 on a CPU, an integer dtype)."""
        dtype = dtype.removeprefix("torch.")
        if self.device == "cpu":
            return "cpu_fp32" if dtype == "float32" else "none"
        if dtype == "float32":
            return "tensor_tf32" if tf32 else "cuda_fp32"
        if dtype == "float64":
            return "tensor_fp64" if "tensor_fp64" in self.pipes else "cuda_fp64"
        if dtype.startswith("float8"):
            return "tensor_fp8"
        return {"float16": "tensor_fp16", "bfloat16": "tensor_bf16", "int8": "tensor_int8"}.get(dtype, "none")


def display_name(spec: GpuSpec) -> str:
    """'NVIDIA H100 SXM' for the table's 'H100 SXM'; a live name that already says its vendor stays."""
    vendor = "NVIDIA" if spec.vendor == "nvidia" else "AMD"
    return spec.name if spec.name.lower().startswith(vendor.lower()) else f"{vendor} {spec.name}"


def figure_source(spec: GpuSpec, path: str) -> str:
    """Where the figure at `path` comes from, in words for a prompt."""
    source = spec.source_for(path)
    if source is None or spec.value(path) is None:
        return UNKNOWN
    if source.title.startswith("live, derived"):
        return "derived from live detection (2 x memory clock x bus width)"
    if source.title.startswith("live"):
        return f"live detection ({source.title.removeprefix('live: ')})"
    return f"spec table: {spec.name}"


def _derived_fp32(spec: GpuSpec) -> Ceiling:
    lanes = _FP32_LANES_PER_SM.get(spec.compute_capability or "")
    clock = spec.clocks.boost_mhz
    if spec.vendor != "nvidia" or lanes is None or not spec.sms or not clock:
        return Ceiling(None)
    return Ceiling(
        2 * lanes * spec.sms * clock * 1e6,
        f"derived from live detection: {spec.sms} SMs x {clock:.0f} MHz x {lanes} fp32 FMA/clock/SM "
        f"(CUDA Programming Guide, cc {spec.compute_capability})",
    )


def gpu_ceilings(spec: GpuSpec) -> Ceilings:
    """Bandwidth and pipe peaks of a GPU spec (a table entry, or one `detected_spec()` merged)."""
    bw = spec.memory.bandwidth_gbs
    pipes: dict[str, Ceiling] = {}
    for group, prefix in (("cuda_core_tflops", "cuda"), ("tensor_core_tflops", "tensor")):
        for precision, tflops in getattr(spec, group).model_dump().items():
            if tflops is not None:
                pipes[f"{prefix}_{precision}"] = Ceiling(tflops * 1e12, figure_source(spec, f"{group}.{precision}"))
    if "cuda_fp32" not in pipes and (derived := _derived_fp32(spec)).value is not None:
        pipes["cuda_fp32"] = derived
    return Ceilings(
        device="cuda",
        name=display_name(spec),
        bandwidth=Ceiling(bw * 1e9 if bw else None, figure_source(spec, "memory.bandwidth_gbs")),
        pipes=pipes,
    )


def host_ceilings(model: str | None = None) -> Ceilings:
    """This CPU's measured bandwidth and fp32 matmul peak (measured once per process)."""
    measured = cpu_ceilings()
    return Ceilings(
        device="cpu",
        name=model or "this CPU",
        bandwidth=Ceiling(measured.bandwidth_bytes_per_s, measured.bandwidth_source),
        pipes={"cpu_fp32": Ceiling(measured.fp32_matmul_flops, measured.flops_source)},
    )
