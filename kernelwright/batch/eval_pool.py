"""The agent's evaluator over every device of the host: one `EvalSession` per device, each in a
worker process of its own pinned the way a batch pins its slots, and a step's candidates judged
on whichever device is free first (issue #31).

    EvalPool.evaluate([c1, c2, c3]) ──► queue ──► slot gpu0: worker (CUDA_VISIBLE_DEVICES=0, its cores) ─ EvalSession
                                              └─► slot gpu1: worker (CUDA_VISIBLE_DEVICES=1, its cores) ─ EvalSession
                          results, in the caller's order ◄──┘

Why a process per device and not sessions side by side in the agent's process: a timing phase
keeps its device and cores quiet by stopping every other worker of its process (`live.quiet`),
so a second session in the same process would have its own timing stopped midway. Apart, each
session's quiet phases pause only its own workers, on its own GPU and its own share of the cores
(`spec.plan_slots`, `pool.serve`). On the CPU the devices are shares of the same cores and
memory, so their quiet phases also hold one file lock (`TimingGate`): two timing phases never
overlap, while builds and correctness trials of the others go on.

The slots, their pinning and the worker's JSON-lines protocol are the batch's (`spec.py`,
`pool.py`); here each worker keeps one session open for the whole run and judges one candidate
per task. `python -m kernelwright.batch.eval_pool` is that worker; never started by hand.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright import errors
from kernelwright.batch.pool import Emit, Message, _Worker, serve
from kernelwright.batch.spec import JudgeSpec, Slot, plan_slots, visible_gpus
from kernelwright.errors import EnvironmentProblem, KernelwrightError
from kernelwright.harness.result import EvalResult
from kernelwright.harness.session import EvalSession
from kernelwright.harness.workers import live
from kernelwright.problems import Problem, load_problem_file
from kernelwright.vocabulary import Device

MODULE = "kernelwright.batch.eval_pool"
JOURNAL = "judged.jsonl"
"""Beside the workers' logs: one JSON line per judged candidate (`Judged` and its verdict)."""
OPEN_TIMEOUT_S = 300.0  # a worker's start: interpreter, torch, the session's capacity check


def device_slots(device: Device, *, cpu_devices: int = 1, threads: int | None = None) -> list[Slot]:
    """Where the sessions run: one slot per visible GPU on `cuda` (CUDA_VISIBLE_DEVICES, else
    torch.cuda.device_count()), `cpu_devices` slots on the CPU; each with its share of the cores."""
    if device == Device.CUDA:
        import torch

        return plan_slots(device, workers=None, gpus=visible_gpus(torch.cuda.device_count()))
    return plan_slots(device, workers=cpu_devices, gpus=None, threads=threads)


@dataclass(frozen=True)
class Judged:
    """Where and when one candidate was judged: its device (a slot's label: `gpu3` is
    CUDA_VISIBLE_DEVICES entry 3, `cpu1` the second CPU share), the wall-clock span of its
    evaluation, and the quiet phases (timing, work share, clean baselines) its worker held since
    its last report, as (start, end) in `time.time()` seconds."""

    index: int
    candidate: str
    device: str
    start: float
    end: float
    quiet: tuple[tuple[float, float], ...]


class _Link:
    """The parent's side of one device's worker: one request at a time, answered in order."""

    def __init__(self, worker: _Worker, slot: Slot) -> None:
        self.worker, self.slot = worker, slot
        self._lock = threading.Lock()
        self._next = 0

    def request(self, task: dict[str, Any]) -> Message:
        """Send one task, return its answer (`reply`); a worker's error is raised here as the
        KernelwrightError it was, a dead worker as an EnvironmentProblem."""
        with self._lock:
            self._next += 1
            self.worker.send({"type": "task", "task": {**task, "id": self._next}})
            reply: Message | None = None
            failure: KernelwrightError | None = None
            for message in self.worker.messages():  # to its `task_done`, so the next request starts clean
                kind = message.get("type")
                if kind == "reply":
                    reply = message
                elif kind == "raised":
                    cls = getattr(errors, str(message.get("kind")), KernelwrightError)
                    failure = cls(str(message.get("message")), hint=message.get("hint"))
                elif kind == "task_failed":
                    failure = errors.InternalError(f"evaluation worker {self.slot.label}: {message.get('detail')}")
                elif kind == "task_done":
                    break
            if failure is not None:
                raise failure
            if reply is None:
                raise EnvironmentProblem(
                    f"the evaluation worker on {self.slot.label} ended: {self.worker.log_tail(800)}",
                    hint=f"its log: {self.worker.log_path}",
                )
            return reply


