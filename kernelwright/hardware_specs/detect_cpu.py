"""Describing the host CPU cheaply: /proc and /sys on Linux, `platform` elsewhere. Missing files
give None fields, never an exception."""

from __future__ import annotations

import logging
import os
import platform
from pathlib import Path

from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

# ISA extensions that matter for CPU kernels, as /proc/cpuinfo spells them (x86 `flags`, ARM `Features`).
_X86_EXTENSIONS = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni",
    "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512ifma", "avx512vbmi",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
)  # fmt: skip
_ARM_EXTENSIONS = {
    "asimd": "neon",
    "asimdhp": "neon-fp16",
    "asimddp": "neon-dotprod",
    "i8mm": "i8mm",
    "bf16": "bf16",
    "sve": "sve",
    "sve2": "sve2",
    "sme": "sme",
}


class CpuCache(BaseModel):
    level: int
    type: str  # Data, Instruction, Unified
    size_kb: int | None = None
    shared_by_cpus: int | None = None


class CpuInfo(BaseModel):
    model: str | None = None
    architecture: str = Field(default_factory=platform.machine)
    physical_cores: int | None = None
    logical_cores: int | None = None
    isa_extensions: list[str] = Field(default_factory=list)
    caches: list[CpuCache] = Field(default_factory=list)
    memory_total_gib: float | None = None
    torch_threads: int | None = None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _cpuinfo_blocks(text: str) -> list[dict[str, str]]:
    blocks: list[dict[str, str]] = []
    for chunk in text.split("\n\n"):
        entry: dict[str, str] = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                entry[key.strip().lower()] = value.strip()
        if entry:
            blocks.append(entry)
    return blocks


def _extensions(flags: set[str]) -> list[str]:
    found = [f for f in _X86_EXTENSIONS if f in flags]
    found += [name for flag, name in _ARM_EXTENSIONS.items() if flag in flags]
    return found


def _size_kb(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": 1, "M": 1024, "G": 1024 * 1024}
    try:
        if text and text[-1] in scale:
            return int(text[:-1]) * scale[text[-1]]
        return int(text) // 1024
    except ValueError:
        return None


def _caches(cpu0: Path) -> list[CpuCache]:
    caches = []
    for index in sorted(cpu0.glob("cache/index*")):
        level, kind, size = (_read(index / n) for n in ("level", "type", "size"))
        if level is None or kind is None:
            continue
        shared = _read(index / "shared_cpu_list")
        caches.append(
            CpuCache(
                level=int(level.strip()),
                type=kind.strip(),
                size_kb=_size_kb(size) if size else None,
                shared_by_cpus=_count_cpu_list(shared) if shared else None,
            )
        )
    return caches


def _count_cpu_list(text: str) -> int | None:
    """'0-3,8' -> 5."""
    total = 0
    try:
        for part in text.strip().split(","):
            lo, _, hi = part.partition("-")
            total += int(hi) - int(lo) + 1 if hi else 1
    except ValueError:
        return None
    return total


def _sys_physical_cores(cpu_dir: Path) -> int | None:
    pairs = set()
    for topology in cpu_dir.glob("cpu[0-9]*/topology"):
        package, core = _read(topology / "physical_package_id"), _read(topology / "core_id")
        if package is not None and core is not None:
            pairs.add((package.strip(), core.strip()))
    return len(pairs) or None


def _memory_gib(meminfo: str | None) -> float | None:
    if meminfo:
        for line in meminfo.splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _torch_threads() -> int | None:
    try:
        import torch
    except ImportError:
        return None
    return int(torch.get_num_threads())


def detect_cpu(root: Path = Path("/")) -> CpuInfo:
    """The host CPU. `root` lets tests point at a fake /proc and /sys."""
    blocks = _cpuinfo_blocks(_read(root / "proc/cpuinfo") or "")
    first = blocks[0] if blocks else {}
    model = first.get("model name") or first.get("hardware") or platform.processor() or None
    flags = set((first.get("flags") or first.get("features") or "").split())
    cores = {(b.get("physical id", "0"), b["core id"]) for b in blocks if "core id" in b}
    logical = sum(1 for b in blocks if "processor" in b) or os.cpu_count()
    extensions = _extensions(flags)
    if not flags and platform.machine().lower() in ("arm64", "aarch64"):
        extensions = ["neon"]  # every ARMv8-A core has Advanced SIMD
    return CpuInfo(
        model=model,
        physical_cores=len(cores) or _sys_physical_cores(root / "sys/devices/system/cpu"),
        logical_cores=logical,
        isa_extensions=extensions,
        caches=_caches(root / "sys/devices/system/cpu/cpu0"),
        memory_total_gib=_memory_gib(_read(root / "proc/meminfo")),
        torch_threads=_torch_threads(),
    )
