"""Every live worker process, so an interrupt can end them all with everything they started.

A worker's descendants are found through /proc and not only by process group: ninja puts each
compiler command in a process group of its own, so a group kill alone leaves `cc1plus` running
after the worker is gone. Nothing heavy is imported here: the CLI's Ctrl-C handler uses it from
start-up on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol


class Killable(Protocol):
    def kill(self) -> None: ...


_LIVE: set[Killable] = set()
_LIVE_LOCK = threading.Lock()
_INTERRUPTED = threading.Event()  # set by interrupt(): no new worker starts


def add(worker: Killable) -> None:
    with _LIVE_LOCK:
        _LIVE.add(worker)


def discard(worker: Killable) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(worker)


def interrupted() -> bool:
    return _INTERRUPTED.is_set()


def _children_map() -> dict[int, list[int]]:
    """ppid -> pids, read from /proc (empty where there is no /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            stat = entry.read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")"
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    return children


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, grandchildren, ...), from /proc."""
    children = _children_map()
    found: list[int] = []
    stack = list(children.get(pid, []))
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(children.get(child, []))
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL `pid`, its process group and every descendant, wherever their process groups are.
    The tree is stopped first so nothing forks or is re-parented while it is being collected."""
    tree = [pid, *descendants(pid)]
    for target in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(target, signal.SIGSTOP)
    tree += [p for p in descendants(pid) if p not in tree]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for target in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(target, signal.SIGKILL)


def interrupt() -> int:
    """Ctrl-C: end every live worker and everything it started, and refuse to start new ones
    (queued parallel builds included) until `resume()`; returns how many workers were ended."""
    _INTERRUPTED.set()
    with _LIVE_LOCK:
        workers = list(_LIVE)
    for worker in workers:
        worker.kill()
    return len(workers)


def resume() -> None:
    _INTERRUPTED.clear()


def signal_tree(pid: int, signum: int) -> None:
    """Send `signum` to `pid` and every process below it (gone ones are skipped)."""
    for target in [pid, *descendants(pid)]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(target, signum)


@contextlib.contextmanager
def quiet(keep: object) -> Iterator[int]:
    """Stop every other live worker of this process, with everything it started (compilers, a
    spare worker preparing its baselines), while `keep` times: a timing phase runs on quiet cores
    and a quiet device. They carry on afterwards; yields how many were paused. A worker whose
    `pausable` is False (a compiler of the trusted build step on a GPU host: CPU work only, on
    cores of its own) carries on."""
    with _LIVE_LOCK:
        workers = [w for w in _LIVE if w is not keep and getattr(w, "pausable", True)]
    pids: list[int] = [pid for w in workers if isinstance(pid := getattr(w, "pid", None), int)]
    for pid in pids:
        signal_tree(pid, signal.SIGSTOP)
    try:
        yield len(pids)
    finally:
        for pid in pids:
            signal_tree(pid, signal.SIGCONT)
