"""Reading the visible GPUs live (torch device properties, optionally nvidia-smi) and merging each
over its table entry. Live values win where they disagree; every merged figure records where it
came from."""

from __future__ import annotations

import csv
import logging
import shutil
import subprocess
from typing import Any

from pydantic import BaseModel, Field

from kernelwright.hardware_specs.matching import NoMatch
from kernelwright.hardware_specs.schema import GpuSpec, Source
from kernelwright.hardware_specs.table import find

log = logging.getLogger(__name__)

NVIDIA_SMI_TIMEOUT_S = 10.0
LIVE_TORCH = Source(title="live: torch.cuda.get_device_properties", note="read on this machine")
LIVE_SMI = Source(title="live: nvidia-smi --query-gpu", note="read on this machine")
DERIVED_BW = Source(
    title="live, derived: 2 x memory clock x bus width (torch device properties)",
    note="theoretical DDR peak; used only when the table has no figure",
)


class GpuLive(BaseModel):
    """What this machine reports for one GPU (None where torch or nvidia-smi does not expose it)."""

    index: int
    name: str
    compute_capability: str | None = None
    sms: int | None = None
    total_memory_gib: float | None = None
    l2_mb: float | None = None
    shared_mem_per_block_optin_kb: float | None = None
    shared_mem_per_sm_kb: float | None = None
    registers_per_sm: int | None = None
    max_threads_per_sm: int | None = None
    warp_size: int | None = None
    memory_clock_mhz: float | None = None
    memory_bus_width_bits: int | None = None
    clock_sm_mhz: float | None = None
    clock_sm_max_mhz: float | None = None
    clock_mem_max_mhz: float | None = None
    uuid: str | None = None


class DetectedGpu(BaseModel):
    live: GpuLive
    table_entry: str | None = None  # the matched table name, None for a GPU not in the table
    spec: GpuSpec  # the table entry with live values merged over it
    provenance: dict[str, str] = Field(default_factory=dict)  # field path -> live / table / live (table said X)
    ridge_points: dict[str, float] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


def _attr(props: Any, name: str) -> Any:
    value = getattr(props, name, None)
    return value if isinstance(value, int | float | str) and value != "" else None


def read_torch_gpu(index: int, props: Any) -> GpuLive:
    """One GPU's live properties from a `torch.cuda.get_device_properties` object."""

    def kb(n: Any) -> float | None:
        return n / 1024 if isinstance(n, int) and n > 0 else None

    major, minor = _attr(props, "major"), _attr(props, "minor")
    l2 = _attr(props, "L2_cache_size")
    total = _attr(props, "total_memory")
    mem_clock_khz = _attr(props, "memory_clock_rate")
    uuid = getattr(props, "uuid", None)
    return GpuLive(
        index=index,
        name=str(_attr(props, "name") or f"cuda:{index}"),
        compute_capability=f"{major}.{minor}" if major is not None and minor is not None else None,
        sms=_attr(props, "multi_processor_count"),
        total_memory_gib=round(total / 2**30, 2) if total else None,
        l2_mb=l2 / 2**20 if l2 else None,
        shared_mem_per_block_optin_kb=kb(_attr(props, "shared_memory_per_block_optin")),
        shared_mem_per_sm_kb=kb(_attr(props, "shared_memory_per_multiprocessor")),
        registers_per_sm=_attr(props, "regs_per_multiprocessor"),
        max_threads_per_sm=_attr(props, "max_threads_per_multi_processor"),
        warp_size=_attr(props, "warp_size"),
        memory_clock_mhz=mem_clock_khz / 1000 if mem_clock_khz else None,
        memory_bus_width_bits=_attr(props, "memory_bus_width"),
        uuid=str(uuid) if uuid is not None else None,
    )


def _number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def query_nvidia_smi() -> tuple[str | None, list[dict[str, Any]]]:
    """(driver version, per-GPU clocks) from nvidia-smi; (None, []) when it is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, []
    cmd = [
        exe,
        "--query-gpu=index,uuid,driver_version,clocks.sm,clocks.max.sm,clocks.max.mem",
        "--format=csv,noheader,nounits",
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
    except (subprocess.TimeoutExpired, OSError) as exc:
        log.info("nvidia-smi did not answer: %s", exc)
        return None, []
    if done.returncode != 0:
        log.info("nvidia-smi failed (%s): %s", done.returncode, done.stderr.strip()[:300])
        return None, []
    rows = []
    driver = None
    for fields in csv.reader(done.stdout.strip().splitlines()):
        if len(fields) != 6:
            continue
        index, uuid, driver_version, sm, sm_max, mem_max = (f.strip() for f in fields)
        driver = driver or driver_version
        rows.append(
            {
                "index": index,
                "uuid": uuid,
                "clock_sm": _number(sm),
                "clock_sm_max": _number(sm_max),
                "clock_mem_max": _number(mem_max),
            }
        )
    return driver, rows


def attach_clocks(gpus: list[GpuLive], rows: list[dict[str, Any]]) -> list[GpuLive]:
    """Put nvidia-smi clocks on torch's GPUs, matched by UUID (indices differ under CUDA_VISIBLE_DEVICES)."""
    by_uuid = {r["uuid"].lower().removeprefix("gpu-"): r for r in rows}
    out = []
    for gpu in gpus:
        row = by_uuid.get((gpu.uuid or "").lower().removeprefix("gpu-"))
        if row is None and len(rows) == len(gpus) == 1:
            row = rows[0]
        if row is None:
            out.append(gpu)
            continue
        out.append(
            gpu.model_copy(
                update={
                    "clock_sm_mhz": row["clock_sm"],
                    "clock_sm_max_mhz": row["clock_sm_max"],
                    "clock_mem_max_mhz": row["clock_mem_max"],
                }
            )
        )
    return out


def _agrees(a: object, b: object) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) <= 0.01 * max(abs(a), abs(b))
    return a == b


def merge(live: GpuLive) -> DetectedGpu:
    """Merge live properties over the matching table entry (or over an empty one)."""
    from kernelwright.hardware_specs.query import ridge_points

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
    try:
        import torch
    except ImportError:
        return [], None, ["torch is not installed: GPUs cannot be read"]
    if not torch.cuda.is_available():
        return [], None, []
    gpus = [read_torch_gpu(i, torch.cuda.get_device_properties(i)) for i in range(torch.cuda.device_count())]
    driver, rows = query_nvidia_smi()
    notes = [] if rows else ["nvidia-smi unavailable: no driver version or clocks"]
    return [merge(g) for g in attach_clocks(gpus, rows)], driver, notes
