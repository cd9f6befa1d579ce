"""The rules up to the candidate's correctness: rejected before it runs, its build, a run that
crashed or hung, its trials compared with the reference, measured calls whose outputs differ,
a forged protocol channel, and what it attempted against the sandbox.

The candidate's outputs are compared with the reference in the reference's own process
(`workers/reference.py`, reading them as data only: `outputs.py`); what comes here is the
comparison's figures and the candidate worker's reports.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernelwright.harness.checks.static.analysis import CandidateAnalysis
from kernelwright.harness.compiler_output import with_first_errors
from kernelwright.harness.judge.decision import Decision, PhaseEnd, ending
from kernelwright.harness.options import TrialPlan
from kernelwright.harness.result import Flag, TrialResult
from kernelwright.harness.sandbox.isolation import Isolation, SandboxMode
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.messages import BuildReport, CompareReport, ReferenceTrial, Rejection, TrialReport


def static_rejection(analysis: CandidateAnalysis) -> tuple[Reason, str] | None:
    if analysis.syntax_error:
        return Reason.MALFORMED_CANDIDATE, f"syntax error: {analysis.syntax_error}"
    if not analysis.has_modelnew:
        return Reason.MALFORMED_CANDIDATE, "the file defines no class ModelNew"
    for finding in analysis.rejections:
        return Reason(finding.code), finding.message
    return None


def static_rejection_verdict(reason: Reason) -> Verdict:
    return Verdict.BUILD_ERROR if reason == Reason.MALFORMED_CANDIDATE else Verdict.REJECTED


def build_failure(end: PhaseEnd, report: BuildReport, build_output: str = "") -> Decision | None:
    """The build phase's verdict, if it ended the evaluation. A compile error's message carries
    the compiler's first error lines from `build_output` (the worker's log)."""
    if end.timed_out:
        return ending(Verdict.TIMEOUT, Reason.BUILD_TIMEOUT, end.detail)
    if end.died is not None:
        return ending(Verdict.CRASHED, end.died, f"while building: {end.detail}")
    if not report.ok:
        detail = report.detail
        if report.reason == Reason.COMPILE_ERROR:
            detail = with_first_errors(detail, f"{detail}\n{build_output}")
        return ending(Verdict.BUILD_ERROR, report.reason, detail)
    for code, message in report.rejections:
        return ending(Verdict.REJECTED, Reason(code), message)
    return None


def run_failure(end: PhaseEnd, timeout_reason: Reason) -> Decision | None:
    if end.timed_out:
        return ending(Verdict.TIMEOUT, timeout_reason, end.detail)
    if end.died is not None:
        return ending(Verdict.CRASHED, end.died, end.detail)
    return None


def unreadable_report(phase: str) -> Decision:
    """A result whose data did not validate: no line the worker wrote (the forged-channel check
    names it), judged as a worker that gave no result."""
    return ending(Verdict.CRASHED, Reason.PROCESS_DIED, f"the worker's {phase} report could not be read")


def raised(fatal: str) -> Decision:
    """The candidate's model could not be made (or profiled at all): its forward raised."""
    return ending(Verdict.INCORRECT, Reason.RAISED, fatal)


def trial_result(
    plan: TrialPlan, report: TrialReport, ref: ReferenceTrial, comparison: CompareReport | None, device: str
) -> TrialResult:
    """One trial's result from its plan (the seed, distribution and shapes its inputs were drawn
    with: what reproduces it), the candidate worker's report and the reference process's
    comparison of its output (None when the report already decides the trial)."""
    trial = TrialResult(
        index=report.index,
        seed=plan.seed,
        distribution=plan.distribution,
        variant=plan.variant,
        contiguous=plan.contiguous,
        shapes=ref.shapes,
        reused_addresses=report.reused,
    )
    if report.status == "raised":
        trial.passed, trial.reason, trial.detail = False, Reason.RAISED, f"forward raised {report.detail}"
    elif report.modified_inputs:
        trial.passed, trial.reason = False, Reason.INPUT_MODIFIED
        trial.detail = f"the candidate modified input(s) {report.modified_inputs}"
    elif report.alias:
        trial.passed, trial.reason = False, Reason.OUTPUT_ALIASES_INPUT
        trial.detail = "an output shares memory with an input"
    elif report.output_reused:
        trial.passed, trial.reason = False, Reason.OUTPUT_REUSED
        trial.detail = "the repeated call returned memory the first call's output still held"
    elif any(not d.startswith(device) for d in report.devices):
        trial.passed, trial.reason = False, Reason.DEVICE_MISMATCH
        trial.detail = f"outputs on {report.devices}, expected {device}"
    elif comparison is not None:
        trial.passed = comparison.passed
        trial.reason = comparison.reason or None
        trial.detail = comparison.detail
        trial.max_abs_error = comparison.max_abs_error
        trial.max_rel_error = comparison.max_rel_error
        trial.mismatch_fraction = comparison.mismatch_fraction
        trial.first_mismatches = [list(i) for i in comparison.first_mismatches]
    return trial


