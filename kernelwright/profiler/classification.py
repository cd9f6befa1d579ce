"""What limits a kernel: a bottleneck class from speed-of-light (NCU's own rule of thumb) and its
position on the DRAM roofline. Pure functions of numbers the digest reads from a report."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

SOL_LIMIT = 60.0  # NCU's own rule: both SOL below 60% -> latency-bound


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
