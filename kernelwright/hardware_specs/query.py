"""Structured answers about a GPU's specs: the functions the agent exposes as a tool, and the peaks
(see `roofline`) of a named GPU or of this machine's, which a profiler uses for roofline placement."""

from __future__ import annotations

from pydantic import BaseModel

from kernelwright.errors import EnvironmentProblem, UsageError
from kernelwright.hardware_specs import detection
from kernelwright.hardware_specs.roofline import Peaks, peaks_of, ridge_points
from kernelwright.hardware_specs.schema import GROUPS, Features, Figure, GpuSpec, Source, field_paths
from kernelwright.hardware_specs.table import lookup

_UNITS = {
    "sms": "SMs",
    "clocks.boost_mhz": "MHz",
    "clocks.base_mhz": "MHz",
    "memory.size_gb": "GB",
    "memory.bandwidth_gbs": "GB/s",
    "cache.l2_mb": "MB",
    "cache.l3_mb": "MB",
    "limits.shared_mem_per_sm_kb": "KB",
    "limits.shared_mem_per_block_kb": "KB",
    "limits.registers_per_sm": "32-bit registers",
    "limits.registers_per_thread": "32-bit registers",
    "limits.max_threads_per_sm": "threads",
    "limits.max_warps_per_sm": "warps",
    "limits.max_blocks_per_sm": "blocks",
    "limits.warp_size": "threads",
}

# Short names people (and models) use for the common figures.
FIELD_ALIASES = {
    "sm_count": "sms",
    "cc": "compute_capability",
    "arch": "architecture",
    "boost_clock": "clocks.boost_mhz",
    "memory": "memory.size_gb",
    "memory_size": "memory.size_gb",
    "bandwidth": "memory.bandwidth_gbs",
    "memory_bandwidth": "memory.bandwidth_gbs",
    "dram_bandwidth": "memory.bandwidth_gbs",
    "l2": "cache.l2_mb",
    "l2_cache": "cache.l2_mb",
    "smem_per_sm": "limits.shared_mem_per_sm_kb",
    "smem_per_block": "limits.shared_mem_per_block_kb",
    "shared_memory_per_sm": "limits.shared_mem_per_sm_kb",
    "shared_memory_per_block": "limits.shared_mem_per_block_kb",
    "fp32": "cuda_core_tflops.fp32",
    "fp64": "cuda_core_tflops.fp64",
    "tf32": "tensor_core_tflops.tf32",
    "bf16": "tensor_core_tflops.bf16",
    "fp16": "tensor_core_tflops.fp16",
    "fp8": "tensor_core_tflops.fp8",
    "fp4": "tensor_core_tflops.fp4",
    "int8": "tensor_core_tflops.int8",
}

FEATURE_ALIASES = {
    "cp.async": "async_copy",
    "cp_async": "async_copy",
    "clusters": "thread_block_clusters",
    "dsmem": "distributed_shared_memory",
    "sparsity": "structured_sparsity",
    "umma": "tcgen05",
}

_DERIVED = Source(title="derived: peak FLOP/s / peak DRAM bytes/s", note="computed from the two sourced figures")


def unit_of(path: str) -> str | None:
    if path.startswith("cuda_core_tflops.") or path.startswith("tensor_core_tflops."):
        return "TOP/s" if path.endswith(".int8") else "TFLOP/s"
    if path.startswith("ridge."):
        return "FLOP/byte" if not path.endswith("int8") else "OP/byte"
    return _UNITS.get(path)


class SpecAnswer(BaseModel):
    """One structured answer: a figure with its unit and source, or why there is none."""

    gpu: str
    field: str
    value: Figure | None
    unit: str | None = None
    source: Source | None = None
    note: str | None = None


def _resolve(gpu: str | GpuSpec | None) -> tuple[GpuSpec, str | None]:
    if isinstance(gpu, GpuSpec):
        return gpu, None
    if gpu is None:
        spec = detection.detected_spec()  # looked up at call time, so tests can stand in a machine
        if spec is None:
            raise EnvironmentProblem("no GPU detected on this machine", hint="name a GPU, e.g. 'h100'")
        return spec, "live-detected GPU merged over its table entry"
    found = lookup(gpu)
    return found.spec, found.note


