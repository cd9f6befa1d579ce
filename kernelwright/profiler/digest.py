"""A curated digest of an Nsight Compute report for a model to read (~35 values, < 2 KB of text).

A full section dump is ~500 metrics per kernel; the digest keeps what decides the next step:
duration, speed-of-light, launch shape, occupancy, stalls, caches, a bottleneck class, a roofline
position and NCU's own top findings. `NcuDigest.to_text` is how a model reads it.
"""

from __future__ import annotations

from pydantic import BaseModel

from kernelwright.profiler import metrics as m
from kernelwright.profiler.classification import Classification, Roofline, classify, roofline
from kernelwright.profiler.formatting import dims, num, rate, size
from kernelwright.profiler.report import NcuKernel, NcuReport

TEXT_LIMIT = 2000
NAME_CHARS = 70


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
        """The digest as lines of `key: values`; NCU's messages shrink until the text fits `limit`."""
        for message_chars in (240, 160, 100, 60, 0):
            text = "\n".join(_lines(self, message_chars))
            if len(text.encode()) <= limit:
                return text
        return text.encode()[: limit - 3].decode(errors="ignore") + "..."


def _lines(d: NcuDigest, message_chars: int) -> list[str]:
    scope = f"{d.kernels_in_report} kernel(s), {d.launches_in_report} launch(es)"
    lines = [
        f"kernel: {d.kernel} [longest of {scope}; total {num(d.total_duration_us, '.2f', ' us')}]",
        f"class: {d.classification.kind.value} ({d.classification.reason})",
        f"duration: {num(d.duration_us, '.2f', ' us')}",
        f"SOL %: SM {num(d.sol_sm_pct)} | memory {num(d.sol_memory_pct)} | DRAM {num(d.sol_dram_pct)}"
        f" | L1 {num(d.sol_l1_pct)} | L2 {num(d.sol_l2_pct)}",
        f"DRAM bytes: read {size(d.dram_read_bytes)}, write {size(d.dram_write_bytes)}",
        f"launch: grid {dims(d.grid)} = {num(d.blocks, '.0f')} blocks, block {dims(d.block)};"
        f" {num(d.registers_per_thread, '.0f')} regs/thread; smem static {size(d.smem_static_bytes)},"
        f" dynamic {size(d.smem_dynamic_bytes)}; {num(d.waves_per_sm, '.2f')} waves/SM",
        f"occupancy: theoretical {num(d.occupancy_theoretical_pct)}%, achieved {num(d.occupancy_achieved_pct)}%"
        f" (limiter: {d.occupancy_limiter or 'n/a'})",
        f"issue slots active {num(d.issue_active_pct)}% | IPC {num(d.ipc, '.2f')}"
        f" | eligible warps/cycle {num(d.eligible_warps_per_cycle, '.2f')}",
        "top stalls (cycles/issue): " + (", ".join(f"{r} {v:.2f}" for r, v in d.top_stalls) or "n/a"),
        f"tensor pipe {num(d.tensor_pipe_pct)}% | L1 hit {num(d.l1_hit_pct)}% | L2 hit {num(d.l2_hit_pct)}%"
        f" | smem bank conflicts {num(d.smem_bank_conflicts, '.0f')}",
    ]
    r = d.roofline
    if r is None:
        lines.append("roofline: n/a (no FLOP count or DRAM bytes)")
    else:
        text = (
            f"roofline ({r.precision}, SASS-counted): {num(r.intensity, '.2f')} FLOP/B,"
            f" {rate(r.achieved_flops_per_s, 'FLOP/s')}"
        )
        if r.ridge_intensity is not None:
            text += f"; ridge {r.ridge_intensity:.1f} FLOP/B -> {r.regime}-side, {num(r.pct_of_roof)}% of roof"
        lines.append(text)
    others = [k for k in d.top_kernels if k.name != d.kernel][:3]
    if others:
        lines.append("other kernels: " + "; ".join(f"{k.name} {k.share_pct:.0f}% ({k.launches}x)" for k in others))
    if d.findings:
        lines.append("NCU findings:")
        for f in d.findings:
            est = f"est. {f.speedup_pct:.0f}%" if f.speedup_pct is not None else "est. n/a"
            msg = " ".join(f.message.split())
            msg = msg if len(msg) <= message_chars else msg[: message_chars - 1] + "…"
            lines.append(f"- [{est}] {f.title}: {msg}" if msg else f"- [{est}] {f.title}")
    return lines


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
