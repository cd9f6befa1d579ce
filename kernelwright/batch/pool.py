"""Local batch workers: one subprocess per `Slot` (pinned to its GPU with CUDA_VISIBLE_DEVICES
and to its share of the cores), fed tasks (a problem each) from a shared queue.

Protocol, JSON lines both ways: the parent sends `init` (the slot and the batch's settings), then
`task`s, then `stop`; the worker answers `ready`, then per task one `task_started`, any number of
`status` and `result` messages and one `task_done`. Everything else a worker prints goes to its
log. A worker whose parent is gone (its stdin closes: the parent was killed) ends what it started
and exits; a worker that dies mid-task is reported (`task_failed`) and replaced for the remaining
tasks.

Looking ahead: a worker whose `ready` says `"ahead": 1` (judge workers: they open the next
problem's session while judging this one) is sent one more task as it starts each task, or told
there is none (`{"type": "no_ahead"}`); both carry `"after": <the started task's id>`. It is sent
only while the shared queue holds a task for every slot (so, but for the batch's last tasks, no
other slot goes idle for it). A task a worker held but had not started when it died goes back to
the queue, not reported: only the task it was running owes retried lines.

`serve(handler)` is the worker's side: `python -m kernelwright.batch.worker` (judge) and
`python -m kernelwright.agent.batch` (optimise) are both `serve` with their own handler.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Protocol

from kernelwright.batch.spec import Slot
from kernelwright.harness.workers import live

log = logging.getLogger(__name__)

Message = dict[str, Any]
Emit = Callable[[Message], None]
Handler = Callable[[dict[str, Any], Slot, dict[str, Any], Emit], None]
OnMessage = Callable[[Slot, Message], None]
MakeWorker = Callable[["Backlog"], Handler]
"""Builds a worker's handler around its inbox (a handler that looks ahead, `ahead.JudgeWorker`)."""

MAX_RESTARTS = 2  # per slot: a worker that keeps dying is not started again
READY_TIMEOUT_S = 300.0


class PoolWorker(Protocol):
    """What the pool drives: a worker subprocess here (`_Worker`), a Ray actor (`ray_runner`)."""

    def send(self, message: Message) -> None: ...

    def messages(self) -> Iterator[Message]: ...

    def wait(self, timeout: float) -> int | None: ...

    def log_tail(self, limit: int = 2000) -> str: ...

    def kill(self) -> None: ...

    def close(self) -> None: ...