def peaks(gpu: str | GpuSpec | None = None) -> Peaks:
    """Peaks of a named GPU, a spec, or (None) the GPU this machine has."""
    return peaks_of(_resolve(gpu)[0])


def resolve_field(name: str) -> str:
    """A dotted path for a field name, alias or unique leaf name; UsageError naming the choices."""
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    paths = field_paths()
    if key in paths or key.startswith("ridge."):
        return key
    if key in FIELD_ALIASES:
        return FIELD_ALIASES[key]
    leaves = [p for p in paths if p.split(".")[-1] == key]
    if len(leaves) == 1:
        return leaves[0]
    choices = ", ".join([*paths, "ridge.<cuda|tensor>_<precision>"])
    raise UsageError(f"unknown spec field {name!r}", hint=f"valid fields: {choices}")


def spec_value(gpu: str | GpuSpec | None, field_name: str) -> SpecAnswer:
    """One figure with its unit and source. Null figures come back with a note, not an error."""
    spec, match_note = _resolve(gpu)
    path = resolve_field(field_name)
    if path.startswith("ridge."):
        return _ridge_answer(spec, path, match_note)
    value = spec.value(path)
    unit = unit_of(path)
    if path == "sms" and spec.vendor == "amd":
        unit = "CUs"
    notes = [n for n in (match_note,) if n]
    if value is None:
        notes.append("not in the table: no vendor source states it (left empty rather than guessed)")
    return SpecAnswer(
        gpu=spec.name,
        field=path,
        value=value,
        unit=unit,
        source=spec.source_for(path) if value is not None else None,
        note="; ".join(notes) or None,
    )


def _ridge_answer(spec: GpuSpec, path: str, match_note: str | None) -> SpecAnswer:
    points = ridge_points(spec)
    key = path.removeprefix("ridge.")
    valid = [
        f"{kind}_{p}"
        for kind, group in (("cuda", "cuda_core_tflops"), ("tensor", "tensor_core_tflops"))
        for p in GROUPS[group].model_fields
    ]
    if key not in valid:
        raise UsageError(f"unknown ridge point {path!r}", hint=f"valid: {', '.join('ridge.' + v for v in valid)}")
    value = points.get(key)
    note = match_note or ("" if value is not None else "needs both a peak rate and the DRAM bandwidth")
    return SpecAnswer(gpu=spec.name, field=path, value=value, unit=unit_of(path), source=_DERIVED, note=note or None)


def has_feature(gpu: str | GpuSpec | None, feature: str) -> SpecAnswer:
    """Whether a GPU supports a feature (wgmma, tma, cp.async, fp8, ...); None means unknown."""
    spec, match_note = _resolve(gpu)
    key = feature.strip().lower().replace("-", "_").replace(" ", "_")
    key = FEATURE_ALIASES.get(feature.strip().lower(), FEATURE_ALIASES.get(key, key))
    if key not in Features.model_fields:
        names = [*Features.model_fields, *FEATURE_ALIASES]
        raise UsageError(f"unknown feature {feature!r}", hint=f"valid features: {', '.join(names)}")
    path = f"features.{key}"
    value = spec.value(path)
    note = match_note
    if value is None:
        note = "; ".join(n for n in (match_note, "unknown for this GPU (not stated by a source)") if n)
    return SpecAnswer(
        gpu=spec.name,
        field=path,
        value=value,
        unit=None,
        source=spec.source_for(path) if value is not None else None,
        note=note,
    )


def query_specs(question_key: str, gpu: str | None = None) -> SpecAnswer:
    """The agent's single tool: a feature name ('wgmma') or a field ('l2', 'memory.bandwidth_gbs',
    'ridge.tensor_bf16') for a named GPU, or for this machine's GPU when `gpu` is None."""
    key = question_key.strip().lower()
    feature_key = FEATURE_ALIASES.get(key, key.replace("-", "_").replace(" ", "_"))
    if feature_key in Features.model_fields and key not in FIELD_ALIASES:
        return has_feature(gpu, feature_key)
    if key.startswith("features."):
        return has_feature(gpu, key.removeprefix("features."))
    return spec_value(gpu, question_key)
