"""A curated digest of an Nsight Compute report for a model to read (~35 values, < 2 KB of text).

A full section dump is ~500 metrics per kernel; the digest keeps what decides the next step:
duration, speed-of-light, launch shape, occupancy, stalls, caches, a bottleneck class, a roofline
position and NCU's own top findings.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

from kernelwright.profiler import metrics as m
from kernelwright.profiler.report import NcuKernel, NcuReport

TEXT_LIMIT = 2000
SOL_LIMIT = 60.0  # NCU's own rule: both SOL below 60% -> latency-bound
NAME_CHARS = 70


class Bottleneck(StrEnum):
    MEMORY_BOUND = "memory-bound"
    COMPUTE_BOUND = "compute-bound"
    LATENCY_BOUND = "latency-bound"
    OCCUPANCY_LIMITED = "occupancy-limited"
    UNKNOWN = "unknown"


class Classification(BaseModel):
    kind: Bottleneck
    reason: str


class Roofline(BaseModel):
    flops: float
    dram_bytes: float
    intensity: float | None  # FLOP per DRAM byte
    precision: str
    achieved_flops_per_s: float | None = None
    peak_flops_per_s: float | None = None
    peak_dram_bytes_per_s: float | None = None
    ridge_intensity: float | None = None
    regime: str | None = None  # "memory" or "compute" side of the ridge
    pct_of_roof: float | None = None


class Finding(BaseModel):
    title: str
    speedup_pct: float | None
    message: str


class KernelShare(BaseModel):
    name: str
    launches: int
    total_us: float
    share_pct: float


class NcuDigest(BaseModel):
    kernel: str
    kernels_in_report: int
    launches_in_report: int
    total_duration_us: float | None
    top_kernels: list[KernelShare] = []
    duration_us: float | None = None
    sol_sm_pct: float | None = None
    sol_memory_pct: float | None = None
    sol_dram_pct: float | None = None
    sol_l1_pct: float | None = None
    sol_l2_pct: float | None = None
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    blocks: float | None = None
    threads_per_block: float | None = None
    registers_per_thread: float | None = None
    smem_static_bytes: float | None = None
    smem_dynamic_bytes: float | None = None
    waves_per_sm: float | None = None
    occupancy_theoretical_pct: float | None = None
    occupancy_achieved_pct: float | None = None
    occupancy_limiter: str | None = None
    issue_active_pct: float | None = None
    eligible_warps_per_cycle: float | None = None
    ipc: float | None = None
    top_stalls: list[tuple[str, float]] = []
    tensor_pipe_pct: float | None = None
    l1_hit_pct: float | None = None
    l2_hit_pct: float | None = None
    smem_bank_conflicts: float | None = None
    classification: Classification
    roofline: Roofline | None = None
    findings: list[Finding] = []

    def to_text(self, limit: int = TEXT_LIMIT) -> str:
        from kernelwright.profiler.digest_text import render

        return render(self, limit)


def classify(
    sol_sm: float | None,
    sol_mem: float | None,
    *,
    waves: float | None = None,
    occ_theoretical: float | None = None,
    occ_achieved: float | None = None,
    tensor_pipe: float | None = None,
    limiter: str | None = None,
) -> Classification:
    """Bottleneck class from speed-of-light, following NCU's rule of thumb (duration stays the truth)."""
    if sol_sm is None or sol_mem is None:
        return Classification(kind=Bottleneck.UNKNOWN, reason="speed-of-light metrics missing")
    level = "at a throughput limit" if max(sol_sm, sol_mem) > 80 else "near a throughput limit"
    if tensor_pipe is not None and tensor_pipe >= SOL_LIMIT:
        return Classification(kind=Bottleneck.COMPUTE_BOUND, reason=f"tensor pipe {tensor_pipe:.0f}% busy, {level}")
    if sol_sm >= SOL_LIMIT and sol_sm >= sol_mem:
        return Classification(
            kind=Bottleneck.COMPUTE_BOUND, reason=f"SM {sol_sm:.0f}% >= memory {sol_mem:.0f}%, {level}"
        )
    if sol_mem >= SOL_LIMIT:
        return Classification(kind=Bottleneck.MEMORY_BOUND, reason=f"memory {sol_mem:.0f}% > SM {sol_sm:.0f}%, {level}")
    both = f"SM {sol_sm:.0f}% and memory {sol_mem:.0f}% both < {SOL_LIMIT:.0f}%"
    if waves is not None and waves < 1:
        return Classification(kind=Bottleneck.LATENCY_BOUND, reason=f"{both}; small grid ({waves:.2f} waves)")
    if occ_theoretical is not None and occ_theoretical <= 50:
        by = f" by {limiter}" if limiter else ""
        return Classification(
            kind=Bottleneck.OCCUPANCY_LIMITED,
            reason=f"{both}; theoretical occupancy {occ_theoretical:.0f}% (limited{by})",
        )
    if occ_achieved is not None and occ_theoretical is not None and occ_achieved < 0.5 * occ_theoretical:
        return Classification(
            kind=Bottleneck.OCCUPANCY_LIMITED,
            reason=f"{both}; achieved occupancy {occ_achieved:.0f}% of theoretical {occ_theoretical:.0f}%",
        )
    side = "memory" if sol_mem > sol_sm else "SM"
    return Classification(kind=Bottleneck.LATENCY_BOUND, reason=f"{both}; stalls dominate ({side} side higher)")


