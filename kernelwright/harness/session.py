"""The evaluation harness: one problem, one or more candidate files, one verdict each.

reference worker ──inputs + reference outputs──► (files) ◄── candidate worker (build → correctness → timing)
                                                   │
                                        compared here, in the harness process
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kernelwright.errors import EnvironmentProblem, ProblemError
from kernelwright.harness import capacity, judge
from kernelwright.harness.building.prebuild import Prebuilder, worker_env
from kernelwright.harness.building.symbols import own_kernels
from kernelwright.harness.checks.static.analysis import CandidateAnalysis, analyze_candidate
from kernelwright.harness.environment import hardware_summary, library_versions
from kernelwright.harness.options import EvalOptions, TrialPlan, plan_trials
from kernelwright.harness.result import EvalResult, Flag
from kernelwright.harness.sandbox import scratch
from kernelwright.harness.sandbox.isolation import write_redacted_copy
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers import live
from kernelwright.harness.workers.jobs import CandidateAssignment, TrialRequest, WorkerJob, WorkShareRequest
from kernelwright.harness.workers.process import Outcome, WorkerProcess, refuse_unless_isolated
from kernelwright.harness.workers.reference import CompareRequest
from kernelwright.problems import Problem
from kernelwright.problems.candidate.cache import BuildCache
from kernelwright.problems.footprint import measure

log = logging.getLogger(__name__)

TIMED_SAMPLES = 4  # outputs of timed calls (a uniform sample) checked against the reference


@dataclass
class _Context:
    problem: Problem
    opts: EvalOptions
    work: Path
    data_dir: Path  # the reference worker's own folder (nothing of the reference is written there)
    trials: list[TrialPlan]
    reference: Outcome | None = None
    pending: Future[tuple[WorkerProcess | None, Outcome]] | None = None  # the reference, running while candidates build
    oracle: WorkerProcess | None = None  # the reference's worker: holds the outputs, compares
    lock: threading.Lock = field(default_factory=threading.Lock)
    clean: dict[str, dict[str, float]] | None = None  # the baselines timed in the reference's process
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

    def reference_trials(self) -> dict[int, dict[str, Any]]:
        assert self.reference is not None and self.reference.message is not None
        return {t["index"]: t for t in self.reference.message.data.get("trials", [])}

    def skipped_trials(self) -> list[int]:
        if self.reference is None or self.reference.message is None:
            return []
        return [t["index"] for t in self.reference.message.data.get("trials", []) if t.get("status") != "ok"]

    def call_limit_s(self) -> float:
        """How long one call of the candidate may take before it counts as a hang: a multiple of
        the reference's slowest trial, with a floor, never above the run limit (the floor while the
        reference still runs: a candidate that failed to build can end before it)."""
        if self.reference is None or self.reference.message is None:
            return min(self.opts.run_timeout_s, self.opts.call_timeout_floor_s)
        ms = [float(t.get("ms", 0.0)) for t in self.reference_trials().values() if t.get("status") == "ok"]
        scaled = self.opts.call_timeout_factor * max(ms, default=0.0) / 1e3
        return min(self.opts.run_timeout_s, max(self.opts.call_timeout_floor_s, scaled))

    def clean_baselines(self, spacer_ms: float | None = None) -> dict[str, dict[str, float]]:
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
            self.oracle.send(f"baselines {spacer_ms or 0.0}")
            answer = self.oracle.expect("baselines", self.opts.run_timeout_s)
        if not answer.ok or answer.message is None:
            raise ProblemError(
                f"{self.problem.path}: timing the baselines in the reference's process failed: {answer.detail}"
            )
        times: dict[str, dict[str, float]] = answer.message.data.get("times", {})
        if spacer_ms is None:
            self.clean = times
        return times

    def compare(self, plan: TrialPlan, path: Path, repeat: Path | None = None) -> dict[str, Any]:
        """Compare a candidate's output file with the reference for `plan`, in the reference's
        process; the file (and the repeat's) is deleted afterwards."""
        atol, rtol = self.problem.meta.tolerance()
        request = CompareRequest(plan=plan, path=path, repeat_path=repeat, atol=atol, rtol=rtol)
        try:
            with self.lock:
                assert self.oracle is not None
                self.oracle.send(f"compare {request.model_dump_json()}")
                answer = self.oracle.expect("compare", self.opts.run_timeout_s)
        finally:
            for file in (path, repeat):
                if file is not None:
                    file.unlink(missing_ok=True)
        if (not answer.ok or answer.message is None) and self.prepare_failed is not None:
            raise ProblemError(
                f"{self.problem.path}: preparing the baselines (eager, torch.compile) in the reference's process "
                f"failed, which ended it: {self.prepare_failed}",
                hint="`kernelwright problems run` runs the reference alone; `--baselines eager` skips torch.compile",
            )
        if not answer.ok or answer.message is None:
            raise EnvironmentProblem(
                f"{self.problem.qualified}: the reference's worker failed comparing outputs: {answer.detail}",
                hint="its log is in the evaluation's scratch folder; `--size small` if it ran out of memory",
            )
        if answer.message.data.get("handed_over"):
            self.ipc = True
        return answer.message.data

    def env(self) -> dict[str, str]:
        """What the harness adds to a worker's scrubbed environment (`isolation.scrubbed_env`)."""
        return worker_env(self.opts)


def _job(
    ctx: _Context,
    mode: Literal["reference", "candidate", "build"],
    candidate: Path | None,
    out_dir: Path,
    analysis: CandidateAnalysis | None = None,
) -> WorkerJob:
    return WorkerJob(
        mode=mode,
        problem_path=ctx.problem.path,
        candidate_path=candidate,
        size=ctx.opts.size,
        device=ctx.opts.device,
        weight_seed=ctx.opts.weight_seed,
        trials=ctx.trials if mode == "reference" else [],
        out_dir=out_dir,
        build_cache=ctx.opts.build_cache,
        num_threads=ctx.opts.num_threads,
        timing=ctx.opts.timing_plan if ctx.opts.timing else None,
        baselines=list(ctx.opts.baselines),
    )


def _make_trials(problem: Problem, opts: EvalOptions, base_seed: int) -> list[TrialPlan]:
    return plan_trials(opts.trials, len(measure(problem, opts.size).variants), base_seed)


def _run_reference(ctx: _Context) -> tuple[WorkerProcess | None, Outcome]:
    """Start the reference's worker and wait for its trials; it then stays, to compare outputs."""
    ctx.data_dir.mkdir(parents=True, exist_ok=True)
    job = _job(ctx, "reference", None, ctx.data_dir)
    worker = WorkerProcess(job, ctx.data_dir / "reference_job.json", ctx.data_dir / "reference.log", ctx.env())
    outcome = worker.expect("reference", ctx.opts.run_timeout_s)
    if not outcome.ok:
        worker.close()
        return None, outcome
    return worker, outcome


def _prepares_ahead(opts: EvalOptions) -> bool:
    """Whether the reference's process makes the clean baselines right after the reference and
    keeps them: on CUDA, where their input sets live on the device; on the CPU they would hold the
    host memory the comparisons need, so there each timing of them makes its own."""
    return opts.timing and bool(opts.baselines) and opts.device == "cuda"


def _prepare_baselines(ctx: _Context) -> None:
    """Have the reference's process make the baselines it will time (compile included) now, while
    candidates are built and checked (or, in a session opened ahead, while the previous problem is
    judged): only the timing is left for `clean_baselines`, under `live.quiet`. Every quiet phase
    pauses this process like any other worker. Runs on the session's thread after the reference."""
    assert ctx.pending is not None
    oracle, outcome = ctx.pending.result()
    if oracle is None or not outcome.ok:
        return
    with ctx.lock:
        oracle.send("prepare")
        answer = oracle.expect("prepare", ctx.opts.run_timeout_s)
        if not answer.ok:
            ctx.prepare_failed = answer.detail or "no answer"
    if not answer.ok and not ctx.closing:
        log.warning(
            "%s: preparing the baselines in the reference's process failed: %s", ctx.problem.qualified, answer.detail
        )


def _base_result(ctx: _Context, path: Path, source: str, analysis: CandidateAnalysis | None) -> EvalResult:
    atol, rtol = ctx.problem.meta.tolerance()
    return EvalResult(
        problem=ctx.problem.qualified,
        problem_sha256=ctx.problem.sha256,
        candidate=str(path),
        candidate_sha256=hashlib.sha256(source.encode()).hexdigest(),
        verdict=Verdict.CORRECT,
        backend=analysis.backend if analysis else "unknown",
        device=ctx.opts.device,
        size=ctx.opts.size,
        tolerance={"atol": atol, "rtol": rtol},
        hardware=hardware_summary(ctx.opts.device),
        versions=library_versions(),
        flags=[
            Flag(code=f.code, message=f.message, severity=f.severity, line=f.line)
            for f in (analysis.findings if analysis else ())
        ],
    )


def _finish(result: EvalResult, verdict: Verdict, reason: Reason | None, message: str) -> EvalResult:
    result.verdict, result.reason, result.message = verdict, reason, message
    return result


def _start_worker(ctx: _Context, workdir: Path) -> WorkerProcess:
    """A candidate worker started without its candidate: it sets up the harness and the baselines,
    then waits for `candidate JSON` on stdin (see `CandidateAssignment`)."""
    workdir.mkdir(parents=True, exist_ok=True)
    job = _job(ctx, "candidate", None, workdir)
    return WorkerProcess(job, workdir / "job.json", workdir / "worker.log", ctx.env())


Acquire = Callable[[], tuple[Path, WorkerProcess]]


def _evaluate_one(
    ctx: _Context, path: Path, source: str, analysis: CandidateAnalysis, acquire: Acquire
) -> tuple[EvalResult, Path | None]:
    """One candidate's verdict, and the worker folder it used (None when no worker ran)."""
    result = _base_result(ctx, path, source, analysis)
    reject = judge.static_rejection(analysis)
    if reject is not None:
        return _finish(result, judge.static_rejection_verdict(reject[0]), reject[0], reject[1]), None
    workdir, started = acquire()
    assignment = CandidateAssignment(candidate_path=path)
    with started as worker:
        worker.send(f"candidate {assignment.model_dump_json()}")
        result = _run_candidate(ctx, worker, path, result, workdir, analysis)
        worker.close_channel(ctx.call_limit_s())
        if worker.forged:
            result.speedups.clear()
            _finish(
                result,
                Verdict.REJECTED,
                Reason.HARNESS_TAMPERED,
                f"the worker's protocol channel carried a message the worker did not send ({worker.forged}): "
                "candidate code wrote to the harness's channel",
            )
        judge.judge_sandbox(result, worker.isolation, worker.attempts, ctx.opts.sandbox)
        return result, workdir


def _run_candidate(
    ctx: _Context, worker: WorkerProcess, path: Path, result: EvalResult, workdir: Path, analysis: CandidateAnalysis
) -> EvalResult:
    build = worker.expect("build", ctx.opts.build_timeout_s)
    result.phase_seconds["build"] = build.seconds
    data = build.message.data if build.message is not None else {}
    # Failing before the candidate was loaded is the baselines' failure, not the candidate's.
    before_candidate = build.message is None and "build" not in worker.phases_seen
    if before_candidate or data.get("prepare_error"):
        why = (str(data.get("prepare_error") or build.detail).strip() or "no result").splitlines()[-1]
        if build.died == Reason.OUT_OF_MEMORY:
            raise EnvironmentProblem(
                f"{ctx.problem.qualified}: the candidate's worker ran out of memory preparing the baselines ({why})",
                hint="`--size small`, or a machine with more memory",
            )
        raise ProblemError(
            f"{ctx.problem.path}: preparing the baselines ({', '.join(ctx.opts.baselines)}) failed before "
            f"the candidate was loaded: {why}",
            hint="`kernelwright problems run` runs the reference alone; `--baselines eager` skips torch.compile",
        )
    loaded = data.get("seconds")
    if isinstance(loaded, (int, float)):  # the worker's own clock: importing the candidate (its build)
        result.phase_seconds["load"] = float(loaded)
        # Until the candidate's import began: interpreter, torch, harness set-up and baselines
        # (close to zero for a worker started ahead by an EvalSession).
        result.phase_seconds["worker_start"] = max(0.0, build.seconds - float(loaded))
    if isinstance(data.get("prepare_s"), (int, float)) and data["prepare_s"] > 0:
        result.phase_seconds["baselines_prepare"] = float(data["prepare_s"])
    result.stderr_tail = worker.stderr_tail(3000)
    early = judge.build_failure(build, worker.stderr_tail(400_000))
    if early is not None:
        return _finish(result, *early)
    assert build.message is not None
    builds = build.message.data.get("builds", [])
    result.build_cached = all(b.get("cached") for b in builds) if builds else None
    ctx.opts.say(f"{path.name}: built in {build.seconds:.1f} s")
    ctx.await_reference()
    ended = _run_trials(ctx, worker, path, result, workdir, analysis)
    if ended is not None:
        return ended
    request = _ownership(ctx, result, builds, analysis)
    shares = _run_work_share(ctx, worker, result, request, analysis)
    if result.verdict != Verdict.CORRECT or not ctx.opts.timing:
        return result
    ctx.opts.say(f"{path.name}: correct; timing against {', '.join(ctx.opts.baselines)}")
    limit = ctx.opts.timing_plan.time_cap_s * 2 + 10 * ctx.call_limit_s()
    with live.quiet(keep=worker) as paused:  # builds and the spare worker wait: quiet cores, quiet device
        worker.send(f"timing {TIMED_SAMPLES}")
        timed = worker.expect("timing", limit)
    result.limits["workers_paused_while_timing"] = float(paused)
    result.phase_seconds["timing"] = timed.seconds
    early = judge.run_failure(timed, Reason.TIMING_TIMEOUT)
    if early is not None:
        return _finish(result, *early)
    assert timed.message is not None
    judge.judge_timing(result, timed.message.data, ctx.opts.device)
    if result.verdict == Verdict.CORRECT and result.speedups:
        _cross_check_baselines(ctx, worker, result)
    checks = [
        ctx.compare(TrialPlan.model_validate(item["plan"]), Path(item["file"]))
        for item in timed.message.data.get("timed_outputs", [])
    ]
    result.limits["timed_outputs_checked"] = float(len(checks))
    if result.verdict == Verdict.CORRECT and judge.judge_measured_outputs(
        result, checks, Reason.TIMED_OUTPUT_MISMATCH, "the timed calls (fresh inputs)"
    ):
        if judge.profile_slower_than_timed(result, shares):
            shares = _profile_again(ctx, worker, result, request, shares)
        if result.verdict == Verdict.CORRECT:
            judge.judge_profile_consistency(result, shares, timed.message.data)
    return result


def _profile_again(
    ctx: _Context, worker: WorkerProcess, result: EvalResult, request: WorkShareRequest, shares: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The default shapes profiled once more, the profile being slower than the timing (a busy
    machine slows a profile; a candidate that works less when not watched is slower when profiled
    every time): its outputs are checked like the first profile's, and the faster of the two
    profiles is the one judged. The shares to judge (the first ones if the second profile failed)."""
    outcome = _profile(ctx, worker, request.model_copy(update={"plans": request.plans[:1]}), 4 * ctx.opts.run_timeout_s)
    data = outcome.message.data if outcome.ok and outcome.message is not None else {}
    second = data.get("shares", []) if not data.get("fatal") else []
    if not second or "error" in second[0]:
        return shares
    if not _profiled_outputs_agree(ctx, result, second, "the profiled calls (again)"):
        return shares
    first_ms, second_ms = judge.profiled_ms(shares[0]), judge.profiled_ms(second[0])
    result.flags.append(
        Flag(
            code="profiled_again",
            message=f"profiled at {first_ms:.4f} ms per call, over twice the timed median: profiled again, "
            f"{second_ms:.4f} ms per call",
        )
    )
    return [second[0], *shares[1:]] if second_ms < first_ms else shares


def _cross_check_baselines(ctx: _Context, worker: WorkerProcess, result: EvalResult) -> None:
    """The baselines as timed in the candidate's process against the same baselines timed in the
    reference's, which never ran candidate code. Slower beside the candidate: the clean ones are
    timed again with a stand-in for the candidate interleaved (what runs between a baseline's calls
    changes its time), and the candidate's side once more; slower beside it every time, the
    candidate slowed them (rejected); otherwise no speedup of this run is reported."""
    started = time.perf_counter()
    clean = ctx.clean_baselines()
    result.phase_seconds["clean_baselines"] = time.perf_counter() - started
    result.clean_baseline_ms = {name: figures["median_ms"] for name, figures in clean.items()}
    if not judge.disagreeing_baselines(result.timings, clean):
        return
    spacer = result.timings["candidate"].median_ms
    like = ctx.clean_baselines(spacer_ms=spacer)
    slowed = judge.disagreeing_baselines(result.timings, like)
    if not slowed:  # timed again, the clean process agrees: its first figures were the odd ones
        return
    still = [name for name in judge.baselines_slowed(result, like) if name in slowed]
    if still:
        with live.quiet(keep=worker):
            worker.send("timing 0")
            again = worker.expect("timing", ctx.opts.timing_plan.time_cap_s * 2 + 10 * ctx.call_limit_s())
        if again.ok and again.message is not None and "result" in again.message.data:
            like = ctx.clean_baselines(spacer_ms=spacer)
            retimed = judge.slowed_baselines(judge.timed_stats(again.message.data), like)
            still = [name for name in still if name in retimed and name in judge.baselines_slowed(result, like)]
        else:
            still = []
    judge.judge_baselines(result, like, slowed, still)


def _one_trial(
    ctx: _Context, worker: WorkerProcess, plan: TrialPlan, repeat: bool, limit: float, workdir: Path
) -> tuple[Outcome, dict[str, Any] | None]:
    """Run one trial and compare its output (None when there is nothing to compare): once more
    with files where the CUDA memory handles it was handed over with did not open."""
    for attempt in range(2):
        ipc = ctx.wants_ipc()
        worker.send(f"trial {TrialRequest(plan=plan, repeat=repeat, ipc=ipc).model_dump_json()}")
        outcome = worker.expect("trial", limit)
        report = outcome.message.data if outcome.ok and outcome.message is not None else None
        if report is None or report.get("fatal") or not judge.needs_comparison(report, ctx.opts.device):
            return outcome, None
        comparison = ctx.compare(
            plan,
            workdir / f"candidate_{plan.index}.out",
            workdir / f"candidate_{plan.index}_repeat.out" if repeat else None,
        )
        if not (comparison.get("ipc_unavailable") and ipc and attempt == 0):
            return outcome, comparison
        ctx.ipc = False  # not here (or a forged handle): files from now on, this trial again
        log.info("CUDA memory handles did not open (%s): outputs go through files", comparison["ipc_unavailable"])
    raise AssertionError("unreachable")


def _run_trials(
    ctx: _Context, worker: WorkerProcess, path: Path, result: EvalResult, workdir: Path, analysis: CandidateAnalysis
) -> EvalResult | None:
    """The correctness trials, one command each: the candidate learns a trial's seed only when it
    runs, every call has a time limit scaled to the reference's, and each output is compared in
    the reference's process and then deleted. The result when the evaluation ends here."""
    skipped = set(ctx.skipped_trials())
    plans = [plan for plan in ctx.trials if plan.index not in skipped]
    refs = ctx.reference_trials()
    call_limit = ctx.call_limit_s()
    result.limits["call_s"] = call_limit
    ctx.opts.say(f"{path.name}: checking correctness on {len(plans)} trials ({call_limit:.0f} s per call at most)")
    constants: list[tuple[bool, bool]] = []
    rejections: list[tuple[str, str]] = []
    handed_over = 0
    start = time.monotonic()
    for k, plan in enumerate(plans):
        repeat = k == 0  # the first trial runs twice: a race shows as two different outputs
        # Triton compiles (and autotunes) at the first call: that call keeps the build's limit.
        jit = k == 0 and analysis.backend == "triton"
        limit = call_limit * (2 if repeat else 1) + (ctx.opts.build_timeout_s if jit else 0.0)
        outcome, comparison = _one_trial(ctx, worker, plan, repeat, limit, workdir)
        early = judge.run_failure(outcome, Reason.CORRECTNESS_TIMEOUT)
        if early is not None:
            result.phase_seconds["correctness"] = time.monotonic() - start
            result.stderr_tail = worker.stderr_tail(3000)
            verdict, reason, detail = early
            if outcome.timed_out:
                detail = f"trial {plan.index}: no answer within {limit:.0f} s (the per-call limit: {call_limit:.0f} s)"
            return _finish(result, verdict, reason, detail)
        assert outcome.message is not None
        report = outcome.message.data
        rejections = report.get("rejections", rejections)
        if report.get("fatal"):
            return _finish(result, Verdict.INCORRECT, Reason.RAISED, str(report["fatal"]))
        if comparison is not None:
            handed_over += int(comparison.get("handed_over", 0))
            constants.append((bool(comparison.get("constant_candidate")), bool(comparison.get("constant_reference"))))
        result.trials.append(judge.trial_result(report, refs[plan.index], comparison, ctx.opts.device))
    result.phase_seconds["correctness"] = time.monotonic() - start
    result.stderr_tail = worker.stderr_tail(3000)
    if constants:
        result.outputs_handed_over = "cuda-ipc" if handed_over else "files"
    judge.judge_trials(result, constants, rejections)
    if result.reason == Reason.OUTPUT_MISMATCH and analysis.half_kernels:
        result.message += f"; note: {', '.join(analysis.half_kernels)} compute in half precision in a float32 problem"
    return result if result.verdict != Verdict.CORRECT else None


def _ownership(
    ctx: _Context, result: EvalResult, builds: list[dict[str, Any]], analysis: CandidateAnalysis
) -> WorkShareRequest:
    """Which kernels are the candidate's: its CUDA kernels read from the libraries it built (read
    here, not in the worker the candidate runs in), its Triton kernels by name. When a library
    cannot be read, the source's kernel names stand in, and the result says so."""
    libraries = [Path(b["library"]) for b in builds if b.get("library")]
    found = own_kernels(libraries, ctx.opts.build_cache) if ctx.opts.device == "cuda" else None
    request = WorkShareRequest(plans=[], own_names=list(analysis.triton_kernels))
    if found is not None and found.read:
        request.own_exact = list(found.names)
    else:
        request.own_names += list(analysis.cuda_kernels)
        if found is not None:
            result.flags.append(Flag(code="own_kernels_from_source", message=found.note))
    if found is not None and found.excluded:
        names = ", ".join(found.excluded[:3])
        result.flags.append(
            Flag(
                code="kernel_in_torch_namespace", message=f"kernels in PyTorch's namespaces never count as own: {names}"
            )
        )
    return request


def _run_work_share(
    ctx: _Context, worker: WorkerProcess, result: EvalResult, request: WorkShareRequest, analysis: CandidateAnalysis
) -> list[dict[str, Any]]:
    """Profile on the default shapes and on one trial of every shape variant; the outputs of the
    profiled calls are checked like any other."""
    firsts: dict[int | None, TrialPlan] = {}
    for plan in ctx.trials:
        if plan.contiguous and plan.index not in ctx.skipped_trials():
            firsts.setdefault(plan.variant, plan)
    plans = list(firsts.values())
    request.plans = plans
    limit = max(ctx.opts.run_timeout_s, 40 * len(plans) * ctx.call_limit_s())
    outcome = _profile(ctx, worker, request, min(limit, 4 * ctx.opts.run_timeout_s))
    result.phase_seconds["work_share"] = outcome.seconds
    early = judge.run_failure(outcome, Reason.CORRECTNESS_TIMEOUT)
    if early is not None:
        _finish(result, *early)
        return []
    assert outcome.message is not None
    data = outcome.message.data
    if data.get("fatal"):
        _finish(result, Verdict.INCORRECT, Reason.RAISED, str(data["fatal"]))
        return []
    judge.judge_trials(result, [], data.get("rejections", []))
    if result.verdict != Verdict.CORRECT:
        return []
    shares = data.get("shares", [])
    if _profiled_outputs_agree(ctx, result, shares, "the profiled calls"):
        judge.judge_work_share(result, shares, analysis, ctx.opts.policy)
    return shares


def _profile(ctx: _Context, worker: WorkerProcess, request: WorkShareRequest, timeout_s: float) -> Outcome:
    """The candidate's worker profiles `request`'s plans; a profile is a measurement too: the
    next worker and builds wait (`live.quiet`)."""
    with live.quiet(keep=worker):
        worker.send(f"workshare {request.model_dump_json()}")
        return worker.expect("workshare", timeout_s)


def _profiled_outputs_agree(ctx: _Context, result: EvalResult, shares: list[dict[str, Any]], what: str) -> bool:
    """The profiled calls' outputs compared with the reference (a mismatch is the verdict)."""
    checks = [ctx.compare(TrialPlan.model_validate(s["plan"]), Path(s["file"])) for s in shares if "file" in s]
    return judge.judge_measured_outputs(result, checks, Reason.PROFILED_OUTPUT_MISMATCH, what)


REVERIFY_SPEED_SHARE = 0.5  # the fresh run's speedup must reach this share of the first one's


def _reverify(ctx: _Context, path: Path, source: str, analysis: CandidateAnalysis, result: EvalResult) -> EvalResult:
    """A suspiciously large speedup: correctness again in fresh processes with new seeds and
    inputs, and timing again: the speedup must be reproduced, not only the outputs."""
    eager = result.speedups.get("eager")
    if eager is None or eager.ratio <= ctx.opts.suspicious_speedup or result.verdict != Verdict.CORRECT:
        return result
    why = f"{eager.ratio:.1f}x over eager exceeds the {ctx.opts.suspicious_speedup:g}x threshold"
    ctx.opts.say(f"{path.name}: {why}; re-verifying and re-timing in a fresh process with new seeds")
    fresh = _Context(
        ctx.problem,
        ctx.opts,
        ctx.work,
        ctx.work / "reverify-data",
        _make_trials(ctx.problem, ctx.opts, ctx.opts.base_seed + 977),
    )
    fresh.oracle, fresh.reference = _run_reference(fresh)
    workdir = ctx.work / f"reverify-{path.stem}"
    try:
        again, _ = _evaluate_one(fresh, path, source, analysis, lambda: (workdir, _start_worker(fresh, workdir)))
    finally:
        if fresh.oracle is not None:
            fresh.oracle.close()
    if again.verdict != Verdict.CORRECT:
        result.suspicious = f"{why}; re-verification FAILED: {again.verdict.value} ({again.message})"
        result.trials += again.trials
        return _finish(result, Verdict.REJECTED, Reason.UNVERIFIED_SPEEDUP, result.suspicious)
    second = again.speedups.get("eager")
    if second is None or second.ratio < REVERIFY_SPEED_SHARE * eager.ratio:
        # Not reproduced: the first figures are not reported. The outputs were correct in both
        # processes, so the verdict stands (a loaded machine slows a baseline as readily as a cheat
        # would); what is reported is the fresh process's timing, if it is itself unsuspicious.
        fresh_text = f"{second.ratio:.1f}x" if second is not None else "not timed"
        kept = second is not None and second.ratio <= ctx.opts.suspicious_speedup
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


def _build_all(ctx: _Context, items: list[tuple[Path, CandidateAnalysis]]) -> None:
    """Warm the build cache for every candidate in parallel (one process each, all cores)."""
    jobs = ctx.opts.build_jobs or os.cpu_count() or 1

    def build(item: tuple[Path, CandidateAnalysis]) -> None:
        path, analysis = item
        folder = ctx.work / f"build-{path.stem}-{hashlib.sha1(str(path).encode()).hexdigest()[:6]}"
        folder.mkdir(parents=True, exist_ok=True)
        with WorkerProcess(
            _job(ctx, "build", path, folder, analysis), folder / "job.json", folder / "build.log", ctx.env()
        ) as worker:
            worker.expect("build", ctx.opts.build_timeout_s)

    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(items)))) as pool:
        list(pool.map(build, items))