class EvalPool:
    """The agent's `Evaluator` over several devices: one warm `EvalSession` per slot, each in a
    pinned worker process; `evaluate` hands each candidate to the first free device and returns
    the results in the caller's order, each with `hardware["slot"]` naming its device. `log`
    holds where and when each candidate was judged.

    It has no `build_ahead` (the `Evaluator` protocol's optional head start): the coder writes no
    drafts for it, and each candidate is built by the session of the device that judges it."""

    def __init__(
        self,
        problem: Problem,
        spec: JudgeSpec,
        slots: list[Slot],
        log_dir: Path,
        *,
        out_dir: Path | None = None,
        warm: bool = True,
        env: dict[str, str] | None = None,
    ) -> None:
        if not slots:
            raise ValueError("an evaluation pool needs at least one slot")
        self.spec, self.slots = spec, slots
        self.log: list[Judged] = []
        self.journal = log_dir / JOURNAL
        self._journal_lock = threading.Lock()
        self._tmp = tempfile.TemporaryDirectory(prefix="kw-evalpool-")
        gate = Path(self._tmp.name) / "timing.lock" if spec.device == Device.CPU and len(slots) > 1 else None
        init = {
            "spec": spec.model_dump(mode="json"),
            "problem": str(problem.path),
            "problem_sha256": problem.sha256,
            "builtin": problem.builtin,
            "out_dir": str(out_dir) if out_dir is not None else None,
            "warm": warm,
            "gate": str(gate) if gate is not None else None,
        }
        log_dir.mkdir(parents=True, exist_ok=True)
        self._links: list[_Link] = []
        try:
            for slot in slots:
                worker = _Worker(MODULE, slot, init, log_dir / f"eval-{slot.label}.log", dict(env or {}))
                self._links.append(_Link(worker, slot))
            self._each(lambda link: link.request({"op": "open"}))  # the references run from here on
        except BaseException:
            self.close()
            raise

    def _each(self, call: Any) -> list[Any]:
        """`call(link)` on every device at once; results in slot order."""
        with ThreadPoolExecutor(max_workers=len(self._links)) as threads:
            return list(threads.map(call, self._links))

    def evaluate(
        self, candidates: list[Path], on_result: Callable[[int, EvalResult], None] | None = None
    ) -> list[EvalResult]:
        """Judge each candidate on the first free device; one EvalResult per candidate, in order.
        `on_result(i, result)` hears of each as soon as its device returns it (from that device's
        thread), whatever the order."""
        todo: queue.Queue[int] = queue.Queue()
        for index in range(len(candidates)):
            todo.put(index)
        results: list[EvalResult | None] = [None] * len(candidates)
        judged: list[Judged] = []

        def drain(link: _Link) -> None:
            while not live.interrupted():
                try:
                    index = todo.get_nowait()
                except queue.Empty:
                    return
                path = candidates[index]
                reply = link.request({"op": "evaluate", "candidate": str(path)})
                results[index] = result = EvalResult.model_validate(reply["result"])
                if on_result is not None:
                    on_result(index, result)
                span = reply["span"]
                quiet = tuple((float(a), float(b)) for a, b in reply["quiet"])
                entry = Judged(index, str(path), link.slot.label, span[0], span[1], quiet)
                judged.append(entry)
                self._record(entry, result)

        busy = self._links[: max(1, len(candidates))]
        with ThreadPoolExecutor(max_workers=len(busy)) as threads:
            futures = [threads.submit(drain, link) for link in busy]
            try:
                for future in futures:
                    future.result()
            except KernelwrightError:
                if live.interrupted():  # the interrupt ended the workers: that is no device's failure
                    raise KeyboardInterrupt("interrupted while judging") from None
                raise
        if live.interrupted():
            raise KeyboardInterrupt("interrupted while judging")
        self.log.extend(sorted(judged, key=lambda j: j.index))
        return [r for r in results if r is not None]

    def _record(self, entry: Judged, result: EvalResult) -> None:
        """One line of `journal` per judged candidate, as it is judged: where, when, its quiet
        phases and its verdict (what a run's folder keeps of which device judged what)."""
        line = {**dataclasses.asdict(entry), "verdict": result.verdict.value}
        with self._journal_lock, self.journal.open("a") as handle:
            handle.write(json.dumps(line) + "\n")

    def wait_ready(self, timeout_s: float = 600.0) -> bool:
        """Block until every device's worker started ahead has its baselines ready."""
        return all(self._each(lambda link: bool(link.request({"op": "wait_ready", "timeout_s": timeout_s})["ok"])))

    def baseline_ms(self) -> dict[str, float]:
        """The reference's clean baseline medians (ms), as the first device timed them."""
        figures = self._links[0].request({"op": "baseline_ms"})["figures"]
        return {str(k): float(v) for k, v in figures.items()}

    def close(self) -> None:
        for link in self._links:  # each ends its session (`stop`), killed if it does not
            link.worker.close()
        self._links.clear()
        self._tmp.cleanup()

    def __enter__(self) -> EvalPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---- the worker's side -------------------------------------------------------------------------