_PEAK_KEYS = {"fp32": ("fp32", "FP32"), "fp16": ("fp16", "FP16", "bf16", "BF16"), "fp64": ("fp64", "FP64")}


def roofline(
    flops: float | None,
    dram_bytes: float | None,
    duration_s: float | None,
    *,
    precision: str = "fp32",
    peak_dram_bytes_per_s: float | None = None,
    peak_flops: dict[str, float] | None = None,
) -> Roofline | None:
    """Position on the DRAM roofline; None without a FLOP count or DRAM bytes."""
    if not flops or not dram_bytes or flops <= 0 or dram_bytes <= 0:
        return None
    intensity = flops / dram_bytes
    point = Roofline(flops=flops, dram_bytes=dram_bytes, intensity=intensity, precision=precision)
    if duration_s and duration_s > 0:
        point.achieved_flops_per_s = flops / duration_s
    peak = None
    for key in _PEAK_KEYS.get(precision, (precision,)):
        if peak_flops and key in peak_flops:
            peak = peak_flops[key]
            break
    point.peak_flops_per_s = peak
    point.peak_dram_bytes_per_s = peak_dram_bytes_per_s
    if peak and peak_dram_bytes_per_s:
        point.ridge_intensity = peak / peak_dram_bytes_per_s
        point.regime = "memory" if intensity < point.ridge_intensity else "compute"
        roof = min(peak, intensity * peak_dram_bytes_per_s)
        if point.achieved_flops_per_s is not None and roof > 0:
            point.pct_of_roof = 100.0 * point.achieved_flops_per_s / roof
    return point


def _short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def _shares(kernels: list[NcuKernel]) -> tuple[list[KernelShare], float | None]:
    totals: dict[str, tuple[int, float]] = {}
    for k in kernels:
        launches, total = totals.get(k.name, (0, 0.0))
        totals[k.name] = (launches + 1, total + (k.duration_ns or 0.0) / 1e3)
    grand = sum(t for _, t in totals.values())
    rows = [
        KernelShare(name=_short(n), launches=c, total_us=t, share_pct=100.0 * t / grand if grand else 0.0)
        for n, (c, t) in totals.items()
    ]
    rows.sort(key=lambda r: r.total_us, reverse=True)
    return rows[:5], (grand if any(k.duration_ns is not None for k in kernels) else None)


