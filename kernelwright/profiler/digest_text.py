"""Rendering a digest as short text for a model (kept under 2 KB)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelwright.profiler.digest import NcuDigest


def num(value: float | None, fmt: str = ".1f", suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{fmt}}{suffix}"


def size(value: float | None) -> str:
    if value is None:
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def rate(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def dims(value: tuple[int, int, int] | None) -> str:
    return "n/a" if value is None else "(" + ",".join(str(v) for v in value) + ")"


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


def render(d: NcuDigest, limit: int) -> str:
    """The digest as lines of `key: values`; NCU's messages shrink until the text fits `limit`."""
    for message_chars in (240, 160, 100, 60, 0):
        text = "\n".join(_lines(d, message_chars))
        if len(text.encode()) <= limit:
            return text
    return text.encode()[: limit - 3].decode(errors="ignore") + "..."