def _write_evidence(out_dir: Path, path: Path, source: str, result: EvalResult, workdir: Path | None) -> None:
    folder = out_dir / path.stem
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "candidate.py").write_text(source)
    (folder / "result.json").write_text(result.to_json())
    if workdir is not None:  # never through a link the candidate left there, and without secrets
        write_redacted_copy(workdir / "worker.log", folder / "build-and-run.log")


class EvalSession:
    """Evaluations of candidates for one problem, call after call (the agent's loop, or one CLI run).

    The reference runs once per session, in its own worker, and its outputs are held in this
    process (never on disk where a candidate could find them). Every candidate gets a fresh worker
    of its own. With `warm=True`, after each `evaluate` call the next candidate's worker is started
    ahead: interpreter, torch, the harness's set-up and the baselines (eager, torch.compile, run
    once) are ready before that candidate exists, so its evaluation starts at its import. It is
    started only after timing has finished, so it never runs beside a measurement.
    """

    def __init__(
        self,
        problem: Problem,
        opts: EvalOptions,
        *,
        warm: bool = False,
        prebuilder: Prebuilder | None = None,
        spares: int = 1,
    ) -> None:
        self.problem, self.opts, self.warm = problem, opts, warm
        # Builds ahead (a batch): candidates it built already are not built again, ones it is
        # building are waited for (`Prebuilder.build_now`).
        self.prebuilder = prebuilder
        refuse_unless_isolated(opts.sandbox, cuda=opts.device == "cuda")
        scratch_root = capacity.scratch_root()
        footprint = measure(problem, opts.size)  # shapes only: nothing is allocated here
        self.memory = capacity.check_memory(problem, footprint, opts, scratch_in_ram=scratch_root is not None)
        scratch.sweep()  # what runs killed before their cleanup left behind
        self._tmp = tempfile.TemporaryDirectory(prefix=scratch.PREFIX, dir=scratch_root)
        work = Path(self._tmp.name)
        scratch.claim(work)
        trials = plan_trials(opts.trials, len(footprint.variants), opts.base_seed)
        self.ctx = _Context(problem, opts, work, work / "data", trials)
        self._pool = ThreadPoolExecutor(max_workers=1)
        self._count = 0
        self._spares: list[tuple[Path, WorkerProcess]] = []  # started ahead, oldest first
        self._spare_ready = False
        # With several candidates in one call, the next ones' workers start while this one is
        # built and checked (live.quiet stops them while this one times): up to `spares` at once
        # (a batch that knows how many candidates come), as many as memory allows beside this one.
        self.room = capacity.room_for_workers(self.memory, max(1, spares))
        self.prefetch = self.room > 0
        # Candidates a caller will pass to later `evaluate` calls (a batch judging a problem in
        # groups): spares are kept topped up for them too, not only for the current call's.
        self.coming = 0
        opts.say(
            f"{problem.qualified}: drawing {len(self.ctx.trials)} trials and running the reference on {opts.device}"
        )
        self.ctx.pending = self._pool.submit(_run_reference, self.ctx)
        if _prepares_ahead(opts):  # the same thread: after the reference
            self.ctx.prepared = self._pool.submit(_prepare_baselines, self.ctx)
        if warm:
            for _ in range(max(1, min(spares, self.room))):
                self._start_spare()

    def _workdir(self) -> Path:
        self._count += 1
        return self.ctx.work / f"candidate-{self._count}"

    def _start_spare(self) -> None:
        workdir = self._workdir()
        self._spares.append((workdir, _start_worker(self.ctx, workdir)))
        if len(self._spares) == 1:
            self._spare_ready = False

    def _acquire(self) -> tuple[Path, WorkerProcess]:
        if self._spares:
            spare = self._spares.pop(0)
            self._spare_ready = False
            return spare
        workdir = self._workdir()
        return workdir, _start_worker(self.ctx, workdir)

    def wait_ready(self, timeout_s: float = 600.0) -> bool:
        """Block until the worker started ahead has its baselines ready (False without one, or if it died)."""
        if not self._spares:
            return False
        if not self._spare_ready:  # the worker says "ready" once
            self._spare_ready = self._spares[0][1].expect("ready", timeout_s).ok
        return self._spare_ready

    def evaluate(self, candidates: list[Path]) -> list[EvalResult]:
        """Evaluate each candidate against the problem; one EvalResult per candidate, in order."""
        ctx, opts = self.ctx, self.opts
        sources = [p.read_text() for p in candidates]
        analyses = [analyze_candidate(s, problem_dtype=self.problem.meta.dtype) for s in sources]
        runnable = [(p, a) for p, a in zip(candidates, analyses, strict=True) if judge.static_rejection(a) is None]
        if self.prebuilder is not None and runnable:
            self.prebuilder.build_now(self.problem, [p for p, _ in runnable], jobs=opts.build_jobs or 0)
        elif len(runnable) > 1:
            opts.say(f"building {len(runnable)} candidates in parallel")
            _build_all(ctx, runnable)
        results = []
        needing = sum(judge.static_rejection(a) is None for a in analyses)
        for path, source, analysis in zip(candidates, sources, analyses, strict=True):
            start = time.perf_counter()
            opts.say(f"{path.name}: building and loading ({analysis.backend})")
            if judge.static_rejection(analysis) is None:
                needing -= 1

            def acquire(after: int = needing + self.coming) -> tuple[Path, WorkerProcess]:
                got = self._acquire()
                # the workers of the candidates after this one (this call's and those still to
                # come), started as soon as one is taken: ready when this one is done
                while self.prefetch and len(self._spares) < min(after, self.room):
                    self._start_spare()
                return got

            result, workdir = _evaluate_one(ctx, path, source, analysis, acquire)
            result = _reverify(ctx, path, source, analysis, result)
            result.phase_seconds["total"] = time.perf_counter() - start
            if opts.out_dir is not None:
                _write_evidence(opts.out_dir, path, source, result, workdir)
            results.append(result)
        if self.warm and not self._spares:
            self._start_spare()
        elif not self.warm:  # started for candidates that did not need them
            self._kill_spares()
        return results

    def _kill_spares(self) -> None:
        for _, worker in self._spares:
            worker.kill()
        self._spares.clear()

    def close(self) -> None:
        self._kill_spares()
        self.ctx.closing = True
        prepared = self.ctx.prepared
        if prepared is not None:
            prepared.cancel()  # not started yet: never will
        self._take_oracle()
        if self.ctx.oracle is not None and prepared is not None and not prepared.done():
            self.ctx.oracle.kill()  # making baselines no candidate will be timed against
        self._pool.shutdown(wait=True)
        self._take_oracle()  # a reference that was still running when the session closed
        if self.ctx.oracle is not None:
            self.ctx.oracle.close()
            self.ctx.oracle = None
        self._tmp.cleanup()
        # a build killed midway (Ctrl-C, a timeout) leaves torch's lock file: clear it now
        BuildCache(self.opts.build_cache).clear_stale_batons()

    def _take_oracle(self) -> None:
        """The reference's worker, once its run has ended (None before; None if it failed)."""
        if self.ctx.oracle is None and self.ctx.pending is not None and self.ctx.pending.done():
            with contextlib.suppress(Exception):
                self.ctx.oracle = self.ctx.pending.result()[0]

    def __enter__(self) -> EvalSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def evaluate(problem: Problem, candidates: list[Path], opts: EvalOptions) -> list[EvalResult]:
    """Evaluate each candidate against the problem; one EvalResult per candidate, in order."""
    with EvalSession(problem, opts) as session:
        return session.evaluate(candidates)