def findings(kernel: NcuKernel, top: int = 3) -> list[Finding]:
    """NCU's own rule results with the largest estimated speedup (optimisations and warnings)."""
    rules = [r for r in kernel.rules if r.type in ("OPTIMIZATION", "WARNING") and (r.message or r.title)]
    rules.sort(key=lambda r: r.speedup_pct if r.speedup_pct is not None else -1.0, reverse=True)
    return [Finding(title=r.title or r.rule, speedup_pct=r.speedup_pct, message=r.message) for r in rules[:top]]


def build_digest(
    report: NcuReport | list[NcuKernel],
    *,
    kernel_regex: str | None = None,
    focus: NcuKernel | None = None,
    flops: float | None = None,
    precision: str | None = None,
    peak_dram_bytes_per_s: float | None = None,
    peak_flops: dict[str, float] | None = None,
) -> NcuDigest | None:
    """Digest the longest kernel launch among those matching `kernel_regex` (or `focus`), with a
    summary of every matching kernel. None when nothing matches."""
    kernels = report.select(kernel_regex) if isinstance(report, NcuReport) else list(report)
    if not kernels:
        return None
    k = focus or max(kernels, key=lambda x: x.duration_ns or 0.0)
    shares, total_us = _shares(kernels)
    duration = k.duration_ns
    read, write = k.value(m.DRAM_READ), k.value(m.DRAM_WRITE)
    limiter = m.occupancy_limiter(k)
    occ_t, occ_a = k.value(m.OCC_THEORETICAL), k.value(m.OCC_ACHIEVED)
    if limiter and occ_t is not None and occ_t >= 99.9:
        limiter = "none (full)"
    tensor = m.tensor_pipe_pct(k)
    sol_sm, sol_mem, waves = k.value(m.SOL_SM), k.value(m.SOL_MEMORY), k.value(m.WAVES)
    counted = m.flop_count(k)
    total_flops = flops if flops is not None else (counted.total if counted else None)
    prec = precision or (counted.dominant if counted and counted.dominant else "fp32")
    dram = (read or 0.0) + (write or 0.0) if read is not None or write is not None else None
    return NcuDigest(
        kernel=_short(k.name),
        kernels_in_report=len({x.name for x in kernels}),
        launches_in_report=len(kernels),
        total_duration_us=total_us,
        top_kernels=shares,
        duration_us=duration / 1e3 if duration is not None else None,
        sol_sm_pct=sol_sm,
        sol_memory_pct=sol_mem,
        sol_dram_pct=m.first(k, *m.SOL_DRAM),
        sol_l1_pct=k.value(m.SOL_L1),
        sol_l2_pct=k.value(m.SOL_L2),
        dram_read_bytes=read,
        dram_write_bytes=write,
        grid=k.grid,
        block=k.block,
        blocks=k.value(m.GRID_SIZE),
        threads_per_block=k.value(m.BLOCK_SIZE),
        registers_per_thread=k.value(m.REGISTERS),
        smem_static_bytes=k.value(m.SMEM_STATIC),
        smem_dynamic_bytes=k.value(m.SMEM_DYNAMIC),
        waves_per_sm=waves,
        occupancy_theoretical_pct=occ_t,
        occupancy_achieved_pct=occ_a,
        occupancy_limiter=limiter,
        issue_active_pct=k.value(m.ISSUE_ACTIVE),
        eligible_warps_per_cycle=k.value(m.ELIGIBLE_WARPS),
        ipc=k.value(m.IPC),
        top_stalls=m.stall_reasons(k)[:3],
        tensor_pipe_pct=tensor,
        l1_hit_pct=k.value(m.L1_HIT),
        l2_hit_pct=k.value(m.L2_HIT),
        smem_bank_conflicts=m.bank_conflicts(k),
        classification=classify(
            sol_sm, sol_mem, waves=waves, occ_theoretical=occ_t, occ_achieved=occ_a, tensor_pipe=tensor, limiter=limiter
        ),
        roofline=roofline(
            total_flops,
            dram,
            duration / 1e9 if duration else None,
            precision=prec,
            peak_dram_bytes_per_s=peak_dram_bytes_per_s,
            peak_flops=peak_flops,
        ),
        findings=findings(k),
    )
