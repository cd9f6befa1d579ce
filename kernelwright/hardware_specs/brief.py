"""The hardware block of the coder's prompt: what matters for writing a fast kernel on this device,
in about eight lines, each figure saying where it comes from.

GPU: name, SMs, shared memory and registers per SM, L2, memory bandwidth, clocks, tensor-core
dtypes and their peaks, the CUDA-core fp32 peak, compute capability, the async-copy features.
Figures read on this machine are marked (live), figures from the spec table (table), figures
computed from live readings (derived); a figure nobody can source is absent or "unknown".
CPU: model, the cores and the torch threads the harness uses, the vector ISA extensions, caches,
and the ceilings measured here (`measured`).
"""

from __future__ import annotations

from kernelwright.hardware_specs.ceilings import UNKNOWN, Ceiling, figure_source, gpu_ceilings, host_ceilings
from kernelwright.hardware_specs.detect_cpu import CpuInfo, detect_cpu
from kernelwright.hardware_specs.detect_gpu import DetectedGpu, detect_gpus
from kernelwright.hardware_specs.live_gpu import current_gpu
from kernelwright.hardware_specs.schema import GpuSpec

_TENSOR_ORDER = ("fp64", "tf32", "bf16", "fp16", "fp8", "fp4", "int8")
_FEATURES = {
    "async_copy": "cp.async",
    "tma": "TMA",
    "wgmma": "wgmma (sm_90a)",
    "thread_block_clusters": "thread-block clusters",
    "distributed_shared_memory": "distributed shared memory",
    "tcgen05": "tcgen05 (sm_100a)",
}


def _tag(source: str) -> str:
    if source.startswith("spec table"):
        return "table"
    if source.startswith("derived"):
        return "derived"
    if source.startswith("live"):
        return "live"
    return UNKNOWN


def _rate(value: float, unit: str) -> str:
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _fig(spec: GpuSpec, path: str, fmt: str = "{}") -> str:
    """'228 KB (live)' for a known figure, 'unknown' otherwise."""
    value = spec.value(path)
    if value is None:
        return UNKNOWN
    shown = fmt.format(int(value) if isinstance(value, float) and value.is_integer() else value)
    return f"{shown} ({_tag(figure_source(spec, path))})"


def _peaks(pipes: dict[str, Ceiling], prefix: str) -> str:
    parts, tags = [], set()
    for precision in _TENSOR_ORDER:
        ceiling = pipes.get(f"{prefix}_{precision}")
        if ceiling is not None and ceiling.value:
            unit = "OP/s" if precision == "int8" else "FLOP/s"
            parts.append(f"{precision} {_rate(ceiling.value, unit)}")
            tags.add(_tag(ceiling.source))
    return f"{', '.join(parts)} ({'/'.join(sorted(tags))})" if parts else UNKNOWN


def gpu_brief(spec: GpuSpec) -> str:
    """The brief of one GPU spec: a table entry, or a detected spec with live figures merged in."""
    ceilings = gpu_ceilings(spec)
    lim = "limits."
    arch = f"{spec.architecture}, " if spec.architecture else ""
    features = [label for name, label in _FEATURES.items() if getattr(spec.features, name)]
    tensor = _peaks(ceilings.pipes, "tensor")
    fp32 = ceilings.pipe("cuda_fp32")
    fp32_text = f"{_rate(fp32.value, 'FLOP/s')} ({_tag(fp32.source)})" if fp32.value else UNKNOWN
    bw = ceilings.bandwidth
    bw_text = f"{_rate(bw.value, 'B/s')} ({_tag(bw.source)})" if bw.value else UNKNOWN
    clocks = [f"boost {_fig(spec, 'clocks.boost_mhz', '{} MHz')}"]
    if spec.clocks.base_mhz:
        clocks.append(f"base {_fig(spec, 'clocks.base_mhz', '{} MHz')}")
    lines = [
        f"GPU: {ceilings.name}, {arch}compute capability {_fig(spec, 'compute_capability')}; SMs: {_fig(spec, 'sms')}.",
        f"Per SM: shared memory {_fig(spec, lim + 'shared_mem_per_sm_kb', '{} KB')}, per block (opt-in max) "
        f"{_fig(spec, lim + 'shared_mem_per_block_kb', '{} KB')}; registers {_fig(spec, lim + 'registers_per_sm')} "
        f"at most {spec.limits.registers_per_thread or UNKNOWN} per thread; "
        f"threads max {_fig(spec, lim + 'max_threads_per_sm')}.",
        f"L2 cache: {_fig(spec, 'cache.l2_mb', '{} MB')}. Memory bandwidth: {bw_text}"
        + (f" ({spec.memory.size_gb:g} GB {spec.memory.type or ''}".rstrip() + ")." if spec.memory.size_gb else "."),
        f"Clocks: {', '.join(clocks)}.",
        f"Tensor cores, dense peaks: {tensor}.",
        f"CUDA cores: fp32 {fp32_text}"
        + (f", fp64 {_rate(v, 'FLOP/s')}" if (v := ceilings.pipe("cuda_fp64").value) else "")
        + ".",
    ]
    if features:
        lines.append(f"Features: {', '.join(features)}.")
    lines.append(
        "(live) = read on this machine (torch device properties, nvidia-smi); (table) = kernelwright's "
        "spec table, from vendor datasheets and the CUDA guide; (derived) = computed from live readings."
    )
    return "\n".join(lines)


