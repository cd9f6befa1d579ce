"""How a trial's outputs reach the reference's process (`phases.trials.one_trial`): as CUDA memory
handles while they open, then as files for the rest of the session, the trial run again. Driven
with a stand-in worker and comparer: the real exchange is in tests/harness/test_cuda_ipc_gpu.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kernelwright.harness.options import EvalOptions, TrialPlan
from kernelwright.harness.phases.context import Context
from kernelwright.harness.phases.trials import one_trial
from kernelwright.harness.workers.client import CandidateClient
from kernelwright.harness.workers.jobs import WorkerMessage
from kernelwright.harness.workers.messages import CompareReport
from kernelwright.harness.workers.process import Outcome
from kernelwright.problems import resolve_problem


@dataclass
class Worker:
    sent: list[dict[str, Any]] = field(default_factory=list)

    def send(self, line: str) -> None:
        command, _, argument = line.partition(" ")
        assert command == "trial"
        self.sent.append(json.loads(argument))

    def expect(self, phase: str, limit: float) -> Outcome:
        report = {"status": "ok", "devices": ["cuda:0"], "index": 0}
        return Outcome(message=WorkerMessage(event="result", phase=phase, data=report))


def _context(tmp_path: Path, answers: list[dict[str, Any]], device: str = "cuda") -> Context:
    ctx = Context(
        problem=resolve_problem("relu"),
        opts=EvalOptions(device=device),  # type: ignore[arg-type]
        work=tmp_path,
        data_dir=tmp_path,
        trials=[],
    )
    ctx.compare = lambda plan, path, repeat=None: CompareReport.model_validate(answers.pop(0))  # type: ignore[method-assign]
    return ctx


PLAN = TrialPlan(index=0, seed=1, distribution="normal")


def test_handles_that_do_not_open_send_the_trial_again_as_files_for_the_session(tmp_path: Path) -> None:
    answers = [
        {"passed": False, "reason": "output_mismatch", "ipc_unavailable": "CUDA_ERROR_INVALID_VALUE"},
        {"passed": True, "handed_over": 0},
    ]
    ctx, worker = _context(tmp_path, answers), Worker()
    reply, comparison = one_trial(ctx, CandidateClient(worker), PLAN, True, 10.0, tmp_path)
    assert reply.ok and comparison == CompareReport(passed=True, handed_over=0)
    assert [s["ipc"] for s in worker.sent] == [True, False] and all(s["repeat"] for s in worker.sent)
    assert ctx.ipc is False and not ctx.wants_ipc()
    # The next trial goes straight to files; a second refusal is the output's, not retried.
    answers.append({"passed": False, "reason": "output_mismatch", "ipc_unavailable": "again"})
    _, comparison = one_trial(ctx, CandidateClient(worker), PLAN, False, 10.0, tmp_path)
    assert worker.sent[-1]["ipc"] is False and comparison is not None and not comparison.passed
    assert len(worker.sent) == 3


def test_handles_that_opened_keep_being_asked_for(tmp_path: Path) -> None:
    ctx, worker = _context(tmp_path, [{"passed": True, "handed_over": 2}, {"passed": True, "handed_over": 1}]), Worker()
    for _ in range(2):
        one_trial(ctx, CandidateClient(worker), PLAN, False, 10.0, tmp_path)
    assert [s["ipc"] for s in worker.sent] == [True, True]


def test_the_cpu_and_a_switched_off_option_use_files(tmp_path: Path) -> None:
    ctx, worker = _context(tmp_path, [{"passed": True}], device="cpu"), Worker()
    one_trial(ctx, CandidateClient(worker), PLAN, False, 10.0, tmp_path)
    assert worker.sent[-1]["ipc"] is False
    ctx = _context(tmp_path, [])
    ctx.opts = EvalOptions(device="cuda", output_ipc=False)
    assert not ctx.wants_ipc()


def test_the_timed_outputs_are_compared_before_the_worker_gets_another_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Handed over as CUDA memory handles, the timed calls' outputs live in the candidate's worker
    only until its next command; the baselines' cross-check may send one (`timing 0`, the
    candidate timed again on fresh inputs that reuse that memory). Seen on an H200 at relu's
    default size: every sampled output then read as another call's values (75% of them differ:
    ReLU of an unrelated input), a timed_output_mismatch that no kernel caused. So the outputs are
    compared first."""
    from contextlib import nullcontext

    from kernelwright.harness import judge
    from kernelwright.harness.judge import Decision
    from kernelwright.harness.judge import work_share as share_rules
    from kernelwright.harness.phases import timing as timing_phase
    from kernelwright.harness.result import EvalResult
    from kernelwright.harness.timing.stats import Speedup
    from kernelwright.harness.verdicts import Verdict
    from kernelwright.harness.workers.client import Reply
    from kernelwright.harness.workers.jobs import WorkShareRequest
    from kernelwright.harness.workers.messages import OutputFile, TimedRun, TimingReport

    log: list[str] = []
    plan = TrialPlan(index=-1, seed=7, distribution="normal")
    report = TimingReport(
        result=TimedRun(fns={}),
        timed_outputs=[OutputFile(plan=plan, file=str(tmp_path / f"timed_{k}.out")) for k in range(2)],
    )

    class Client:
        def __init__(self, worker: object) -> None:
            pass

        def timing(self, samples: int, limit: float) -> Reply[TimingReport]:
            log.append(f"timing {samples}")
            ended = WorkerMessage(event="result", phase="timing", data={})
            return Reply(Outcome(message=ended), report if samples else None)

    class Ctx:
        def timing_limit_s(self) -> float:
            return 10.0

        def compare(self, plan: TrialPlan, path: Path) -> CompareReport:
            log.append(f"compare {path.name}")
            return CompareReport()

    def cross_check(ctx: object, worker: object, result: EvalResult, report: object) -> None:
        Client(worker).timing(0, 10.0)  # the second look the cross-check takes

    speedup = Speedup(
        baseline="compile",
        ratio=1.2,
        ci_low=1.1,
        ci_high=1.3,
        significant=True,
        baseline_median_ms=1.2,
        candidate_median_ms=1.0,
    )
    monkeypatch.setattr(timing_phase, "CandidateClient", Client)
    monkeypatch.setattr(timing_phase, "cross_check_baselines", cross_check)
    monkeypatch.setattr(timing_phase.live, "quiet", lambda keep: nullcontext(0))
    monkeypatch.setattr(judge, "judge_timing", lambda r: Decision(updates={"speedups": {"compile": speedup}}))
    monkeypatch.setattr(judge, "judge_measured_outputs", lambda checks, reason, what: None)
    monkeypatch.setattr(share_rules, "profile_slower_than_timed", lambda *a: False)
    monkeypatch.setattr(share_rules, "judge_profile_consistency", lambda *a: None)
    result = EvalResult(problem="relu", candidate="c.py", verdict=Verdict.CORRECT, device="cuda")
    timing_phase.run_timing(Ctx(), object(), result, WorkShareRequest(plans=[]), [])  # type: ignore[arg-type]
    assert log == ["timing 4", "compare timed_0.out", "compare timed_1.out", "timing 0"]
    assert result.limits["timed_outputs_checked"] == 2.0
