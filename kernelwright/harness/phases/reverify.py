"""Re-verification: a suspiciously large speedup is checked again in fresh processes (a new
reference worker, a new candidate worker) with new seeds and inputs, and timed again: the
speedup must be reproduced, not only the outputs."""

from __future__ import annotations

from pathlib import Path

from kernelwright.harness.checks.static.analysis import CandidateAnalysis
from kernelwright.harness.judge import ending
from kernelwright.harness.phases import candidate
from kernelwright.harness.phases.context import Context, apply
from kernelwright.harness.phases.reference import make_trials, run_reference
from kernelwright.harness.result import EvalResult, Flag
from kernelwright.harness.verdicts import Reason, Verdict

REVERIFY_SPEED_SHARE = 0.5  # the fresh run's speedup must reach this share of the first one's
RESEED = 977  # added to the session's base seed for the fresh run's trials
# The flags by which a timing says none of its figures is trusted (no speedup reported, no verdict).
UNTRUSTED_FLAGS = frozenset({"device_contended", "baselines_disagree"})


def reverify(ctx: Context, path: Path, source: str, analysis: CandidateAnalysis, result: EvalResult) -> EvalResult:
    """The result after re-verification when its speedup over eager exceeds the threshold (as it
    is otherwise)."""
    eager = result.speedups.get("eager")
    if eager is None or eager.ratio <= ctx.opts.suspicious_speedup or result.verdict != Verdict.CORRECT:
        return result
    why = f"{eager.ratio:.1f}x over eager exceeds the {ctx.opts.suspicious_speedup:g}x threshold"
    ctx.opts.say(f"{path.name}: {why}; re-verifying and re-timing in a fresh process with new seeds")
    fresh = Context(
        ctx.problem,
        ctx.opts,
        ctx.work,
        ctx.work / "reverify-data",
        make_trials(ctx.problem, ctx.opts, ctx.opts.base_seed + RESEED),
    )
    fresh.oracle, fresh.reference = run_reference(fresh)
    workdir = ctx.work / f"reverify-{path.stem}"
    try:
        again, _ = candidate.evaluate_one(
            fresh, path, source, analysis, lambda: (workdir, candidate.start_worker(fresh, workdir))
        )
    finally:
        if fresh.oracle is not None:
            fresh.oracle.close()
    return reverified(result, again, why, ctx.opts.suspicious_speedup)


def reverified(result: EvalResult, again: EvalResult, why: str, suspicious_speedup: float) -> EvalResult:
    """`result` after its re-verification in fresh processes came back as `again` (`why`: the
    speedup that asked for it, as text)."""
    eager = result.speedups["eager"]
    if again.verdict != Verdict.CORRECT:
        result.suspicious = f"{why}; re-verification FAILED: {again.verdict.value} ({again.message})"
        result.trials += again.trials
        return apply(result, ending(Verdict.REJECTED, Reason.UNVERIFIED_SPEEDUP, result.suspicious))
    second = again.speedups.get("eager")
    # The fresh run's own "no figure is trusted" flags stay with the result: a busy machine during
    # the re-verification is the answer for this run too (no speedup is reported, never a rejection).
    untrusted = [flag for flag in again.flags if flag.code in UNTRUSTED_FLAGS]
    result.flags.extend(untrusted)
    if second is None or second.ratio < REVERIFY_SPEED_SHARE * eager.ratio:
        # Not reproduced: the first figures are not reported. The outputs were correct in both
        # processes, so the verdict stands (a loaded machine slows a baseline as readily as a cheat
        # would); what is reported is the fresh process's timing, if it is itself unsuspicious.
        if second is not None:
            fresh_text = f"{second.ratio:.1f}x"
        elif untrusted:
            fresh_text = f"not trusted ({', '.join(sorted({flag.code for flag in untrusted}))}: {untrusted[0].message})"
        else:
            fresh_text = "not timed"
        kept = second is not None and second.ratio <= suspicious_speedup and not untrusted
        result.suspicious = f"{why}; re-timed in a fresh process it was {fresh_text}: not reproduced, so " + (
            "the fresh process's timing is reported" if kept else "no speedup is reported"
        )
        result.speedups = dict(again.speedups) if kept else {}
        result.timings = dict(again.timings) if kept else result.timings
        result.wall_median_ms = dict(again.wall_median_ms) if kept else result.wall_median_ms
        result.flags.append(Flag(code="speedup_not_reproduced", message=result.suspicious))
        return result
    again_text = f", re-timed at {second.ratio:.1f}x" if second is not None else ""
    result.suspicious = f"{why}; re-verified correct in a fresh process with new seeds and inputs{again_text}"
    result.flags.append(Flag(code="suspicious_speedup", message=result.suspicious))
    return result
