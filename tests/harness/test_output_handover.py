"""How a trial's outputs reach the reference's process (`phases.trials.one_trial`): as CUDA memory
handles while they open, then as files for the rest of the session, the trial run again. Driven
with a stand-in worker and comparer: the real exchange is in tests/harness/test_cuda_ipc_gpu.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