def _caches(cpu: CpuInfo) -> str:
    parts = []
    for cache in cpu.caches:
        if cache.type == "Instruction" or cache.size_kb is None:
            continue
        name = f"L{cache.level}{'d' if cache.type == 'Data' else ''}"
        size = f"{cache.size_kb // 1024} MB" if cache.size_kb >= 1024 else f"{cache.size_kb} KB"
        shared = f" shared by {cache.shared_by_cpus} CPUs" if cache.shared_by_cpus and cache.shared_by_cpus > 1 else ""
        parts.append(f"{name} {size}{shared}")
    return ", ".join(parts) or UNKNOWN


def _vector_isa(extensions: list[str]) -> str:
    groups = {
        "AVX2": [e for e in extensions if e in ("avx2", "fma", "f16c", "avx_vnni")],
        "AVX-512": [e.removeprefix("avx512").lstrip("_") for e in extensions if e.startswith("avx512")],
        "AMX": [e.removeprefix("amx_") for e in extensions if e.startswith("amx")],
        "NEON/SVE": [e for e in extensions if e.startswith(("neon", "sve", "sme", "i8mm", "bf16"))],
    }
    parts = [f"{name} ({', '.join(found)})" for name, found in groups.items() if found]
    if not parts:
        return "none of AVX2, AVX-512, AMX, NEON reported (scalar or SSE code only)"
    missing = [name for name in ("AVX-512", "AMX") if not groups[name]] if groups["AVX2"] else []
    return "; ".join(parts) + (f"; no {', no '.join(missing)}" if missing else "")


def cpu_brief(cpu: CpuInfo | None = None) -> str:
    """The brief of this CPU, with its ceilings measured here (once per process)."""
    cpu = cpu or detect_cpu()
    ceilings = host_ceilings(cpu.model)
    bw, fp32 = ceilings.bandwidth, ceilings.pipe("cpu_fp32")
    threads = cpu.torch_threads or UNKNOWN
    lines = [
        f"CPU: {cpu.model or UNKNOWN} ({cpu.architecture}), {cpu.physical_cores or UNKNOWN} physical cores, "
        f"{cpu.logical_cores or UNKNOWN} logical; the harness runs torch with {threads} threads.",
        f"Vector ISA: {_vector_isa(cpu.isa_extensions)}.",
        f"Caches: {_caches(cpu)}." + (f" Memory: {cpu.memory_total_gib:g} GiB." if cpu.memory_total_gib else ""),
        f"Measured memory bandwidth: {_rate(bw.value or 0, 'B/s')} ({bw.source}; read + write counted).",
        f"Measured fp32 matmul peak: {_rate(fp32.value or 0, 'FLOP/s')} ({fp32.source}).",
    ]
    if bw.value and fp32.value:
        lines.append(f"Ridge point: {fp32.value / bw.value:.1f} flop/byte; below it a kernel is memory-bound.")
    return "\n".join(lines)


def _this_gpu() -> GpuSpec | None:
    gpus: list[DetectedGpu] = detect_gpus()[0]
    live = current_gpu()
    for gpu in gpus:
        if live is not None and gpu.live.index == live.index:
            return gpu.spec
    return gpus[0].spec if gpus else None


def hardware_brief(device: str, *, gpu: GpuSpec | None = None) -> str:
    """What matters for a fast kernel on `device` ("cuda": `gpu`, else the GPU torch launches on;
    "cpu": this CPU, its ceilings measured). A CUDA device with no GPU visible and no spec says so."""
    if device == "cpu":
        return cpu_brief()
    spec = gpu or _this_gpu()
    if spec is None:
        return "GPU: none visible and no spec given; its figures are unknown."
    return gpu_brief(spec)
