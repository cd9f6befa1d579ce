"""A local judge worker's work ahead of judging: every candidate of the batch built ahead, and the
next problem's session opened while this one's candidates are judged, so judging goes from
candidate to candidate and problem to problem without waiting for builds or session starts.

Both run in the judge worker's own process, as `live` workers of it: a timing or profiling phase
(`live.quiet`) stops them with everything they started, so nothing built or opened ahead runs
beside a measurement. Builds ahead also run only on the slot's build cores
(`Slot.build_cores`): on a GPU, the first quarter of the slot's cores never carries one.

- Builds ahead (`harness.prebuild.Prebuilder`, `JudgeSpec.builds_ahead` at a time): the whole
  plan is in the worker's `init`, queued in plan order, the order tasks are judged. A group the
  judge is about to evaluate is withdrawn (it builds it itself; a build ahead already running
  goes on and the judge's build waits for it at the cache's lock). With several local workers,
  each queues the whole plan and a candidate is built by whichever takes it first (`Claims`).
- The next session (`JudgeSpec.open_ahead`): the pool sends each worker one task ahead (see
  `pool.py`); as a task's session opens, the task behind it gets its `EvalSession` (reference
  run, a warm candidate worker), opened on the judging thread between evaluations. If it cannot
  open now (memory held by this one), it is opened at its turn, as without looking ahead; so is
  one whose reference ran out of time while measurements of this task held it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.batch.judging import (
    OpenedAhead,
    judge_problem,
    problem_folder,
    runnable_here,
    spares_for,
    stage_task,
)
from kernelwright.batch.pool import Backlog, Emit
from kernelwright.batch.spec import JudgeSpec, Slot
from kernelwright.errors import KernelwrightError
from kernelwright.harness.building.prebuild import Prebuilder
from kernelwright.harness.session import EvalSession

log = logging.getLogger(__name__)

NEXT_TASK_WAIT_S = 10.0  # the pool answers as a task starts: milliseconds; this only bounds a stuck parent


class Claims:
    """Which candidates a builder of this batch has taken: a file each, created exclusively in a
    folder every local worker shares, so a candidate is built ahead once in the batch."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def take(self, candidate: Path) -> bool:
        """True for the first caller for `candidate`, False for every later one."""
        name = hashlib.sha1(str(Path(candidate).resolve()).encode()).hexdigest()
        try:
            os.close(os.open(self.folder / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return False
        return True


class Relay:
    """A session's progress callback whose listener is set later: a session opened ahead only
    logs until its task begins, then reports as that task's."""

    def __init__(self) -> None:
        self.target: Callable[[str], None] | None = None

    def __call__(self, text: str) -> None:
        if self.target is not None:
            self.target(text)


@dataclass
class _Opened:
    task_id: Any
    problem_sha256: str
    session: EvalSession
    relay: Relay
    at: float


def _reference_timed_out(session: EvalSession) -> bool:
    """Whether the session's reference ran out of its time limit. Its clock runs while the
    measurements of the task before hold it (`live.quiet`): that is no fault of the problem."""
    pending = session.ctx.pending
    if pending is None or not pending.done() or pending.exception() is not None:
        return False
    return pending.result()[1].timed_out


class JudgeWorker:
    """The handler of `python -m kernelwright.batch.worker`: judges each task it is sent
    (`judging.judge_problem`) with the builds and the session it prepared ahead. `close()` ends them."""

    def __init__(self, backlog: Backlog) -> None:
        self.backlog = backlog
        self._scratch = tempfile.TemporaryDirectory(prefix="kw-batch-")
        self._ready = False
        self._spec: JudgeSpec | None = None
        self._slot: Slot | None = None
        self._stage_root = self._evidence_root = Path(self._scratch.name)
        self._prebuilder: Prebuilder | None = None
        self._claims: Claims | None = None
        self._opened: _Opened | None = None

    def __call__(self, init: dict[str, Any], slot: Slot, task: dict[str, Any], emit: Emit) -> None:
        if not self._ready:
            self._set_up(init, slot, task)
        assert self._spec is not None
        judge_problem(
            self._spec,
            slot,
            task,
            emit,
            self._stage_root,
            self._evidence_root,
            ship=bool(init.get("ship_evidence")),
            ahead=self,
        )

    def _set_up(self, init: dict[str, Any], slot: Slot, first: dict[str, Any]) -> None:
        """At the first task: the batch's settings, and every candidate of the plan queued to
        build ahead (staged where the tasks will find them), but for the first task's first
        group, which the judge builds at once."""
        self._ready = True
        spec = self._spec = JudgeSpec.model_validate(init["spec"])
        self._slot = slot
        scratch = Path(self._scratch.name)
        self._stage_root = Path(init["stage_dir"]) if init.get("stage_dir") else scratch
        self._evidence_root = Path(init["evidence_dir"]) if init.get("evidence_dir") else scratch / "evidence"
        parallel = spec.builds_ahead(slot)
        plan: list[dict[str, Any]] = init.get("plan") or []
        if not plan or parallel < 1:
            return
        self._claims = Claims(Path(init["claims_dir"])) if init.get("claims_dir") else None
        cores = slot.build_cores(spec.device)
        self._prebuilder = Prebuilder(
            spec.eval_options(slot),
            parallel=parallel,
            cores=cores,
            claim=self._claims.take if self._claims is not None else None,
        )
        with contextlib.suppress(KernelwrightError):  # a problem that does not load: its task reports it
            _, paths = stage_task(first, self._stage_root, spec)
            self.judging(paths[: spec.parallel_builds])
        queued = 0
        for planned in plan:
            try:
                problem, paths = stage_task(planned, self._stage_root, spec)
            except KernelwrightError:  # a problem that does not load: its task reports it
                continue
            queued += self._prebuilder.submit(problem, paths)
        log.info("building %d candidates ahead, %d at a time, on cores %s", queued, parallel, cores or "all")

    # ---- judging.Ahead -------------------------------------------------------------------

    def take_session(self, task: dict[str, Any], say: Callable[[str], None]) -> OpenedAhead | None:
        opened, self._opened = self._opened, None
        if opened is None:
            return None
        if opened.task_id != task.get("id") or opened.problem_sha256 != task.get("problem_sha256"):
            opened.session.close()  # not the task that came: opened for nothing
            return None
        if _reference_timed_out(opened.session):
            log.info("%s: the reference run ahead timed out; running it again now", task.get("problem"))
            opened.session.close()
            return None
        opened.relay.target = say
        return OpenedAhead(opened.session, time.monotonic() - opened.at)

    def open_next(self, task: dict[str, Any]) -> None:
        assert self._spec is not None and self._slot is not None
        if not self._spec.open_ahead or self._opened is not None:
            return
        upcoming = self.backlog.after(task.get("id"), NEXT_TASK_WAIT_S)
        if upcoming is None or not any(runnable_here(self._spec, c) for c in upcoming.get("candidates", [])):
            return
        relay = Relay()
        try:
            problem, _ = stage_task(upcoming, self._stage_root, self._spec)
            out_dir = self._evidence_root / problem_folder(upcoming["problem"])
            wanted = spares_for(sum(runnable_here(self._spec, c) for c in upcoming.get("candidates", [])))
            session = EvalSession(
                problem,
                self._spec.eval_options(self._slot, progress=relay, out_dir=out_dir),
                warm=True,
                spares=wanted,
            )
        except KernelwrightError as exc:  # opened (or reported) at its turn instead
            log.info("%s: not opened ahead: %s", upcoming.get("problem"), exc.one_line())
            return
        self._opened = _Opened(upcoming.get("id"), upcoming.get("problem_sha256", ""), session, relay, time.monotonic())

    @property
    def prebuilder(self) -> Prebuilder | None:
        """The builds ahead, for the session judging now (`EvalSession.prebuilder`)."""
        return self._prebuilder

    def judging(self, candidates: list[Path]) -> None:
        if self._claims is not None:
            for path in candidates:
                self._claims.take(path)  # other workers' builders leave it to this one
        if self._prebuilder is not None:
            self._prebuilder.withdraw(candidates)

    def figures(self, candidate: Path) -> dict[str, float]:
        built = self._prebuilder.outcome(candidate) if self._prebuilder is not None else None
        if built is None or built.status != "built":  # what a build ahead spared the judge
            return {}
        return {"prebuild": round(built.seconds, 3)}

    def close(self) -> None:
        if self._opened is not None:
            self._opened.session.close()
            self._opened = None
        if self._prebuilder is not None:
            counts: dict[str, int] = {}
            for built in self._prebuilder.outcomes():
                counts[built.status] = counts.get(built.status, 0) + 1
            log.info("builds ahead: %s", counts or "none")
            self._prebuilder.close()
            self._prebuilder = None
        self._scratch.cleanup()