def needs_comparison(report: TrialReport, device: str) -> bool:
    return (
        report.status == "ok"
        and not report.modified_inputs
        and not report.alias
        and not report.output_reused
        and all(d.startswith(device) for d in report.devices)
    )


def judge_trials(
    trials: Sequence[TrialResult], constants: Sequence[tuple[bool, bool]], rejections: Sequence[Rejection]
) -> Decision:
    """The verdict from the trials' results, the worker's rejections and how often the
    candidate's output was constant where the reference's varied. Sets the largest errors."""
    errors = [t.max_abs_error for t in trials if t.max_abs_error is not None]
    rels = [t.max_rel_error for t in trials if t.max_rel_error is not None]
    updates = {"max_abs_error": max(errors) if errors else None, "max_rel_error": max(rels) if rels else None}
    for code, message in rejections:
        return Decision(Verdict.REJECTED, Reason(code), message, updates=updates)
    failures = [t for t in trials if not t.passed]
    if failures:
        first = failures[0]
        message = f"trial {first.index} ({', '.join(first.shapes)}): {first.detail}; {len(failures)} of {len(trials)} trials failed"
        return Decision(Verdict.INCORRECT, first.reason, message, updates=updates)
    if sum(c for c, _ in constants) >= 2 and sum(not r for _, r in constants) >= 2:
        message = (
            "the output is constant while the reference's varies: it passed only because the reference is near zero"
        )
        return Decision(Verdict.INCORRECT, Reason.CONSTANT_OUTPUT, message, updates=updates)
    return Decision(updates=updates)


def judge_measured_outputs(checks: Sequence[CompareReport], reason: Reason, what: str) -> Decision | None:
    """Outputs of calls that were profiled or timed, compared with the reference on the very inputs
    those calls got: any mismatch rejects (the candidate behaves differently when measured).
    None when all of them match."""
    bad = [c for c in checks if not c.passed]
    if not bad:
        return None
    message = f"{len(bad)} of {len(checks)} outputs of {what} did not match the reference: {bad[0].detail}"
    return ending(Verdict.REJECTED, reason, message, clear_speedups=True)


def forged_channel(why: str) -> Decision:
    """The worker's channel carried a line its worker did not send (`WorkerProcess.forged`)."""
    message = (
        f"the worker's protocol channel carried a message the worker did not send ({why}): "
        "candidate code wrote to the harness's channel"
    )
    return ending(Verdict.REJECTED, Reason.HARNESS_TAMPERED, message, clear_speedups=True)


_ATTEMPT_WORDS = {
    Reason.NETWORK_ACCESS: ("tried to reach the network", "network"),
    Reason.WRITE_OUTSIDE_SCRATCH: ("tried to write outside its scratch", "filesystem"),
}


def judge_sandbox(isolation: Isolation | None, attempts: Sequence[dict[str, str]], mode: SandboxMode) -> Decision:
    """The isolation the candidate ran under and what it attempted against it: a flag in
    best-effort mode, a rejection in strict mode. (The phases then redact every known secret
    from the result.)"""
    isolation = isolation or Isolation(mode=mode, notes=["the worker never reported its isolation"])
    flags: list[Flag] = []
    rejected: tuple[Reason, str] | None = None
    for reason, (what, layer) in _ATTEMPT_WORDS.items():
        targets = [a.get("target", "") for a in attempts if a.get("kind") == reason.value]
        if not targets:
            continue
        enforced = getattr(isolation, layer) not in ("none", "unknown")
        how = "blocked by the sandbox" if enforced else f"NOT blocked: no {layer} isolation on this machine"
        message = f"the candidate {what} ({', '.join(targets)[:400]}); {how}"
        flags.append(Flag(code=reason.value, message=message, severity="reject" if mode == "strict" else "flag"))
        rejected = rejected or (reason, message)
    updates = {"isolation": isolation}
    if mode == "strict" and rejected is not None:
        return Decision(Verdict.REJECTED, rejected[0], rejected[1], flags=tuple(flags), updates=updates)
    return Decision(flags=tuple(flags), updates=updates)