class _Worker:
    """One worker subprocess, registered with `live` so Ctrl-C ends it and everything it started."""

    def __init__(self, module: str, slot: Slot, init: dict[str, Any], log_path: Path, env: dict[str, str]) -> None:
        if live.interrupted():
            raise KeyboardInterrupt("interrupted: no new worker starts")
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 (closed in kill())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, **env, **slot.env(), "PYTHONUNBUFFERED": "1"},
            start_new_session=True,  # Ctrl-C reaches the parent only; it ends the worker's whole tree
        )
        self.pid = self.proc.pid
        live.add(self)
        assert self.proc.stdout is not None
        self._lines: Iterator[bytes] = iter(self.proc.stdout)
        self.send({"type": "init", "slot": slot.model_dump(mode="json"), "init": init})

    def send(self, message: Message) -> None:
        if self.proc.stdin is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()

    def messages(self) -> Iterator[Message]:
        """The worker's protocol messages until its stdout closes."""
        for raw in self._lines:
            try:
                message = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if isinstance(message, dict):
                yield message

    def wait(self, timeout: float) -> int | None:
        """Its exit code once it has exited, or None if it is still running after `timeout`."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def log_tail(self, limit: int = 2000) -> str:
        self._log.flush()
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-limit:].decode(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            live.kill_tree(self.proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        live.discard(self)
        if not self._log.closed:
            self._log.close()

    def close(self) -> None:
        self.send({"type": "stop"})
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=15)
        self.kill()


class LocalPool:
    """Run tasks on local worker subprocesses, one per slot; `on_message` sees every message
    (called from the slots' threads: it must be thread-safe)."""

    def __init__(
        self, module: str, slots: list[Slot], init: dict[str, Any], log_dir: Path, env: dict[str, str] | None = None
    ) -> None:
        self.module, self.slots, self.init, self.log_dir = module, slots, init, log_dir
        self.env = dict(env or {})
        log_dir.mkdir(parents=True, exist_ok=True)

    def run(self, tasks: list[dict[str, Any]], on_message: OnMessage) -> None:
        todo: queue.Queue[dict[str, Any]] = queue.Queue()
        for task in tasks:
            todo.put(task)
        errors: list[BaseException] = []

        def drive(slot: Slot) -> None:
            try:
                self._drive(slot, todo, on_message)
            except BaseException as exc:  # re-raised in the caller's thread below
                errors.append(exc)

        threads = [threading.Thread(target=drive, args=(s,), daemon=True, name=s.label) for s in self.slots]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=0.5)  # short joins: Ctrl-C reaches the main thread promptly
        if errors:
            raise errors[0]
        while not todo.empty():  # every worker kept dying: what is left is reported, not silently dropped
            on_message(self.slots[0], {"type": "task_failed", "task": todo.get_nowait(), "detail": "no worker left"})

    def _start(self, slot: Slot) -> PoolWorker:
        return _Worker(self.module, slot, self.init, self.log_dir / f"worker-{slot.label}.log", self.env)

    def _drive(self, slot: Slot, todo: queue.Queue[dict[str, Any]], on_message: OnMessage) -> None:
        worker: PoolWorker | None = None
        restarts = 0
        ahead = 0  # tasks this worker wants beyond the one it runs (its `ready` says)
        sent: deque[dict[str, Any]] = deque()  # sent and not done, in order: the rest wait behind sent[0]
        running = False  # sent[0] has started (its `task_started` came)
        held = 0  # of `sent`, how many were sent ahead (the last ones)
        try:
            while True:
                if not sent:
                    try:
                        task = todo.get_nowait()
                    except queue.Empty:
                        return
                    if worker is None:
                        worker = self._start(slot)
                        ahead = 0
                    worker.send({"type": "task", "task": task})
                    sent.append(task)
                assert worker is not None  # tasks are only ever sent to a running worker
                finished = False
                for message in worker.messages():
                    kind = message.get("type")
                    if kind == "task_done":
                        if held == len(sent):  # the one done was itself sent ahead
                            held -= 1
                        sent.popleft()
                        finished, running = True, False
                        break
                    on_message(slot, message)
                    if kind == "ready":
                        ahead = max(0, int(message.get("ahead") or 0))
                    elif kind == "task_started":
                        running = True
                        if ahead and self._send_ahead(worker, sent, ahead, todo):
                            held += 1
                if finished:
                    continue
                if live.interrupted():
                    return
                code = worker.wait(timeout=10)  # its stdout closed: it is exiting, or stuck (then killed below)
                detail = worker.log_tail()
                worker.kill()
                worker = None
                if running or held < len(sent):  # the task it ran (or was given) owes retried lines
                    task = sent.popleft()
                    on_message(
                        slot, {"type": "task_failed", "task": task, "detail": f"worker exited ({code}): {detail}"}
                    )
                for waiting in sent:  # held ahead, never started: another worker takes it
                    todo.put(waiting)
                sent.clear()
                running, held = False, 0
                restarts += 1
                if restarts > MAX_RESTARTS:
                    log.error("worker %s died %d times; it takes no more tasks", slot.label, restarts)
                    return
        finally:
            if worker is not None:
                worker.close()

    def _send_ahead(
        self, worker: PoolWorker, sent: deque[dict[str, Any]], ahead: int, todo: queue.Queue[dict[str, Any]]
    ) -> bool:
        """Answer a worker that started `sent[0]`: the next task to hold ahead (True), or none."""
        after = sent[0].get("id")
        task = None
        if len(sent) <= ahead and todo.qsize() >= len(self.slots):  # leave a task for every other slot
            with contextlib.suppress(queue.Empty):
                task = todo.get_nowait()
        if task is None:
            worker.send({"type": "no_ahead", "after": after})
            return False
        worker.send({"type": "task", "task": task, "after": after})
        sent.append(task)
        return True


