"""The judge's rules are pure: typed worker reports in, a `Decision` out, nothing changed in
place; the phases apply decisions (`phases.context.apply`). A report that does not validate is
read as none (`Outcome.report`)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelwright.harness import judge
from kernelwright.harness.options import TrialPlan
from kernelwright.harness.phases.context import apply
from kernelwright.harness.result import EvalResult, TrialResult
from kernelwright.harness.sandbox.isolation import Isolation
from kernelwright.harness.timing.stats import Speedup
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.jobs import WorkerMessage
from kernelwright.harness.workers.messages import BuildReport, CompareReport, ReferenceTrial, TrialReport
from kernelwright.harness.workers.process import Outcome


@dataclass(frozen=True)
class Ended:
    timed_out: bool = False
    died: Reason | None = None
    detail: str = ""


def _result() -> EvalResult:
    return EvalResult(problem="p", candidate="c.py", verdict=Verdict.CORRECT, message="correct")


def test_a_build_report_decides_without_an_outcome() -> None:
    failed = BuildReport(ok=False, reason=Reason.MALFORMED_CANDIDATE, detail="no ModelNew")
    decision = judge.build_failure(Ended(), failed)
    assert decision is not None and (decision.verdict, decision.reason) == (
        Verdict.BUILD_ERROR,
        Reason.MALFORMED_CANDIDATE,
    )
    assert judge.build_failure(Ended(timed_out=True, detail="slow"), BuildReport()).reason == Reason.BUILD_TIMEOUT  # type: ignore[union-attr]
    rejected = BuildReport(ok=True, rejections=[("global_state", "TF32 on")])
    decision = judge.build_failure(Ended(), rejected)
    assert decision is not None and decision.verdict == Verdict.REJECTED and decision.message == "TF32 on"
    assert judge.build_failure(Ended(), BuildReport(ok=True)) is None


def test_judging_trials_changes_nothing_until_applied() -> None:
    trial = judge.trial_result(
        TrialPlan(index=3, seed=1234, distribution="uniform", variant=1, contiguous=False),
        TrialReport(index=3, status="ok", devices=["cpu"]),
        ReferenceTrial(index=3, status="ok", shapes=["float32[4]"]),
        CompareReport(passed=False, reason=Reason.OUTPUT_MISMATCH, detail="off by one", max_abs_error=1.0),
        "cpu",
    )
    # the trial names the inputs it was drawn with: what reproduces it
    assert (trial.seed, trial.distribution, trial.variant, trial.contiguous) == (1234, "uniform", 1, False)
    result = _result()
    result.trials.append(trial)
    decision = judge.judge_trials(result.trials, [], [])
    assert result.verdict == Verdict.CORRECT and result.max_abs_error is None  # not applied yet
    apply(result, decision)
    assert (result.verdict, result.reason, result.max_abs_error) == (Verdict.INCORRECT, Reason.OUTPUT_MISMATCH, 1.0)
    assert result.message.startswith("trial 3 (float32[4]): off by one; 1 of 1 trials failed")


def test_a_forged_channel_withdraws_the_speedups() -> None:
    result = _result()
    result.speedups["eager"] = Speedup(
        baseline="eager",
        ratio=3.0,
        ci_low=2.9,
        ci_high=3.1,
        significant=True,
        baseline_median_ms=3.0,
        candidate_median_ms=1.0,
    )
    apply(result, judge.forged_channel("message result trial came as number 9 after 4"))
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.HARNESS_TAMPERED) and not result.speedups


def test_sandbox_attempts_flag_in_best_effort_and_reject_in_strict() -> None:
    attempts = [{"kind": "network_access", "target": "1.2.3.4:80"}]
    isolation = Isolation(mode="best-effort", network="namespace")
    flagged = apply(_result(), judge.judge_sandbox(isolation, attempts, "best-effort"))  # type: ignore[arg-type]
    assert flagged.verdict == Verdict.CORRECT and [f.code for f in flagged.flags] == ["network_access"]
    assert flagged.isolation == isolation
    strict = apply(_result(), judge.judge_sandbox(isolation, attempts, "strict"))  # type: ignore[arg-type]
    assert (strict.verdict, strict.reason) == (Verdict.REJECTED, Reason.NETWORK_ACCESS)


def test_a_report_that_does_not_validate_reads_as_none() -> None:
    garbled = Outcome(WorkerMessage(event="result", phase="trial", data={"index": "three"}))
    assert garbled.ok and garbled.report(TrialReport) is None
    fine = Outcome(WorkerMessage(event="result", phase="trial", data={"index": 3, "status": "ok", "extra": 1}))
    assert fine.report(TrialReport) == TrialReport(index=3, status="ok")
    assert Outcome(None, timed_out=True).report(TrialReport) is None
    decision = judge.unreadable_report("trial")
    assert (decision.verdict, decision.reason) == (Verdict.CRASHED, Reason.PROCESS_DIED)


def test_a_timed_trial_result_is_passed_through() -> None:
    report = TrialResult(index=0, seed=0, distribution="", passed=True)
    assert judge.judge_trials([report], [(True, False), (True, False)], []).verdict == Verdict.INCORRECT
    assert judge.judge_trials([report], [(True, True), (True, True)], []).verdict is None