class TimingGate:
    """What every quiet phase of a worker holds (`live.set_quiet_gate`): the pool's file lock on
    the CPU (taken by this process's first quiet phase, released by its last: phases of one
    session may overlap as they always could; those of two sessions never do), and a record of
    each phase's start and end."""

    def __init__(self, lock_path: Path | None) -> None:
        self.lock_path = lock_path
        self._mutex = threading.Lock()
        self._depth = 0
        self._fd: int | None = None
        self._windows: list[tuple[float, float]] = []

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._mutex:
            if self._depth == 0 and self.lock_path is not None:
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX)  # no other process of this pool is in a quiet phase
                self._fd = fd
            self._depth += 1
        start = time.time()
        try:
            yield
        finally:
            end = time.time()
            with self._mutex:
                self._windows.append((start, end))
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                    os.close(self._fd)
                    self._fd = None

    def take(self) -> list[tuple[float, float]]:
        """The phases recorded since the last call."""
        with self._mutex:
            taken, self._windows = self._windows, []
        return taken


class SessionHost:
    """The handler of `python -m kernelwright.batch.eval_pool`: one session, opened by the first
    task (`open`), then `evaluate` (one candidate), `wait_ready`, `baseline_ms`; each answered
    with one `reply`, or `raised` (a KernelwrightError, which the parent raises again)."""

    def __init__(self) -> None:
        self.session: EvalSession | None = None
        self.gate: TimingGate | None = None

    def __call__(self, init: dict[str, Any], slot: Slot, task: dict[str, Any], emit: Emit) -> None:
        try:
            emit({"type": "reply", **self._answer(init, slot, task)})
        except KernelwrightError as exc:
            kind = next(c.__name__ for c in type(exc).__mro__ if getattr(errors, c.__name__, None) is c)
            emit({"type": "raised", "kind": kind, "message": str(exc), "hint": exc.hint})

    def _answer(self, init: dict[str, Any], slot: Slot, task: dict[str, Any]) -> dict[str, Any]:
        op = task.get("op")
        if op == "open":
            self._open(init, slot)
            return {}
        session = self.session
        assert session is not None and self.gate is not None, "the first task opens the session"
        if op == "evaluate":
            start = time.time()
            result = session.evaluate([Path(task["candidate"])])[0]
            result.hardware["slot"] = slot.label
            return {"result": result.model_dump(mode="json"), "span": [start, time.time()], "quiet": self.gate.take()}
        if op == "wait_ready":
            return {"ok": session.wait_ready(float(task.get("timeout_s", 600.0)))}
        if op == "baseline_ms":
            return {"figures": session.baseline_ms()}
        raise ValueError(f"unknown evaluation pool task {op!r}")

    def _open(self, init: dict[str, Any], slot: Slot) -> None:
        spec = JudgeSpec.model_validate(init["spec"])
        problem = load_problem_file(Path(init["problem"]), builtin=bool(init.get("builtin")))
        if problem.sha256 != init["problem_sha256"]:
            raise errors.ProblemError(f"{problem.path} changed after the run started")
        gate = init.get("gate")
        self.gate = TimingGate(Path(gate) if gate else None)
        live.set_quiet_gate(self.gate)
        out_dir = Path(init["out_dir"]) if init.get("out_dir") else None
        self.session = EvalSession(problem, spec.eval_options(slot, out_dir=out_dir), warm=bool(init.get("warm")))

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


if __name__ == "__main__":
    host = SessionHost()
    try:
        serve(host)
    finally:
        host.close()
