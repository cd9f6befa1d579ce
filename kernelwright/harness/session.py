"""The evaluation harness: one problem, one or more candidate files, one verdict each.

reference worker ──inputs + reference outputs──► (files) ◄── candidate worker (build → correctness → timing)
                                                   │
                                        compared here, in the harness process

This module owns the workers' lifecycle for one problem: the reference's worker (started once,
kept to compare), candidate workers started ahead of their candidates, and their ends. What
happens to one candidate is the pipeline in `harness/phases/`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelwright.harness import capacity, judge
from kernelwright.harness.building.prebuild import Prebuilder
from kernelwright.harness.checks.static.analysis import analyze_candidate
from kernelwright.harness.options import EvalOptions, plan_trials
from kernelwright.harness.phases import candidate, reference
from kernelwright.harness.phases.build import build_all
from kernelwright.harness.phases.context import Context
from kernelwright.harness.phases.reverify import reverify
from kernelwright.harness.result import EvalResult
from kernelwright.harness.sandbox import scratch
from kernelwright.harness.workers.client import CandidateClient
from kernelwright.harness.workers.process import WorkerProcess, refuse_unless_isolated
from kernelwright.problems import Problem
from kernelwright.problems.candidate.cache import BuildCache
from kernelwright.problems.footprint import measure


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
        self.ahead: Prebuilder | None = None  # its own builds ahead (`build_ahead`): None until the first
        self._ahead_lock = threading.Lock()
        refuse_unless_isolated(opts.sandbox, cuda=opts.device == "cuda")
        scratch_root = capacity.scratch_root()
        footprint = measure(problem, opts.size)  # shapes only: nothing is allocated here
        self.memory = capacity.check_memory(problem, footprint, opts, scratch_in_ram=scratch_root is not None)
        scratch.sweep()  # what runs killed before their cleanup left behind
        self._tmp = tempfile.TemporaryDirectory(prefix=scratch.PREFIX, dir=scratch_root)
        work = Path(self._tmp.name)
        scratch.claim(work)
        trials = plan_trials(opts.trials, len(footprint.variants), opts.base_seed)
        self.ctx = Context(problem, opts, work, work / "data", trials)
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
        self.ctx.pending = self._pool.submit(reference.run_reference, self.ctx)
        if reference.prepares_ahead(opts, footprint):  # the same thread: after the reference
            self.ctx.prepared = self._pool.submit(reference.prepare_baselines, self.ctx)
        if warm:
            for _ in range(max(1, min(spares, self.room))):
                self._start_spare()

    def _workdir(self) -> Path:
        self._count += 1
        return self.ctx.work / f"candidate-{self._count}"

    def _start_spare(self) -> None:
        workdir = self._workdir()
        self._spares.append((workdir, candidate.start_worker(self.ctx, workdir)))
        if len(self._spares) == 1:
            self._spare_ready = False

    def _acquire(self) -> tuple[Path, WorkerProcess]:
        if self._spares:
            spare = self._spares.pop(0)
            self._spare_ready = False
            return spare
        workdir = self._workdir()
        return workdir, candidate.start_worker(self.ctx, workdir)

    def wait_ready(self, timeout_s: float = 600.0) -> bool:
        """Block until the worker started ahead has its baselines ready (False without one, or if it died)."""
        if not self._spares:
            return False
        if not self._spare_ready:  # the worker says "ready" once
            self._spare_ready = CandidateClient(self._spares[0][1]).ready(timeout_s).ok
        return self._spare_ready

    def build_ahead(self, candidates: list[Path]) -> None:
        """Start building these into the build cache and return at once (the agent's coder hands
        each draft over as its reply arrives). A later `evaluate` of the same source, at any path,
        finds the build in the cache, or waits at the key's lock for the one still running: the
        cache's key is the extension's sources and flags, not the candidate's path. The builds are
        the batch's prebuilder's where the session has one, else a `Prebuilder` of the session's
        own, made at the first call and closed with the session. Call it between evaluations (as
        the agent's coder does): a `Prebuilder` stays out of the timing phases that begin after it
        is made, not of one already running."""
        builder = self.prebuilder
        if builder is None:
            with self._ahead_lock:
                if self.ahead is None:
                    self.ahead = Prebuilder(self.opts, parallel=self.opts.build_jobs or os.cpu_count() or 1)
                builder = self.ahead
        builder.submit(self.problem, candidates)

    def baseline_ms(self) -> dict[str, float]:
        """The reference's median times (ms) under each baseline (eager, torch.compile), timed once
        in the reference's own process (which never runs candidate code) on a quiet machine, once
        per session: the figures each candidate's own baseline timings are cross-checked against,
        so asking for them before the first candidate costs nothing later."""
        self.ctx.await_reference()
        return {name: figures.median_ms for name, figures in self.ctx.clean_baselines().items()}

    def evaluate(
        self, candidates: list[Path], on_result: Callable[[int, EvalResult], None] | None = None
    ) -> list[EvalResult]:
        """Evaluate each candidate against the problem; one EvalResult per candidate, in order.
        `on_result(i, result)` hears of each as soon as it is decided (the agent keeps it at once,
        so a run killed mid-batch never judges it again)."""
        ctx, opts = self.ctx, self.opts
        sources = [p.read_text() for p in candidates]
        analyses = [analyze_candidate(s, problem_dtype=self.problem.meta.dtype) for s in sources]
        runnable = [(p, a) for p, a in zip(candidates, analyses, strict=True) if judge.static_rejection(a) is None]
        if self.prebuilder is not None and runnable:
            self.prebuilder.build_now(self.problem, [p for p, _ in runnable], jobs=opts.build_jobs or 0)
        elif len(runnable) > 1:
            opts.say(f"building {len(runnable)} candidates in parallel")
            build_all(ctx, runnable)
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

            result, workdir = candidate.evaluate_one(ctx, path, source, analysis, acquire)
            result = reverify(ctx, path, source, analysis, result)
            result.phase_seconds["total"] = time.perf_counter() - start
            if opts.out_dir is not None:
                candidate.write_evidence(opts.out_dir, path, source, result, workdir)
            results.append(result)
            if on_result is not None:
                on_result(len(results) - 1, result)
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
        with self._ahead_lock:
            ahead, self.ahead = self.ahead, None
        if ahead is not None:
            ahead.close()  # what it built stays in the cache
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
