"""Which Nsight Compute metrics the digest reads, and small readers over one kernel's metrics.

Names are the ones ncu's sections carry on Volta and newer; readers return None for a metric the
report lacks, so a report collected with fewer sections still digests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernelwright.profiler.report import NcuKernel

DURATION = "gpu__time_duration.sum"
SOL_SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
SOL_MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
SOL_DRAM = (
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
)
SOL_L1 = "l1tex__throughput.avg.pct_of_peak_sustained_active"
SOL_L2 = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
GRID_SIZE = "launch__grid_size"
BLOCK_SIZE = "launch__block_size"
REGISTERS = "launch__registers_per_thread"
SMEM_STATIC = "launch__shared_mem_per_block_static"
SMEM_DYNAMIC = "launch__shared_mem_per_block_dynamic"
WAVES = "launch__waves_per_multiprocessor"
SM_COUNT = "launch__sm_count"
OCC_THEORETICAL = "sm__maximum_warps_per_active_cycle_pct"
OCC_ACHIEVED = "sm__warps_active.avg.pct_of_peak_sustained_active"
OCC_LIMITS = {
    "registers": "launch__occupancy_limit_registers",
    "shared memory": "launch__occupancy_limit_shared_mem",
    "warps (block size)": "launch__occupancy_limit_warps",
    "blocks per SM": "launch__occupancy_limit_blocks",
    "barriers": "launch__occupancy_limit_barriers",
}
ISSUE_ACTIVE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
ELIGIBLE_WARPS = "smsp__warps_eligible.avg.per_cycle_active"
IPC = "sm__inst_executed.avg.per_cycle_active"
L1_HIT = "l1tex__t_sector_hit_rate.pct"
L2_HIT = "lts__t_sector_hit_rate.pct"
BANK_CONFLICTS = (
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
)
BANK_CONFLICTS_TOTAL = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
_SASS = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"
FLOP_OPS = {
    "fp32": (("fadd", 1), ("fmul", 1), ("ffma", 2)),
    "fp16": (("hadd", 1), ("hmul", 1), ("hfma", 2)),
    "fp64": (("dadd", 1), ("dmul", 1), ("dfma", 2)),
}
_STALL_PATTERNS = (
    re.compile(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio"),
    re.compile(r"smsp__average_warp_latency_issue_stalled_(\w+?)\.ratio"),
    re.compile(r"smsp__warp_issue_stalled_(\w+?)_per_warp_active\.pct"),
)
_NOT_STALLS = {"selected"}
_TENSOR = re.compile(
    r"sm__pipe_tensor\w*_cycles_active\.avg\.pct_of_peak_sustained_(active|elapsed)"
    r"|sm__inst_executed_pipe_tensor\w*\.avg\.pct_of_peak_sustained_active"
)


def first(kernel: NcuKernel, *names: str) -> float | None:
    for name in names:
        value = kernel.value(name)
        if value is not None:
            return value
    return None


def stall_reasons(kernel: NcuKernel) -> list[tuple[str, float]]:
    """Warp stall reasons, largest first (cycles per issued instruction, or % of warps)."""
    for pattern in _STALL_PATTERNS:
        found: dict[str, float] = {}
        for name in kernel.metrics:
            match = pattern.fullmatch(name)
            value = kernel.value(name) if match else None
            if match and value is not None and match.group(1) not in _NOT_STALLS:
                found[match.group(1)] = value
        if found:
            return sorted(found.items(), key=lambda kv: kv[1], reverse=True)
    return []


def tensor_pipe_pct(kernel: NcuKernel) -> float | None:
    values = [v for name in kernel.metrics if _TENSOR.fullmatch(name) and (v := kernel.value(name)) is not None]
    return max(values) if values else None


def bank_conflicts(kernel: NcuKernel) -> float | None:
    parts = [kernel.value(n) for n in BANK_CONFLICTS]
    if any(p is not None for p in parts):
        return sum(p for p in parts if p is not None)
    return kernel.value(BANK_CONFLICTS_TOTAL)


@dataclass(frozen=True)
class FlopCount:
    total: float
    by_precision: dict[str, float]

    @property
    def dominant(self) -> str | None:
        if not self.by_precision or self.total <= 0:
            return None
        return max(self.by_precision.items(), key=lambda kv: kv[1])[0]


def flop_count(kernel: NcuKernel) -> FlopCount | None:
    """FLOPs counted from SASS add/mul/fma instructions (tensor-core work is not counted)."""
    by: dict[str, float] = {}
    for precision, ops in FLOP_OPS.items():
        values = [(kernel.value(_SASS.format(op)), weight) for op, weight in ops]
        if all(v is None for v, _ in values):
            continue
        by[precision] = sum((v or 0.0) * w for v, w in values)
    if not by:
        return None
    return FlopCount(total=sum(by.values()), by_precision=by)


def occupancy_limiter(kernel: NcuKernel) -> str | None:
    """What caps blocks per SM: the smallest of ncu's per-resource limits."""
    limits = {label: v for label, name in OCC_LIMITS.items() if (v := kernel.value(name)) is not None}
    if not limits:
        return None
    return min(limits.items(), key=lambda kv: kv[1])[0]
