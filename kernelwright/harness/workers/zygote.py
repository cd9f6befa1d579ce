"""The fork server's own process: `python -m kernelwright.harness.workers.zygote FD`.

It imports what every worker imports (torch, torch.compile's machinery, the harness's worker
modules), compiles one throwaway function so torch.compile's lazily loaded parts are in memory
too (not on a host with a GPU: there torch.compile starts the CUDA driver), and then forks a
worker whenever the harness asks (`forkserver.py`). No candidate code ever runs here, and nothing
here starts the CUDA driver: a child starts it itself, after the fork.

A forked child turns into exactly what `python -m kernelwright.harness.workers.main JOB` would
be, before the worker's first line runs: its own session, the descriptors the harness sent at 0,
1, 2 (and the build step's at their numbers), every other descriptor closed (the line to this
process first of all: a candidate must never be able to ask for an unconfined process), the
job's environment and working folder. It then runs the worker's `main`, which confines itself
as it always does; the child is single-threaded after the fork, as the layers need. A builder of
the trusted build step (`building/broker.py`) is forked the same way (`"entry": "builder"`): it
runs `building/builder.py`'s `main`, which confines itself before it builds anything,
so a `load_inline` build skips the builder's import of torch.

Protocol: JSON messages on a SOCK_SEQPACKET socket, descriptors passed with them.
  harness -> here: {"op": "fork", "argv", "env", "cwd", "targets", "entry"} + fds; {"op": "reap", "pid"}
  here -> harness: {"op": "ready"} once; {"op": "forked", "pid"} or {"op": "failed", "error"} per
  fork; {"op": "exit", "pid", "code"} when a child ends (code as Popen's returncode: -N for a
  signal). A child is reaped only when the harness says so, so its pid is never reused while the
  harness may still signal it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import socket
import sys
import tempfile
import traceback
import warnings
from importlib import import_module
from typing import Any

MAX_FDS = 16
_HIGH_FD = 512  # where received descriptors wait before they are moved to their numbers


NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def _warm() -> None:
    """Import what a worker would import before its candidate runs; nothing that starts the CUDA
    driver, a compile pool or a profiler's threads."""
    # torch.compile asks whether CUDA is available; by default torch answers through the CUDA
    # runtime, which starts the driver (cuInit: its threads, and a driver a forked child could not
    # use). Through NVML (torch's own switch for processes that fork) it answers without the driver.
    # Set while warming only: a child gets the job's environment.
    ours = NVML_CHECK not in os.environ
    if ours:
        os.environ[NVML_CHECK] = "1"
    try:
        _import_and_compile()
    finally:
        if ours:
            os.environ.pop(NVML_CHECK, None)


def _import_and_compile() -> None:
    import torch
    import torch._dynamo
    import torch._inductor.compile_fx
    import torch.profiler
    import torch.utils.cpp_extension

    import kernelwright.harness.checks.dynamic
    import kernelwright.harness.checks.recorder
    import kernelwright.harness.checks.tamper
    import kernelwright.harness.fuzz
    import kernelwright.harness.outputs
    import kernelwright.harness.sandbox.audit
    import kernelwright.harness.sandbox.confine
    import kernelwright.harness.timing.run
    import kernelwright.harness.workers.candidate
    import kernelwright.harness.workers.main
    import kernelwright.harness.workers.messages
    import kernelwright.harness.workers.reference
    import kernelwright.problems
    import kernelwright.problems.candidate  # noqa: F401

    threads = _threads()
    # On a host with a GPU, torch.compile starts the CUDA driver even for a function on the CPU
    # (measured on an H200 host: its threads, and `torch.cuda.is_initialized()`): its first use is
    # left to the children there. Asked through NVML (above), the question starts nothing.
    if os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "") == "1" and not torch.cuda.is_available():
        # In-process compiles only (a pool of compile processes would not survive the fork), on
        # one thread: an OpenMP parallel region here would leave every child's OpenMP waiting
        # for threads it does not have (measured: the child hangs at its first parallel call).
        count = torch.get_num_threads()
        torch.set_num_threads(1)
        with torch.no_grad():
            torch.compile(lambda x: torch.relu(x) * 2.0 + 1.0)(torch.ones(8))
        torch.set_num_threads(count)
    if _threads() != threads:
        raise RuntimeError(
            f"warming up started {_threads() - threads} thread(s) ({_thread_names()}); a forked child would lack them"
        )
    if torch.cuda.is_initialized():  # never: a forked child could not start the driver again
        raise RuntimeError("the CUDA driver started in the fork server")


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _thread_names() -> str:
    """The process's threads by their kernel names, for the message that says why it cannot fork."""
    names = []
    for task in sorted(os.listdir("/proc/self/task")):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/comm") as comm:
            names.append(comm.read().strip())
    return ", ".join(names)


