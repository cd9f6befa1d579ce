"""Build candidates into the build cache ahead of their evaluation, so that judging one finds its
extensions built.

A build ahead is exactly the build an evaluation does (`EvalSession`'s parallel builds): a worker
in "build" mode imports the candidate inside its sandbox, so its `load_inline` and
`fastext.load_kernels` calls go through the content-addressed build cache (one lock per key: an
evaluation that needs a key being built here waits for it, then finds it cached). The candidate's
code never runs in this process. A build that fails is not an error here: the candidate's own
evaluation fails the same way and reports it.

Builds run beside evaluations, never beside their measurements. Every build worker is a `live`
worker of this process, so `live.quiet` (a timing or profiling phase) stops it with everything
it started. `live.quiet` stops the workers alive when it begins; a build starting during the
phase would run beside it, so `QuietWatch` tells when a phase is in force: no build starts
then, and one that started just as the phase began is stopped here until it ends. With `cores`,
the builds (and the compilers they start) also run only on those cores, so the cores kept for
judging never carry a build.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kernelwright.errors import KernelwrightError
from kernelwright.harness import capacity, judge
from kernelwright.harness.building.link import broker_link
from kernelwright.harness.building.quiet_watch import QuietWatch
from kernelwright.harness.checks.static.analysis import analyze_candidate
from kernelwright.harness.options import EvalOptions
from kernelwright.harness.sandbox import scratch
from kernelwright.harness.workers import live
from kernelwright.harness.workers.client import CandidateClient
from kernelwright.harness.workers.jobs import WorkerJob, worker_env
from kernelwright.harness.workers.messages import BuildReport
from kernelwright.harness.workers.process import WorkerProcess
from kernelwright.problems import Problem
from kernelwright.problems.candidate.cache import BuildCache

log = logging.getLogger(__name__)
PREBUILD_NICE = 10  # builds ahead yield the CPU to the workers being started for judging

Status = Literal["built", "cached", "failed", "skipped"]


@dataclass(frozen=True)
class Prebuilt:
    """What building one candidate ahead came to. `cached`: every extension it asked for was
    in the cache already; `skipped`: not built here (withdrawn, claimed elsewhere, closed)."""

    candidate: Path
    status: Status
    seconds: float = 0.0
    detail: str = ""


@dataclass(frozen=True)
class _Item:
    problem_path: Path
    candidate: Path


class Prebuilder:
    """Builds candidate files into the build cache ahead of their evaluation, `parallel` at a
    time, in the order they were submitted.

    `opts` are the evaluation's options (device, size, build cache, sandbox, limits). `cores`:
    the cores the builds run on (None: this process's). `claim(candidate)` is asked before each
    build: False skips it (another builder of the same batch took it). `close()` kills the
    builds running and skips the rest; an interrupt (`live.interrupt`) does the same. Make it
    before the measurements it must stay out of: one already running when it is made is not seen.
    """

    def __init__(
        self,
        opts: EvalOptions,
        *,
        parallel: int = 1,
        cores: Collection[int] | None = None,
        claim: Callable[[Path], bool] | None = None,
    ) -> None:
        self.opts = opts
        self.parallel = max(1, parallel)
        self.cores = sorted(cores) if cores else None
        self._claim = claim
        self._env = worker_env(opts)
        self._queue: deque[_Item] = deque()
        self._known: set[Path] = set()  # queued, running or done: never built twice here
        self._running: dict[Path, WorkerProcess] = {}
        self._outcomes: dict[Path, Prebuilt] = {}
        self._taken: set[Path] = set()  # being built: taken from the queue (or by build_now), not ended
        self._cond = threading.Condition()
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._count = 0
        self._tmp: tempfile.TemporaryDirectory[str] | None = tempfile.TemporaryDirectory(
            prefix=scratch.PREFIX, dir=capacity.scratch_root()
        )
        scratch.claim(Path(self._tmp.name))
        # Now, not at the first build: a measurement that begins later stops it and is seen.
        self._watch: QuietWatch | None = QuietWatch(self._workers)

    # ---- the caller's side ----------------------------------------------------------------

    def submit(self, problem: Problem, candidates: Iterable[Path]) -> int:
        """Queue `problem`'s candidate files after everything queued before; returns how many
        were queued (not those already known here, nor those rejected before anything builds)."""
        paths = [Path(p).resolve() for p in candidates]
        paths = [p for p in dict.fromkeys(paths) if not self._statically_rejected(problem, p)]
        with self._cond:
            items = [_Item(problem.path, p) for p in paths if p not in self._known]
            if self._closed or not items:
                return 0
            self._known.update(item.candidate for item in items)
            self._queue.extend(items)
            self._start()
            self._cond.notify_all()
        return len(items)

    def withdraw(self, candidates: Iterable[Path]) -> None:
        """The evaluation builds these itself now: not started here from now on, whether queued
        or submitted later (one running goes on; the evaluation's build waits for it at the
        cache's lock)."""
        gone = {Path(p).resolve() for p in candidates}
        with self._cond:
            for path in gone - self._known:
                self._outcomes[path] = Prebuilt(path, "skipped", detail="withdrawn")
            self._known |= gone
            for item in self._queue:
                if item.candidate in gone:
                    self._outcomes[item.candidate] = Prebuilt(item.candidate, "skipped", detail="withdrawn")
            self._queue = deque(item for item in self._queue if item.candidate not in gone)
            self._cond.notify_all()

    def outcome(self, candidate: Path) -> Prebuilt | None:
        """How the candidate's build ahead ended (None: not submitted, or not ended yet)."""
        with self._cond:
            return self._outcomes.get(Path(candidate).resolve())

    def outcomes(self) -> list[Prebuilt]:
        with self._cond:
            return list(self._outcomes.values())

    def running(self) -> dict[Path, int]:
        """The candidates being built now, with their build worker's pid."""
        with self._cond:
            return {path: worker.pid for path, worker in self._running.items()}

    def build_now(self, problem: Problem, candidates: Iterable[Path], jobs: int = 0) -> list[Prebuilt | None]:
        """Build these now and return once they are built: what an evaluation about to judge
        them needs (`EvalSession`'s parallel builds can be this call). One built ahead already is
        not built again, one being built ahead is waited for, the rest are built at once, `jobs`
        at a time (0: all), beside the builds ahead and on the caller's cores. One outcome per
        candidate, in order (None: rejected before anything builds)."""
        paths = [Path(p).resolve() for p in candidates]
        wanted = [p for p in dict.fromkeys(paths) if not self._statically_rejected(problem, p)]
        with self._cond:
            own = [
                p
                for p in wanted
                if p not in self._taken and self._outcomes.get(p, Prebuilt(p, "skipped")).status == "skipped"
            ]
            self._known.update(own)
            self._queue = deque(item for item in self._queue if item.candidate not in own)
            self._taken.update(own)
        if own:

            def build(path: Path) -> None:
                item = _Item(problem.path, path)
                self._record(item, functools.partial(self._build, item, claim=False))

            with ThreadPoolExecutor(max_workers=max(1, min(jobs or len(own), len(own)))) as pool:
                list(pool.map(build, own))
        with self._cond:
            self._cond.wait_for(lambda: not self._taken.intersection(wanted))
            return [self._outcomes.get(p) for p in paths]

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until nothing is queued or running (True), or `timeout_s` passed (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._closed or not (self._queue or self._taken), timeout_s)

    def close(self) -> None:
        """Kill the builds running, skip the rest; what was built stays in the cache."""
        with self._cond:
            self._closed = True
            for item in self._queue:
                self._outcomes[item.candidate] = Prebuilt(item.candidate, "skipped", detail="closed")
            self._queue.clear()
            running = list(self._running.values())
            self._cond.notify_all()
        for worker in running:
            worker.kill()
        for thread in self._threads:
            thread.join(timeout=30)
        if self._watch is not None:
            self._watch.kill()
            self._watch = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        # a build killed midway leaves torch's lock file: clear it now (as `EvalSession.close` does)
        BuildCache(self.opts.build_cache).clear_stale_batons()

    def __enter__(self) -> Prebuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the builders ---------------------------------------------------------------------

    def _statically_rejected(self, problem: Problem, path: Path) -> bool:
        """Rejected before anything builds (its evaluation will say why): nothing to build."""
        try:
            source = path.read_text()
        except OSError:
            return True
        return judge.static_rejection(analyze_candidate(source, problem_dtype=problem.meta.dtype)) is not None

    def _start(self) -> None:
        """The builder threads, at the first submit."""
        if self._threads:
            return
        for n in range(self.parallel):
            thread = threading.Thread(target=self._serve, daemon=True, name=f"prebuild-{n}")
            self._threads.append(thread)
            thread.start()

    def _workers(self) -> list[WorkerProcess]:
        with self._cond:
            return list(self._running.values())

    def _stopping(self) -> bool:
        return self._closed or live.interrupted()

    def _serve(self) -> None:
        if self.cores:
            # This thread only: every process it starts (the build worker, and through it the
            # compilers) is born on these cores, before it could start anything elsewhere.
            os.sched_setaffinity(0, self.cores)
        # Builds ahead are for later candidates: where they share cores with the workers being
        # started for the current and next problems, those go first (Linux: this thread, and
        # what it starts, only).
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, 0, PREBUILD_NICE)
        while True:
            item = self._take()
            if item is None:
                return
            self._record(item, functools.partial(self._build, item))

    def _record(self, item: _Item, build: Callable[[], Prebuilt]) -> None:
        """Run one taken item's build and keep its outcome (whatever happens to the build)."""
        built = Prebuilt(item.candidate, "failed", detail="the builder thread failed")
        try:
            built = build()
        finally:
            with self._cond:
                self._taken.discard(item.candidate)
                self._running.pop(item.candidate, None)
                self._outcomes[item.candidate] = built
                self._cond.notify_all()
        if built.status == "failed":
            log.info("building %s failed here (its evaluation reports it): %s", item.candidate, built.detail)

    def _take(self) -> _Item | None:
        """The next item, once no measurement is running; None when closed."""
        assert self._watch is not None
        while not self._stopping():
            with self._cond:
                # short waits: an interrupt (`live.interrupt`) does not notify this condition
                if not self._cond.wait_for(lambda: self._stopping() or bool(self._queue), timeout=0.5):
                    continue
            self._watch.wait_loud(self._stopping)
            with self._cond:
                if self._queue and not self._stopping():
                    item = self._queue.popleft()
                    self._taken.add(item.candidate)
                    return item
        return None

    def _build(self, item: _Item, claim: bool = True) -> Prebuilt:
        if claim and self._claim is not None and not self._claim(item.candidate):
            return Prebuilt(item.candidate, "skipped", detail="taken by another builder")
        with self._cond:
            self._count += 1
            n = self._count
        assert self._tmp is not None
        folder = Path(self._tmp.name) / f"build-{n}"
        folder.mkdir(parents=True, exist_ok=True)
        # the evaluation's own build job (`WorkerJob.from_options`)
        job = WorkerJob.from_options(self.opts, "build", item.problem_path, folder, candidate=item.candidate)
        start = time.monotonic()
        try:
            return self._run(item, job, folder, start)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _run(self, item: _Item, job: WorkerJob, folder: Path, start: float) -> Prebuilt:
        try:
            worker = WorkerProcess(job, folder / "job.json", folder / "build.log", self._env, broker_link)
        except KeyboardInterrupt:  # an interrupt: no new worker starts
            return Prebuilt(item.candidate, "skipped", detail="interrupted")
        except KernelwrightError as exc:  # e.g. strict sandboxing this machine cannot give
            return Prebuilt(item.candidate, "failed", time.monotonic() - start, exc.one_line())
        with self._cond:
            self._running[item.candidate] = worker
            closed = self._closed
        try:
            if closed:
                return Prebuilt(item.candidate, "skipped", detail="closed")
            reply = CandidateClient(worker).build(self.opts.build_timeout_s)
        except KeyboardInterrupt:
            return Prebuilt(item.candidate, "skipped", detail="interrupted")
        except KernelwrightError as exc:
            return Prebuilt(item.candidate, "failed", time.monotonic() - start, exc.one_line())
        finally:
            worker.close()
        seconds = time.monotonic() - start
        if self._stopping():
            return Prebuilt(item.candidate, "skipped", seconds, "closed while building")
        report = reply.report or BuildReport()  # none, or unreadable: as a report that says nothing
        if not (reply.ok and report.ok):
            detail = (report.detail or reply.outcome.detail or "no result").strip()
            return Prebuilt(item.candidate, "failed", seconds, detail.splitlines()[-1] if detail else "")
        builds = report.builds
        cached = bool(builds) and all(b.cached for b in builds)
        return Prebuilt(item.candidate, "cached" if cached else "built", seconds)
