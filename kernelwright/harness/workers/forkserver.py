"""Workers forked from a process that has already imported torch (`zygote.py`), instead of each
one importing it afresh: on a 2-core CPU a worker's start was ~6 s of imports and torch.compile's
first use before any candidate code ran, in every candidate's process.

One fork server per environment a worker starts with (less what is the worker's own: HOME,
TMPDIR, its extension and CUDA caches, its build step's descriptors), since some of it is read
once, at import (OMP_NUM_THREADS by OpenMP, inductor's settings). A server starts when the first
worker of its environment is asked for and lives while this process does; at most
`MAX_SERVERS` at once (each holds torch in memory, ~0.5 GB), the least recently used idle one
giving way. Whatever goes wrong with a server (it cannot start, it died) is logged and the
worker is started the old way, so forking only ever saves time.

`KERNELWRIGHT_FORKSERVER`: "all" (the default since 2026-12-02) forks every worker and builder;
"cpu" forks every process that times nothing (a build step's builder; a worker that only builds,
on a GPU job too) and CPU workers, while CUDA workers that time start afresh (the default until
the false-rejection benchmark had run with them forked: #28's 418 GPU figures were taken afresh,
the forked run on an H200 found 0 false rejections in 68, docs/harness.md). A forked CUDA
process starts the driver after the fork; on a GPU host the server only imports (`zygote.py`).
A CPU job's builders come from its worker's server; a GPU job's from a server of builders alone
(`apart`: a timing phase does not stop it, as it does not stop those builders; never waited for
while it starts). "0" forks nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import logging
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from kernelwright.harness.workers import live

log = logging.getLogger(__name__)

FORK_VAR = "KERNELWRIGHT_FORKSERVER"
ZYGOTE_MODULE = "kernelwright.harness.workers.zygote"
# A worker's own entries of its environment (`process.py`, `building/link.py`): never a reason
# for another server.
OWN_VARS = frozenset({"HOME", "TMPDIR", "TORCH_EXTENSIONS_DIR", "CUDA_CACHE_PATH", "KERNELWRIGHT_BUILD_FDS"})
MAX_SERVERS = 3  # a CPU job's, a GPU job's workers' and its builders' (`apart`)
START_TIMEOUT_S = 300.0  # imports and one compile; a cold inductor cache on a slow disk included
REPLY_TIMEOUT_S = 30.0
T = TypeVar("T")
_LOST = 1  # the exit code of a child whose server died before reporting it


class ForkUnavailable(RuntimeError):
    """The server cannot fork now (it failed to start, or died): start the worker the old way."""


def forking_for(device: str, *, times: bool = True) -> bool:
    """Whether a process for a job on `device` is forked (`KERNELWRIGHT_FORKSERVER`, Linux only):
    every one unless forking is off, except a CUDA worker that times under "cpu"."""
    if not sys.platform.startswith("linux"):
        return False
    mode = _mode(os.environ.get(FORK_VAR, ""))
    if mode == "0":
        return False
    return mode == "all" or device == "cpu" or not times


_OFF = frozenset({"0", "off", "no", "false", "never"})


@functools.cache
def _mode(value: str) -> str:
    """The switch's value as "all", "cpu" or "0"; one it does not know is said once in the log
    and read as the default."""
    mode = value.strip().lower() or "all"
    if mode in _OFF:
        return "0"
    if mode not in ("all", "cpu"):
        log.warning("%s=%r is none of all, cpu, 0: read as all (the default)", FORK_VAR, value)
        return "all"
    return mode


class _Launcher:
    """A thread made when this module is imported (by the main thread, before any thread that
    lowers its priority or pins itself to build cores exists), that starts every server: a
    process inherits the nice value and cores of the thread that starts it, and a server's
    children could not undo a higher nice value than the caller's."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[tuple[bool, Any]]]] = queue.Queue()
        threading.Thread(target=self._serve, daemon=True, name="kernelwright-forkserver-launcher").start()

    def _serve(self) -> None:
        while True:
            job, answer = self._jobs.get()
            try:
                answer.put((True, job()))
            except BaseException as exc:  # handed back to the caller
                answer.put((False, exc))

    def run(self, job: Callable[[], T]) -> T:
        answer: queue.Queue[tuple[bool, Any]] = queue.Queue()
        self._jobs.put((job, answer))
        ok, value = answer.get()
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]


_LAUNCHER = _Launcher()


def _caller_placement() -> tuple[list[int], int]:
    """The calling thread's cores and nice value (Linux keeps both per thread): what a process
    it started with Popen would have had."""
    return sorted(os.sched_getaffinity(0)), os.getpriority(os.PRIO_PROCESS, 0)


