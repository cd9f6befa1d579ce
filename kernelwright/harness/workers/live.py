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
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Protocol


class Killable(Protocol):
    def kill(self) -> None: ...


_LIVE: set[Killable] = set()
_LIVE_LOCK = threading.Lock()
_INTERRUPTED = threading.Event()  # set by interrupt(): no new worker starts
_GATE: Callable[[], AbstractContextManager[object]] | None = None  # held by every quiet phase (set_quiet_gate)


def add(worker: Killable) -> None:
    with _LIVE_LOCK:
        _LIVE.add(worker)


def discard(worker: Killable) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(worker)


def interrupted() -> bool:
    return _INTERRUPTED.is_set()


def _children_map() -> dict[int, list[int]]:
    """ppid -> pids, read from /proc (empty where there is no /proc): one scan of every process."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return children
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone since the listing
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")"
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    return children


def _tree(roots: Iterable[int], children: Mapping[int, list[int]]) -> list[int]:
    """`roots` and every process below them in `children`, each once."""
    found: list[int] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid not in seen:
            seen.add(pid)
            found.append(pid)
            stack.extend(children.get(pid, []))
    return found


def state(pid: int) -> str:
    """A process's state letter from /proc ("R", "S", "T" for stopped, ...); "" when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return ""
    return stat[stat.rfind(")") + 2 :][:1]


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, grandchildren, ...), from /proc."""
    return _tree([pid], _children_map())[1:]


_STOP_SCANS = 4  # /proc reads at most per `stop_trees`: the second finds nothing new unless a fork raced the stops


def stop_trees(roots: Collection[int], into: list[int] | None = None) -> list[int]:
    """SIGSTOP every process in `roots` and below them, however many trees: /proc is read once to
    find them all, then again after the stops until a read finds nothing new (a stopped process
    forks no more, but a child it forked just before runs on, unstopped, until found). Returns the
    pids signalled (to `cont` later), appended to `into` as they go, before each is signalled, so
    a caller that is interrupted part way still knows every process it may have stopped."""
    stopped = [] if into is None else into
    if not roots:
        return stopped
    seen: set[int] = set()
    for _ in range(_STOP_SCANS):
        new = [pid for pid in _tree(roots, _children_map()) if pid not in seen]
        if not new:
            break
        seen.update(new)
        for target in new:
            stopped.append(target)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(target, signal.SIGSTOP)
    return stopped


def cont(pids: Iterable[int]) -> None:
    """SIGCONT exactly `pids` (what `stop_trees` returned; gone ones are skipped): no /proc read."""
    for target in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(target, signal.SIGCONT)


def kill_tree(pid: int) -> None:
    """SIGKILL `pid`, its process group and every descendant, wherever their process groups are.
    The tree is stopped first so nothing forks or is re-parented while it is being collected."""
    tree = stop_trees([pid])
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


def set_quiet_gate(gate: Callable[[], AbstractContextManager[object]] | None) -> None:
    """Have every quiet phase of this process (`quiet`) enter `gate()` first and leave it last
    (None: none). `quiet` pauses only this process's workers; sessions in other processes that
    share its cores (the agent's evaluation pool on the CPU, `batch/eval_pool.py`) pass a gate
    they all share, so their timing phases run one at a time."""
    global _GATE
    _GATE = gate


@contextlib.contextmanager
def quiet(keep: object) -> Iterator[int]:
    """Stop every other live worker of this process, with everything it started (compilers, a
    spare worker preparing its baselines), while `keep` times: a timing phase runs on quiet cores
    and a quiet device. They carry on afterwards; yields how many were paused. A worker whose
    `pausable` is False (a compiler of the trusted build step on a GPU host: CPU work only, on
    cores of its own) carries on. All the trees are found together (`stop_trees`: two reads of
    /proc however many workers), and exactly the processes stopped are continued at the end, on
    an error or interrupt too, without reading /proc again. Phases that overlap each continue, at
    their end, everything they stopped, whether or not another phase stopped it too."""
    gate = _GATE
    with gate() if gate is not None else contextlib.nullcontext():
        with _LIVE_LOCK:
            workers = [w for w in _LIVE if w is not keep and getattr(w, "pausable", True)]
        pids = [pid for w in workers if isinstance(pid := getattr(w, "pid", None), int)]
        alone = {pid for w in workers if getattr(w, "alone", False) and isinstance(pid := getattr(w, "pid", None), int)}
        stopped: list[int] = []
        try:
            for pid in alone:
                stopped.append(pid)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGSTOP)
            stop_trees([pid for pid in pids if pid not in alone], into=stopped)  # a fork server: not its children
            yield len(pids) - len(alone)
        finally:
            cont(stopped)