def _send(sock: socket.socket, **message: Any) -> None:
    sock.send(json.dumps(message).encode())


def _exit_code(info: os.waitid_result) -> int:
    if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        return -info.si_status
    return info.si_status


def _place(fds: list[int], targets: list[int]) -> None:
    """Descriptors `fds` at the numbers `targets`, inheritable as Popen's pass_fds makes them;
    every other descriptor closed."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _HIGH_FD) for fd in fds]
    for fd, target in zip(high, targets, strict=True):
        os.dup2(fd, target, inheritable=True)
    keep = set(targets)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):  # the listing's own descriptor, already gone
                os.close(fd)


def _place_like_the_caller(request: dict[str, Any], pid: int = 0) -> None:
    """Process `pid` (0: this one) on the cores and at the nice value of the harness thread that
    asked (a build ahead runs on its cores, at a lower priority), as a process it started itself
    would have been. Done by the server right after the fork and by the child again first thing."""
    with contextlib.suppress(OSError, KeyError, ValueError):
        os.sched_setaffinity(pid, [int(cpu) for cpu in request["cpus"]])
    with contextlib.suppress(OSError, KeyError, ValueError):
        nice = int(request["nice"])
        if nice != os.getpriority(os.PRIO_PROCESS, pid):
            os.setpriority(os.PRIO_PROCESS, pid, nice)  # lowering it needs privileges: else left as is


def _become_worker(request: dict[str, Any], fds: list[int]) -> int:
    """In the child: the worker's process, as if started afresh; returns its exit code."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    _place_like_the_caller(request)
    _place(fds, list(request["targets"]))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # TMPDIR is read again on next use
    if sys.path and sys.path[0] == _START_CWD:
        sys.path[0] = request["cwd"]
    sys.argv = list(request["argv"])
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's own stdin, for its life)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    entry = import_module(ENTRIES[request.get("entry", "worker")])
    return int(entry.main(sys.argv))


def _fork(sock: socket.socket, wake: tuple[int, int], request: dict[str, Any], fds: list[int]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid != 0:
        for fd in fds:
            os.close(fd)
        _place_like_the_caller(request, pid)  # before the harness hears of it: it sees it placed
        return pid
    code = 1
    try:
        sock.close()
        for fd in wake:
            os.close(fd)
        code = _become_worker(request, fds)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # what an exec'd worker would print before exiting with 1
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(sock: socket.socket) -> int:
    wake = os.pipe()
    os.set_blocking(wake[0], False)
    os.set_blocking(wake[1], False)
    signal.set_wakeup_fd(wake[1])
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: set[int] = set()  # forked, not yet reaped
    reported: set[int] = set()  # ended, the harness told
    _send(sock, op="ready")
    while True:
        readable, _, _ = select.select([sock.fileno(), wake[0]], [], [], 1.0)
        if wake[0] in readable:
            while True:
                try:
                    if not os.read(wake[0], 512):
                        break
                except BlockingIOError:
                    break
        if sock.fileno() in readable:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, MAX_FDS)
            if not data:
                return 0  # the harness is gone: its workers end with their stdin
            request = json.loads(data)
            if request["op"] == "fork":
                try:
                    pid = _fork(sock, wake, request, fds)
                except OSError as exc:
                    for fd in fds:
                        os.close(fd)
                    _send(sock, op="failed", error=str(exc))
                else:
                    children.add(pid)
                    _send(sock, op="forked", pid=pid)
            elif request["op"] == "reap":
                pid = int(request["pid"])
                if pid in reported:
                    os.waitpid(pid, 0)
                    children.discard(pid)
                    reported.discard(pid)
            elif request["op"] == "stop" and not children:
                return 0
        for pid in children - reported:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None and info.si_pid == pid:
                reported.add(pid)
                _send(sock, op="exit", pid=pid, code=_exit_code(info))


_START_CWD = os.getcwd()
# What a forked child may become: `python -m MODULE ARGV...` for these modules only (named, not
# imported: the builder's module sits in a layer above this one, and the zygote is only its launcher).
ENTRIES = {"worker": "kernelwright.harness.workers.main", "builder": "kernelwright.harness.building.builder"}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kernelwright.harness.workers.zygote FD", file=sys.stderr)
        return 2
    sock = socket.socket(fileno=int(argv[1]))
    os.set_inheritable(sock.fileno(), False)
    warnings.filterwarnings("ignore", message=".*multi-threaded, use of fork.*", category=DeprecationWarning)
    try:
        _warm()
    except Exception:
        traceback.print_exc()
        _send(sock, op="unusable", error=traceback.format_exc(limit=3)[-2000:])
        return 1
    return serve(sock)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
