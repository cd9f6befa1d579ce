"""kernelwright's one GPU reader: each visible GPU's torch device properties (read once per
process) and what nvidia-smi says (driver, clocks).

Everything that needs a GPU fact takes it from here: spec detection merges it over the table, the
harness records it with every result, and `doctor` checks it. Nothing here raises for a missing
GPU, torch or nvidia-smi; those read as empty answers.
"""

from __future__ import annotations

import csv
import functools
import logging
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

log = logging.getLogger(__name__)

NVIDIA_SMI_TIMEOUT_S = 10.0


class GpuLive(BaseModel):
    """What this machine reports for one GPU (None where torch or nvidia-smi does not expose it).
    Frozen: `live_gpus` hands the same objects to every caller."""

    model_config = ConfigDict(frozen=True)

    index: int
    name: str
    compute_capability: str | None = None
    sms: int | None = None
    total_memory_bytes: int | None = None
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
        total_memory_bytes=total,
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


@dataclass(frozen=True)
class SmiAnswer:
    """`nvidia-smi --query-gpu` rows (one list of fields per GPU), or why there are none."""

    rows: list[list[str]]
    missing: bool = False  # nvidia-smi is not on PATH
    error: str | None = None  # it ran but failed or timed out: the tail of what it said


def nvidia_smi(fields: Sequence[str]) -> SmiAnswer:
    """Ask nvidia-smi for `fields` of every GPU (CSV, no header, no units)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return SmiAnswer(rows=[], missing=True)
    cmd = [exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return SmiAnswer(rows=[], error=f"timed out after {NVIDIA_SMI_TIMEOUT_S:g} s")
    except OSError as exc:
        return SmiAnswer(rows=[], error=str(exc))
    if done.returncode != 0:
        return SmiAnswer(rows=[], error=(done.stdout + done.stderr).strip()[-200:] or f"exit {done.returncode}")
    rows = [[f.strip() for f in row] for row in csv.reader(done.stdout.strip().splitlines())]
    return SmiAnswer(rows=[r for r in rows if len(r) == len(fields)])


def query_nvidia_smi() -> tuple[str | None, list[dict[str, Any]]]:
    """(driver version, per-GPU clocks) from nvidia-smi; (None, []) when it is missing or fails."""
    answer = nvidia_smi(("index", "uuid", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.max.mem"))
    if answer.error:
        log.info("nvidia-smi did not answer: %s", answer.error)
    rows = []
    driver = None
    for index, uuid, driver_version, sm, sm_max, mem_max in answer.rows:
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


@functools.cache
def live_gpus() -> tuple[GpuLive, ...]:
    """Every visible CUDA device's torch properties, read once per process; () without torch or a GPU."""
    try:
        import torch
    except ImportError:
        return ()
    if not torch.cuda.is_available():
        return ()
    return tuple(read_torch_gpu(i, torch.cuda.get_device_properties(i)) for i in range(torch.cuda.device_count()))


def current_gpu() -> GpuLive | None:
    """The GPU that torch launches on now (`torch.cuda.current_device()`), or None with no GPU."""
    gpus = live_gpus()
    if not gpus:
        return None
    import torch  # present: live_gpus read a GPU through it

    return gpus[torch.cuda.current_device()]
