"""Merging each live GPU (see `live_gpu`) over its spec-table entry. Live values win where they
disagree; every merged figure records where it came from."""

from __future__ import annotations

from importlib.util import find_spec

from pydantic import BaseModel, Field

from kernelwright.hardware_specs.live_gpu import GpuLive, attach_clocks, live_gpus, query_nvidia_smi
from kernelwright.hardware_specs.matching import NoMatch
from kernelwright.hardware_specs.roofline import ridge_points
from kernelwright.hardware_specs.schema import GpuSpec, Source
from kernelwright.hardware_specs.table import find

LIVE_TORCH = Source(title="live: torch.cuda.get_device_properties", note="read on this machine")
LIVE_SMI = Source(title="live: nvidia-smi --query-gpu", note="read on this machine")
DERIVED_BW = Source(
    title="live, derived: 2 x memory clock x bus width (torch device properties)",
    note="theoretical DDR peak; used only when the table has no figure",
)


class DetectedGpu(BaseModel):
    live: GpuLive
    table_entry: str | None = None  # the matched table name, None for a GPU not in the table
    spec: GpuSpec  # the table entry with live values merged over it
    provenance: dict[str, str] = Field(default_factory=dict)  # field path -> live / table / live (table said X)
    ridge_points: dict[str, float] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


def _agrees(a: object, b: object) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) <= 0.01 * max(abs(a), abs(b))
    return a == b


def merge(live: GpuLive) -> DetectedGpu:
    """Merge live properties over the matching table entry (or over an empty one)."""
    found = find(live.name)
    notes: list[str] = []
    if isinstance(found, NoMatch):
        base = GpuSpec(name=live.name, vendor="amd" if "amd" in live.name.lower() else "nvidia")
        notes.append(f"{live.name!r} is not in the spec table: only live properties are known")
        table_entry = None
    else:
        base, table_entry = found.spec, found.spec.name
        if found.note:
            notes.append(found.note)
    overrides: dict[str, tuple[object, Source]] = {
        "compute_capability": (live.compute_capability, LIVE_TORCH),
        "sms": (live.sms, LIVE_TORCH),
        "cache.l2_mb": (live.l2_mb, LIVE_TORCH),
        "limits.shared_mem_per_sm_kb": (live.shared_mem_per_sm_kb, LIVE_TORCH),
        "limits.shared_mem_per_block_kb": (live.shared_mem_per_block_optin_kb, LIVE_TORCH),
        "limits.registers_per_sm": (live.registers_per_sm, LIVE_TORCH),
        "limits.max_threads_per_sm": (live.max_threads_per_sm, LIVE_TORCH),
        "limits.warp_size": (live.warp_size, LIVE_TORCH),
        "clocks.boost_mhz": (live.clock_sm_max_mhz, LIVE_SMI),
    }
    derived_bw = _derived_bandwidth_gbs(live)
    if base.memory.bandwidth_gbs is None and derived_bw is not None:
        overrides["memory.bandwidth_gbs"] = (round(derived_bw, 1), DERIVED_BW)
    if base.memory.size_gb is None and live.total_memory_gib is not None:
        overrides["memory.size_gb"] = (live.total_memory_gib, LIVE_TORCH)
    data = base.model_dump()
    sources = dict(base.sources)
    provenance = {path: "table" for path, _ in base.figures()}
    for path, (value, source) in overrides.items():
        if value is None:
            continue
        old = base.value(path)
        provenance[path] = (
            "live" if old is None else "live (matches table)" if _agrees(old, value) else f"live (table said {old})"
        )
        group, _, leaf = path.partition(".")
        if leaf:
            data[group][leaf] = value
        else:
            data[group] = value
        sources[path] = source
    data["sources"] = sources
    spec = GpuSpec.model_validate(data)
    return DetectedGpu(
        live=live,
        table_entry=table_entry,
        spec=spec,
        provenance=provenance,
        ridge_points=ridge_points(spec),
        notes=notes,
    )


def _derived_bandwidth_gbs(live: GpuLive) -> float | None:
    if not live.memory_clock_mhz or not live.memory_bus_width_bits:
        return None
    return 2 * live.memory_clock_mhz * 1e6 * live.memory_bus_width_bits / 8 / 1e9


def detect_gpus() -> tuple[list[DetectedGpu], str | None, list[str]]:
    """(GPUs merged over the table, driver version, notes). No CUDA device -> ([], None, [note])."""
    if find_spec("torch") is None:
        return [], None, ["torch is not installed: GPUs cannot be read"]
    gpus = list(live_gpus())
    if not gpus:
        return [], None, []
    driver, rows = query_nvidia_smi()
    notes = [] if rows else ["nvidia-smi unavailable: no driver version or clocks"]
    return [merge(g) for g in attach_clocks(gpus, rows)], driver, notes
