"""What every phase of one problem's evaluation shares: the problem, the options, the trials, the
reference's worker (its outcome, comparisons, the clean baselines) and the per-call limit; and
how a phase applies the judge's decisions to a result (`apply`).

The reference's worker stays for the session: it holds the expected outputs and compares every
candidate output here, one request at a time (`lock`).
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kernelwright.errors import EnvironmentProblem, ProblemError
from kernelwright.harness.judge import Decision
from kernelwright.harness.options import EvalOptions, TrialPlan
from kernelwright.harness.result import EvalResult
from kernelwright.harness.sandbox.isolation import redact
from kernelwright.harness.verdicts import Reason
from kernelwright.harness.workers import live
from kernelwright.harness.workers.client import ReferenceClient
from kernelwright.harness.workers.jobs import CompareRequest, WorkerJob, worker_env
from kernelwright.harness.workers.messages import CleanFigures, CompareReport, ReferenceReport, ReferenceTrial
from kernelwright.harness.workers.process import Outcome, WorkerProcess
from kernelwright.problems import Problem


@dataclass
class Context:
    problem: Problem
    opts: EvalOptions
    work: Path
    data_dir: Path  # the reference worker's own folder (nothing of the reference is written there)
    trials: list[TrialPlan]
    reference: Outcome | None = None
    pending: Future[tuple[WorkerProcess | None, Outcome]] | None = None  # the reference, running while candidates build
    oracle: WorkerProcess | None = None  # the reference's worker: holds the outputs, compares
    lock: threading.Lock = field(default_factory=threading.Lock)
    clean: dict[str, CleanFigures] | None = None  # the baselines timed in the reference's process
    # the reference's process making the baselines (`prepare`), after the reference (CUDA)
    prepared: Future[None] | None = None
    prepare_failed: str | None = None  # why it could not (its process is then gone: the problem's fault)
    closing: bool = False  # the session is closing: a preparation cut short is no failure
    # CUDA outputs handed over as memory handles (`cuda_ipc`): untried (None), seen working, or
    # not working here (files from then on, for the session).
    ipc: bool | None = None

    def wants_ipc(self) -> bool:
        return self.opts.device == "cuda" and self.opts.output_ipc and self.ipc is not False

    def await_reference(self) -> Outcome:
        """The reference's outcome (waiting for it if it still runs)."""
        if self.reference is None:
            assert self.pending is not None
            self.oracle, self.reference = self.pending.result()
        if not self.reference.ok:
            why = self.reference.detail or "no result"
            if self.reference.died == Reason.OUT_OF_MEMORY:  # the machine's limit, not the file's fault
                raise EnvironmentProblem(
                    f"{self.problem.qualified}: the reference ran out of memory ({why})",
                    hint="`--size small`, or a machine with more memory",
                )
            raise ProblemError(f"{self.problem.path}: the reference itself failed: {why}", hint="see `problems run`")
        return self.reference

    def _reference_report(self) -> ReferenceReport | None:
        if self.reference is None or self.reference.message is None:
            return None
        return self.reference.report(ReferenceReport) or ReferenceReport()

    def reference_trials(self) -> dict[int, ReferenceTrial]:
        report = self._reference_report()
        assert report is not None
        return {t.index: t for t in report.trials}

    def skipped_trials(self) -> list[int]:
        report = self._reference_report()
        return [] if report is None else [t.index for t in report.trials if t.status != "ok"]

    def call_limit_s(self) -> float:
        """How long one call of the candidate may take before it counts as a hang: a multiple of
        the reference's slowest trial, with a floor, never above the run limit (the floor while the
        reference still runs: a candidate that failed to build can end before it)."""
        if self._reference_report() is None:
            return min(self.opts.run_timeout_s, self.opts.call_timeout_floor_s)
        ms = [t.ms for t in self.reference_trials().values() if t.status == "ok"]
        scaled = self.opts.call_timeout_factor * max(ms, default=0.0) / 1e3
        return min(self.opts.run_timeout_s, max(self.opts.call_timeout_floor_s, scaled))

    def timing_limit_s(self) -> float:
        """How long one timing run may take: twice its cap, and ten calls at the per-call limit."""
        return self.opts.timing_plan.time_cap_s * 2 + 10 * self.call_limit_s()

    def clean_baselines(self, spacer_ms: float | None = None) -> dict[str, CleanFigures]:
        """The baselines timed in the reference's process, which never ran candidate code, on a
        quiet machine: alone once per session; with `spacer_ms`, timed now with a busy stand-in of
        that length interleaved where the candidate was (not kept)."""
        if self.clean is not None and spacer_ms is None:
            return self.clean
        if self.prepared is not None:  # made while nothing was timed; if that failed, `baselines` makes them
            with contextlib.suppress(Exception):
                self.prepared.result()
        with self.lock, live.quiet(keep=self.oracle):
            assert self.oracle is not None
            answer = ReferenceClient(self.oracle).baselines(spacer_ms, self.opts.run_timeout_s)
        if not answer.ok or answer.report is None:
            raise ProblemError(
                f"{self.problem.path}: timing the baselines in the reference's process failed: {answer.outcome.detail}"
            )
        times = answer.report.times
        if spacer_ms is None:
            self.clean = times
        return times

    def compare(self, plan: TrialPlan, path: Path, repeat: Path | None = None) -> CompareReport:
        """Compare a candidate's output file with the reference for `plan`, in the reference's
        process; the file (and the repeat's) is deleted afterwards."""
        atol, rtol = self.problem.meta.tolerance()
        request = CompareRequest(plan=plan, path=path, repeat_path=repeat, atol=atol, rtol=rtol)
        try:
            with self.lock:
                assert self.oracle is not None
                answer = ReferenceClient(self.oracle).compare(request, self.opts.run_timeout_s)
        finally:
            for file in (path, repeat):
                if file is not None:
                    file.unlink(missing_ok=True)
        if (not answer.ok or answer.report is None) and self.prepare_failed is not None:
            raise ProblemError(
                f"{self.problem.path}: preparing the baselines (eager, torch.compile) in the reference's process "
                f"failed, which ended it: {self.prepare_failed}",
                hint="`kernelwright problems run` runs the reference alone; `--baselines eager` skips torch.compile",
            )
        if not answer.ok or answer.report is None:
            raise EnvironmentProblem(
                f"{self.problem.qualified}: the reference's worker failed comparing outputs: {answer.outcome.detail}",
                hint="its log is in the evaluation's scratch folder; `--size small` if it ran out of memory",
            )
        if answer.report.handed_over:
            self.ipc = True
        return answer.report

    def env(self) -> dict[str, str]:
        """What the harness adds to a worker's scrubbed environment (`isolation.scrubbed_env`)."""
        return worker_env(self.opts)

    def job(
        self, mode: Literal["reference", "candidate", "build"], out_dir: Path, candidate: Path | None = None
    ) -> WorkerJob:
        """The job of one of this evaluation's workers (the reference's gets the trials)."""
        trials = self.trials if mode == "reference" else None
        return WorkerJob.from_options(self.opts, mode, self.problem.path, out_dir, candidate=candidate, trials=trials)


def apply(result: EvalResult, decision: Decision | None) -> EvalResult:
    """The result with the judge's decision applied (None: nothing decided)."""
    if decision is None:
        return result
    for name, value in decision.updates.items():
        setattr(result, name, value)
    if decision.clear_speedups:
        result.speedups.clear()
    result.flags.extend(decision.flags)
    if decision.verdict is not None:
        result.verdict, result.reason = decision.verdict, decision.reason
    if decision.message is not None:
        result.message = decision.message
    result.message += decision.note
    return result


def redacted(result: EvalResult) -> EvalResult:
    """Every known secret taken out of the result (the last step of every candidate's result)."""
    clean = EvalResult.model_validate_json(redact(result.model_dump_json()))
    for name in EvalResult.model_fields:
        setattr(result, name, getattr(clean, name))
    return result
