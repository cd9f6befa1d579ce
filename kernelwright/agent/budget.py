"""Acceptance and stopping, computed in code from EvalResults, never taken from the LLM.

A candidate is accepted only if it is correct and the lower bound of its speedup's 95% confidence
interval against the target baseline (torch.compile; eager when compile was not timed) is above
`--target`. A rejected, incorrect or slower candidate can never be accepted, whatever a reviewer says.
"""

from __future__ import annotations

import time

from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.state import AgentState, CandidateRecord
from kernelwright.harness.result import EvalResult
from kernelwright.harness.verdicts import Verdict

TARGET_BASELINES = ("compile", "eager")


def target_baseline(result: EvalResult) -> str | None:
    return next((name for name in TARGET_BASELINES if name in result.speedups), None)


def beats_target(result: EvalResult, target: float) -> bool:
    baseline = target_baseline(result)
    if result.verdict != Verdict.CORRECT or baseline is None:
        return False
    return result.speedups[baseline].ci_low > target


def record(
    result: EvalResult, *, index: int, round_: int, attempt: int, path: str, target: float, parent: int | None = None
) -> CandidateRecord:
    return CandidateRecord(
        index=index,
        round=round_,
        attempt=attempt,
        sha256=result.candidate_sha256,
        path=path,
        verdict=result.verdict.value,
        reason=result.reason.value if result.reason else None,
        message=result.message[:500],
        speedups={
            name: {
                "ratio": s.ratio,
                "ci_low": s.ci_low,
                "ci_high": s.ci_high,
                "candidate_median_ms": s.candidate_median_ms,
                "baseline_median_ms": s.baseline_median_ms,
            }
            for name, s in result.speedups.items()
        },
        target_baseline=target_baseline(result),
        beats_target=beats_target(result, target),
        parent=parent,
    )


def score(candidate: CandidateRecord) -> float:
    if candidate["target_baseline"] is None:
        return 0.0
    return candidate["speedups"][candidate["target_baseline"]]["ci_low"]


def better(candidate: CandidateRecord, best: CandidateRecord | None) -> bool:
    """Is a correct candidate better than the best so far (by its target speedup's CI lower bound)?"""
    if candidate["verdict"] != Verdict.CORRECT.value:
        return False
    return best is None or score(candidate) > score(best)


def stop_reason(state: AgentState, config: AgentConfig, started: float) -> str | None:
    """Why the run must stop now, or None to go on planning."""
    best = state.get("best")
    if best is not None and best["beats_target"]:
        baseline = best["target_baseline"]
        low = best["speedups"][baseline or ""]["ci_low"] if baseline else 0.0
        return f"accepted: candidate {best['index']} beats {baseline} (CI lower bound {low:.2f}x > {config.target:g}x)"
    usage = state.get("usage", {})
    if state.get("round", 0) >= config.max_rounds:
        return f"budget: {config.max_rounds} round(s) done"
    if usage.get("total_tokens", 0) >= config.max_tokens:
        return f"budget: {int(usage['total_tokens'])} tokens used (limit {config.max_tokens})"
    if usage.get("cost_usd", 0) >= config.max_cost_usd:
        return f"budget: ${usage['cost_usd']:.2f} spent (limit ${config.max_cost_usd:.2f})"
    if time.monotonic() - started >= config.max_wall_s:
        return f"budget: wall time {config.max_wall_s:g} s used"
    if config.max_gpu_s is not None and usage.get("gpu_s", 0.0) >= config.max_gpu_s:
        return f"budget: GPU time {usage['gpu_s']:.0f} s used (limit {config.max_gpu_s:g} s)"
    if state.get("rounds_without_improvement", 0) >= config.no_improvement_rounds:
        return f"budget: no improvement for {config.no_improvement_rounds} round(s)"
    return None
