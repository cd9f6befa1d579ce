"""Baseline vs candidate: what changed between two digests, as text for the reviewer."""

from __future__ import annotations

from pydantic import BaseModel

from kernelwright.profiler.digest import NcuDigest
from kernelwright.profiler.formatting import num

_FIELDS = (
    ("duration_us", "duration us"),
    ("total_duration_us", "all kernels us"),
    ("sol_sm_pct", "SOL SM %"),
    ("sol_memory_pct", "SOL memory %"),
    ("sol_dram_pct", "SOL DRAM %"),
    ("sol_l1_pct", "SOL L1 %"),
    ("sol_l2_pct", "SOL L2 %"),
    ("occupancy_theoretical_pct", "occupancy theoretical %"),
    ("occupancy_achieved_pct", "occupancy achieved %"),
    ("issue_active_pct", "issue active %"),
    ("registers_per_thread", "regs/thread"),
    ("waves_per_sm", "waves/SM"),
    ("tensor_pipe_pct", "tensor pipe %"),
    ("dram_read_bytes", "DRAM read B"),
    ("dram_write_bytes", "DRAM write B"),
    ("smem_bank_conflicts", "smem bank conflicts"),
)


class Change(BaseModel):
    label: str
    baseline: float | None
    candidate: float | None

    @property
    def pct(self) -> float | None:
        if self.baseline in (None, 0) or self.candidate is None:
            return None
        assert self.baseline is not None
        return 100.0 * (self.candidate - self.baseline) / self.baseline


class DigestDiff(BaseModel):
    baseline_kernel: str
    candidate_kernel: str
    duration_change_pct: float | None
    total_duration_change_pct: float | None
    speedup: float | None  # baseline / candidate, over all kernels when both totals exist
    changes: list[Change]
    baseline_class: str
    candidate_class: str
    baseline_stalls: list[tuple[str, float]]
    candidate_stalls: list[tuple[str, float]]

    def to_text(self) -> str:
        lines = [
            f"baseline: {self.baseline_kernel}",
            f"candidate: {self.candidate_kernel}",
            f"speedup (all kernels): {num(self.speedup, '.2f', 'x')};"
            f" longest kernel duration {num(self.duration_change_pct, '+.1f', '%')}",
        ]
        if self.baseline_class != self.candidate_class:
            lines.append(f"class: {self.baseline_class} -> {self.candidate_class}")
        else:
            lines.append(f"class: {self.candidate_class} (unchanged)")
        for c in self.changes:
            if c.baseline is None and c.candidate is None:
                continue
            fmt = ".3g" if max(abs(c.baseline or 0), abs(c.candidate or 0)) >= 1e4 else ".1f"
            pct = f" ({c.pct:+.0f}%)" if c.pct is not None and c.baseline != c.candidate else ""
            lines.append(f"{c.label}: {num(c.baseline, fmt)} -> {num(c.candidate, fmt)}{pct}")
        stalls = ", ".join(f"{r} {v:.1f}" for r, v in self.baseline_stalls) or "n/a"
        lines.append(f"stalls before: {stalls}")
        stalls = ", ".join(f"{r} {v:.1f}" for r, v in self.candidate_stalls) or "n/a"
        lines.append(f"stalls after: {stalls}")
        return "\n".join(lines)


def _pct(before: float | None, after: float | None) -> float | None:
    if before in (None, 0) or after is None:
        return None
    assert before is not None
    return 100.0 * (after - before) / before


def diff(baseline: NcuDigest, candidate: NcuDigest) -> DigestDiff:
    """Compare two digests (e.g. the reference's and a candidate's)."""
    total_b, total_c = baseline.total_duration_us, candidate.total_duration_us
    return DigestDiff(
        baseline_kernel=baseline.kernel,
        candidate_kernel=candidate.kernel,
        duration_change_pct=_pct(baseline.duration_us, candidate.duration_us),
        total_duration_change_pct=_pct(total_b, total_c),
        speedup=total_b / total_c if total_b and total_c else None,
        changes=[
            Change(label=label, baseline=getattr(baseline, name), candidate=getattr(candidate, name))
            for name, label in _FIELDS
        ],
        baseline_class=baseline.classification.kind.value,
        candidate_class=candidate.classification.kind.value,
        baseline_stalls=baseline.top_stalls,
        candidate_stalls=candidate.top_stalls,
    )