# ---- the worker's side -------------------------------------------------------------------------


def started(slot: Slot, task: dict[str, Any]) -> Message:
    """The message a worker sends as it takes a task."""
    return {
        "type": "task_started",
        "worker": slot.label,
        "problem": task.get("problem", ""),
        "count": len(task.get("stubs", {})),
    }


class Backlog:
    """A worker's side of the queue: what the parent sent and the worker has not started yet,
    in order, and the parent's answers about the task to hold ahead of each started one. `serve`
    fills and drains it; a handler that looks ahead asks `after(task_id)`."""

    def __init__(self) -> None:
        self._messages: deque[Message | None] = deque()  # None: the parent is done (stdin closed)
        self._answers: dict[Any, Message | None] = {}  # started task's id -> the task held behind it
        self._cond = threading.Condition()

    def put(self, message: Message | None) -> None:
        with self._cond:
            if message is not None and "after" in message:
                self._answers[message["after"]] = message.get("task") if message.get("type") == "task" else None
            if message is None or message.get("type") != "no_ahead":
                self._messages.append(message)
            self._cond.notify_all()

    def get(self) -> Message | None:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._messages))
            return self._messages.popleft()

    def after(self, task_id: Any, timeout_s: float = 10.0) -> dict[str, Any] | None:
        """The task this worker holds to run after `task_id` (None: there is none), once the
        parent has answered (it does as the task starts), or None after `timeout_s`."""
        with self._cond:
            self._cond.wait_for(lambda: task_id in self._answers, timeout_s)
            return self._answers.get(task_id)


def serve(handler: Handler, *, lookahead: Backlog | None = None) -> None:
    """A worker's main loop: JSON lines on the original stdout, everything else to stderr (its
    log). With `lookahead` (the handler holds it too), the worker asks to be sent one task ahead."""
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # prints of libraries land in the log, never in the protocol
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    lock = threading.Lock()
    stopping = threading.Event()
    inbox = lookahead if lookahead is not None else Backlog()

    def emit(message: Message) -> None:
        with lock:
            channel.write(json.dumps(message) + "\n")
            channel.flush()

    def read() -> None:
        for line in sys.stdin:
            with contextlib.suppress(json.JSONDecodeError):
                message = json.loads(line)
                if message.get("type") == "stop":
                    stopping.set()
                inbox.put(message)
        if not stopping.is_set():  # the parent is gone (killed): end what this worker started
            log.error("the batch's parent process is gone; stopping")
            live.interrupt()
            os._exit(130)
        inbox.put(None)

    threading.Thread(target=read, daemon=True).start()
    first = inbox.get()
    if first is None or first.get("type") != "init":
        return
    slot = Slot.model_validate(first["slot"])
    if slot.cores:
        os.sched_setaffinity(0, slot.cores)  # inherited by every process this worker starts
    work(handler, inbox, slot, first.get("init", {}), emit, lookahead=lookahead is not None)


def work(handler: Handler, inbox: Backlog, slot: Slot, init: dict[str, Any], emit: Emit, *, lookahead: bool) -> None:
    """A worker's tasks, whatever carries its messages (`serve`: JSON lines; `ray_runner`: a Ray
    actor): `ready`, then each task the inbox holds run by `handler`, until `stop` or the end."""
    emit({"type": "ready", "pid": os.getpid(), "worker": slot.label, "ahead": 1 if lookahead else 0})
    while True:
        message = inbox.get()
        if message is None or message.get("type") == "stop":
            break
        task = message.get("task", {})
        start = time.monotonic()
        emit(started(slot, task))
        try:
            handler(init, slot, task, emit)
        except Exception as exc:  # a bug in the handler: reported as this task's failure, the worker goes on
            log.error("task %s failed:\n%s", task.get("id"), traceback.format_exc())
            emit({"type": "task_failed", "task": task, "detail": f"{type(exc).__name__}: {exc}"})
        emit({"type": "task_done", "id": task.get("id"), "seconds": time.monotonic() - start})