class ForkServer:
    """One zygote process and the line to it; `fork` starts a worker from it. It is a live
    process of this harness (`live.py`): a timing phase stops it (not its children, the workers,
    which the phase pauses or keeps itself), so no worker is forked beside a measurement."""

    alone = True  # `live.quiet` stops this process, not the tree below it

    def __init__(self, env: dict[str, str], apart: bool = False) -> None:
        """`apart`: a server of builders that timing phases let carry on (a GPU job's,
        `server_for(apart=True)`): no phase stops it either, and it is started from the calling
        thread, on that thread's cores and at its nice value, as a builder started afresh from
        there would be (a worker's server is started by `_LAUNCHER`)."""
        self.pausable = not apart
        self.folder = Path(tempfile.mkdtemp(prefix="kernelwright-zygote-"))
        (self.folder / "home").mkdir()
        (self.folder / "tmp").mkdir()
        env = dict(env) | {"HOME": str(self.folder / "home"), "TMPDIR": str(self.folder / "tmp")}
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log_path = self.folder / "zygote.log"
        launch: Callable[[Callable[[], subprocess.Popen[bytes]]], subprocess.Popen[bytes]]
        launch = (lambda start: start()) if apart else _LAUNCHER.run
        with open(self.log_path, "ab") as log_file:
            self.proc = launch(
                lambda: subprocess.Popen(
                    [sys.executable, "-m", ZYGOTE_MODULE, str(theirs.fileno())],
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=log_file,
                    env=env,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                )
            )
        theirs.close()
        self.pid = self.proc.pid
        self._sock = ours
        self._send_lock = threading.Lock()
        self._fork_lock = threading.Lock()  # one fork request at a time: replies come in order
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._ready = threading.Event()
        self._state = threading.Condition()
        self._codes: dict[int, int] = {}  # child pid -> exit code, once it ended
        self._children: set[int] = set()
        self.dead: str | None = None  # why the server is unusable
        self.last_used = time.monotonic()
        threading.Thread(target=self._read, daemon=True, name="kernelwright-forkserver").start()
        live.add(self)

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            op = message.get("op")
            if op == "ready":
                self._ready.set()
            elif op == "unusable":
                self.dead = f"it could not start: {message.get('error', '')}"
                break
            elif op in ("forked", "failed"):
                self._replies.put(message)
            elif op == "exit":
                pid = int(message["pid"])
                with self._state:
                    self._codes[pid] = int(message["code"])
                    self._state.notify_all()
                # At exit `stop()` may close the line between the report and this answer: the
                # server is ending then, and the child is reaped by whoever inherits it.
                with contextlib.suppress(OSError):
                    self._send({"op": "reap", "pid": pid})
        with self._state:
            self.dead = self.dead or "its process ended"
            for pid in self._children:
                self._codes.setdefault(pid, _LOST)
            self._state.notify_all()
        self._ready.set()
        self._replies.put({"op": "failed", "error": self.dead})

    def _send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        with self._send_lock:
            if fds:
                socket.send_fds(self._sock, [json.dumps(message).encode()], fds)
            else:
                self._sock.send(json.dumps(message).encode())

    def ready(self, timeout: float = 0.0) -> bool:
        """Whether the server has finished starting (or has died trying), waiting up to `timeout`."""
        return self._ready.wait(timeout)

    def fork(
        self, argv: list[str], env: dict[str, str], fds: list[int], targets: list[int], entry: str = "worker"
    ) -> ForkedProcess:
        """A process running `entry`'s main (`zygote.ENTRIES`: a worker, or a builder of the
        trusted build step) with `argv`, `env` and the descriptors `fds` at the numbers
        `targets` (0, 1, 2 first); raises ForkUnavailable."""
        if not self._patiently(self._ready.wait, START_TIMEOUT_S) or self.dead is not None:
            raise ForkUnavailable(self.dead or f"it did not start within {START_TIMEOUT_S:.0f} s")
        self.last_used = time.monotonic()
        cpus, nice = _caller_placement()
        request: dict[str, Any] = {"op": "fork", "argv": argv, "env": env, "cwd": os.getcwd(), "targets": targets}
        request |= {"cpus": cpus, "nice": nice, "entry": entry}
        with self._fork_lock:
            try:
                self._send(request, fds)
            except OSError as exc:
                raise ForkUnavailable(f"its line broke: {exc}") from exc
            replies: list[dict[str, Any]] = []

            def answered(timeout: float) -> bool:
                with contextlib.suppress(queue.Empty):
                    replies.append(self._replies.get(timeout=timeout))
                return bool(replies)

            if not self._patiently(answered, REPLY_TIMEOUT_S):
                raise ForkUnavailable(f"no answer within {REPLY_TIMEOUT_S:.0f} s")
            reply = replies[0]
            if reply.get("op") != "forked":
                raise ForkUnavailable(str(reply.get("error", "the fork failed")))
            pid = int(reply["pid"])
            with self._state:
                if self.dead is not None:  # it died right after forking: the child is on its own
                    self._codes.setdefault(pid, _LOST)
                self._children.add(pid)
        return ForkedProcess(self, pid)

    def _patiently(self, wait: Callable[[float], bool], limit_s: float) -> bool:
        """`wait(slice)` until it is True, for at most `limit_s` of the server's running time: a
        timing phase that stops it (`live.quiet`) does not count. An interrupt ends the wait."""
        waited = 0.0
        while waited < limit_s:
            if live.interrupted():
                raise KeyboardInterrupt("interrupted: no new worker starts")
            start = time.monotonic()
            if wait(0.5):
                return True
            if live.state(self.pid) not in ("T", "t"):
                waited += time.monotonic() - start
        return False

    def kill(self) -> None:
        """An interrupt ends the workers (each a live process of its own), not their server."""

    def returncode(self, pid: int) -> int | None:
        with self._state:
            return self._codes.get(pid)

    def wait(self, pid: int, timeout: float | None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._state:
            while pid not in self._codes:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise subprocess.TimeoutExpired(f"forked worker {pid}", timeout or 0.0)
                self._state.wait(remaining)
            return self._codes[pid]

    def busy(self) -> bool:
        with self._state:
            return any(pid not in self._codes for pid in self._children)

    def stop(self) -> None:
        """End the server (its children, if any, keep running and end with their stdin)."""
        live.discard(self)
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        shutil.rmtree(self.folder, ignore_errors=True)

    def log_tail(self, limit: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""


class ForkedProcess:
    """What `WorkerProcess` needs of a `subprocess.Popen`, for a worker forked by a server."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server = server
        self.pid = pid
        self.stdin: IO[bytes] | None = None
        self.stdout: IO[bytes] | None = None

    @property
    def returncode(self) -> int | None:
        return self.server.returncode(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        return self.server.wait(self.pid, timeout)


_Key = tuple[bool, tuple[tuple[str, str], ...]]  # (apart, the environment less the worker's own)
_SERVERS: dict[_Key, ForkServer] = {}
_FAILED: set[_Key] = set()  # servers that could not start
_LOCK = threading.Lock()


def _key(env: dict[str, str], apart: bool = False) -> _Key:
    return apart, tuple(sorted((k, v) for k, v in env.items() if k not in OWN_VARS))


def server_for(env: dict[str, str], apart: bool = False) -> ForkServer | None:
    """The running server for `env` (started now if there is none); None where that server failed
    before, or every server slot holds a busy server. `apart`: a server of its own that a timing
    phase does not stop, for builders that carry on through timing phases (a GPU job's)."""
    key = _key(env, apart)
    with _LOCK:
        if key in _FAILED:
            return None
        server = _SERVERS.get(key)
        if server is not None and server.dead is None:
            return server
        if server is not None:
            _SERVERS.pop(key)
        if len(_SERVERS) >= MAX_SERVERS:
            idle = [k for k, s in _SERVERS.items() if not s.busy()]
            if not idle:
                return None
            oldest = min(idle, key=lambda k: _SERVERS[k].last_used)
            _SERVERS.pop(oldest).stop()
        server = ForkServer(dict(key[1]), apart=apart)
        _SERVERS[key] = server
        return server


def spawn(
    argv: list[str], env: dict[str, str], fds: list[int], targets: list[int], entry: str = "worker", apart: bool = False
) -> ForkedProcess | None:
    """Fork a worker (or another `entry`) from the server for `env` (`apart`: see `server_for`);
    None when it cannot (start it the old way). A server apart is never waited for: while it is
    still starting, its builder starts afresh at once (its own imports cost about what the wait
    would), and later builders are forked once it is ready."""
    key = _key(env, apart)
    server = server_for(env, apart)
    if server is None:
        return None
    if apart and not server.ready():
        log.debug("the builders' server is still starting; this builder starts afresh")
        return None
    try:
        return server.fork(argv, env, fds, targets, entry)
    except ForkUnavailable as exc:
        log.warning("the fork server cannot start workers (%s); starting them afresh\n%s", exc, server.log_tail())
        with _LOCK:
            if _SERVERS.get(key) is server:
                _SERVERS.pop(key)
            _FAILED.add(key)
        server.stop()
        return None


@atexit.register
def stop_all() -> None:
    """End every server (at exit, and for tests)."""
    with _LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for server in servers:
        server.stop()
