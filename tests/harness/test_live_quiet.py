"""A timing phase runs on quiet cores: every other live worker (and what it started) is stopped
while it times, and carries on afterwards."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelwright.harness.workers import live

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads process trees from /proc")

RUNNING = {"S", "R", "D"}
# Starts a child that starts a grandchild, both sleeping.
NESTED = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', \"import subprocess, time; subprocess.Popen(['sleep', '30']); time.sleep(30)\"]); "
    "time.sleep(30)"
)
# Starts a sleeping child for every line read, and prints its pid.
FORK_ON_LINE = (
    "import subprocess, sys\nfor _ in sys.stdin:\n    print(subprocess.Popen(['sleep', '30']).pid, flush=True)\n"
)
# Starts a short-lived child every few milliseconds for about two seconds.
FORK_IN_LOOP = (
    "import subprocess, time\n"
    "for _ in range(400):\n"
    "    subprocess.Popen(['sleep', '1'])\n"
    "    time.sleep(0.005)\n"
    "time.sleep(30)\n"
)


@dataclass(eq=False)
class _Worker:
    pid: int
    pausable: bool = True

    def kill(self) -> None:
        return None


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2 :].split()[0]


def _wait_state(pid: int, want: set[str], timeout_s: float = 5.0) -> str:
    deadline = time.monotonic() + timeout_s
    state = _state(pid)
    while state not in want and time.monotonic() < deadline:
        time.sleep(0.01)
        state = _state(pid)
    return state


def _stop_pending(pid: int) -> bool:
    """SIGSTOP is pending for `pid` (it stops as soon as it leaves the kernel: a process in disk
    wait, state D, on a machine busy with I/O, runs no code of its own meanwhile)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    pending = 0
    for line in status.splitlines():
        if line.startswith(("SigPnd:", "ShdPnd:")):
            pending |= int(line.split()[1], 16)
    return bool(pending & (1 << (signal.SIGSTOP - 1)))


def _stopped(pid: int, timeout_s: float = 5.0) -> bool:
    """`pid` is stopped, or about to be: still in disk wait after `timeout_s` (a loaded machine,
    CI's two cores importing modules) with SIGSTOP pending, so it runs no code of its own before
    it stops. A process that was never sent SIGSTOP is neither."""
    state = _wait_state(pid, {"T"}, timeout_s)
    return state == "T" or (state == "D" and _stop_pending(pid))


def _wait_tree(pid: int, size: int, timeout_s: float = 10.0) -> list[int]:
    """`pid`'s descendants once there are `size` of them."""
    deadline = time.monotonic() + timeout_s
    while len(found := live.descendants(pid)) < size and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(found) >= size, found
    return found


@pytest.fixture(autouse=True)
def _own_live_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only this test's workers are live: none left registered by an earlier test is paused here."""
    monkeypatch.setattr(live, "_LIVE", set())


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes started by a test (registered with `live` by it), ended with their trees after."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        live.kill_tree(proc.pid)
        proc.wait(timeout=10)


def _start(procs: list[subprocess.Popen[str]], code: str | None = None, **kwargs: object) -> _Worker:
    argv = ["sleep", "30"] if code is None else [sys.executable, "-c", code]
    proc: subprocess.Popen[str] = subprocess.Popen(argv, start_new_session=True, text=True, **kwargs)  # type: ignore[call-overload]
    procs.append(proc)
    worker = _Worker(proc.pid)
    live.add(worker)
    return worker


def test_other_workers_and_their_children_are_stopped_while_one_times() -> None:
    # A "builder" with a compiler-like child, and the worker that times.
    builder = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen(['sleep', '30']); time.sleep(30)"],
        start_new_session=True,
    )
    timing = subprocess.Popen(["sleep", "30"], start_new_session=True)
    busy, keep = _Worker(builder.pid), _Worker(timing.pid)
    live.add(busy)
    live.add(keep)
    try:
        deadline = time.monotonic() + 5
        while not live.descendants(builder.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        [child] = live.descendants(builder.pid)
        with live.quiet(keep=keep) as paused:
            assert paused == 1
            for pid in (builder.pid, child):
                assert _stopped(pid), (pid, _state(pid))
            assert _state(timing.pid) != "T"
        assert _wait_state(builder.pid, {"S", "R"}) in {"S", "R"}
        assert _wait_state(child, {"S", "R"}) in {"S", "R"}
    finally:
        live.discard(busy)
        live.discard(keep)
        for proc in (builder, timing):
            live.kill_tree(proc.pid)
            proc.wait(timeout=10)


def test_a_whole_tree_is_stopped_down_to_a_grandchild_started_just_before_and_all_carry_on_after(
    spawn: list[subprocess.Popen[str]],
) -> None:
    worker = _start(spawn, NESTED)
    tree = [worker.pid, *_wait_tree(worker.pid, 2)]  # the grandchild is there: the phase begins at once
    with live.quiet(keep=None) as paused:
        assert paused == 1
        assert {pid: _stopped(pid) for pid in tree} == dict.fromkeys(tree, True)
    assert all(_wait_state(pid, RUNNING) in RUNNING for pid in tree)


def test_a_child_started_between_the_first_read_of_proc_and_the_stop_is_stopped_too(
    spawn: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = _start(spawn, FORK_ON_LINE, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    forker = spawn[-1]
    assert forker.stdin is not None and forker.stdout is not None
    real = live._children_map
    late: list[int] = []

    def stale_then_fork() -> dict[int, list[int]]:
        children = real()
        if not late:  # the tree forks right after the first read, before it is stopped
            forker.stdin.write("fork\n")  # type: ignore[union-attr]
            forker.stdin.flush()  # type: ignore[union-attr]
            late.append(int(forker.stdout.readline()))  # type: ignore[union-attr]
            assert late[0] not in children.get(worker.pid, [])
        return children

    monkeypatch.setattr(live, "_children_map", stale_then_fork)
    with live.quiet(keep=None):
        assert _stopped(worker.pid)
        assert _stopped(late[0])
    assert _wait_state(late[0], RUNNING) in RUNNING
    assert _wait_state(worker.pid, RUNNING) in RUNNING


def test_a_tree_forking_in_a_loop_is_stopped_whole(spawn: list[subprocess.Popen[str]]) -> None:
    worker = _start(spawn, FORK_IN_LOOP)
    _wait_tree(worker.pid, 5)
    with live.quiet(keep=None):
        time.sleep(0.05)  # nothing in the tree runs: a fresh read finds every process below stopped
        tree = [worker.pid, *live.descendants(worker.pid)]
        states = {pid: _wait_state(pid, {"T", "Z"}, 2.0) for pid in tree}
        # still in disk wait after 2 s (a loaded machine): stopped on its way out, or not stopped at all
        states = {pid: "D+SIGSTOP" if s == "D" and _stop_pending(pid) else s for pid, s in states.items()}
        assert set(states.values()) <= {"T", "Z", "D+SIGSTOP"}, states
    assert _wait_state(worker.pid, RUNNING) in RUNNING


def test_one_phase_reads_proc_twice_however_many_workers_and_not_at_all_to_resume(
    spawn: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = live._children_map
    reads: list[int] = []

    def counted() -> dict[int, list[int]]:
        reads.append(1)
        return real()

    monkeypatch.setattr(live, "_children_map", counted)
    workers = [_start(spawn) for _ in range(5)]
    keep = workers[-1]
    with live.quiet(keep=keep) as paused:
        assert paused == 4
        assert len(reads) <= 2
        entered = len(reads)
        assert all(_stopped(w.pid) for w in workers[:-1])
        assert _state(keep.pid) != "T"
    assert len(reads) == entered  # exactly the processes stopped are continued
    assert all(_wait_state(w.pid, RUNNING) in RUNNING for w in workers)


def test_a_worker_that_is_not_pausable_carries_on(spawn: list[subprocess.Popen[str]]) -> None:
    paused, builder = _start(spawn), _start(spawn)
    builder.pausable = False
    with live.quiet(keep=None):
        assert _stopped(paused.pid)
        time.sleep(0.05)
        assert _state(builder.pid) in RUNNING


def test_an_error_in_the_phase_or_while_stopping_continues_everything_stopped(
    monkeypatch: pytest.MonkeyPatch, spawn: list[subprocess.Popen[str]]
) -> None:
    worker = _start(spawn, NESTED)
    tree = [worker.pid, *_wait_tree(worker.pid, 2)]
    with pytest.raises(RuntimeError), live.quiet(keep=None):
        assert all(_stopped(pid) for pid in tree)
        raise RuntimeError("measurement failed")
    assert all(_wait_state(pid, RUNNING) in RUNNING for pid in tree)

    real = live._children_map
    reads: list[int] = []

    def interrupted_on_rescan() -> dict[int, list[int]]:
        reads.append(1)
        if len(reads) > 1:
            assert all(_stopped(pid) for pid in tree)  # stopped by the first round
            raise KeyboardInterrupt
        return real()

    with monkeypatch.context() as patch:
        patch.setattr(live, "_children_map", interrupted_on_rescan)
        with pytest.raises(KeyboardInterrupt), live.quiet(keep=None):
            pytest.fail("the phase never began")
    assert all(_wait_state(pid, RUNNING) in RUNNING for pid in tree)


def test_overlapping_phases_leave_everything_running_once_both_end(spawn: list[subprocess.Popen[str]]) -> None:
    first, second = _start(spawn, NESTED), _start(spawn)
    tree = [first.pid, *_wait_tree(first.pid, 2), second.pid]
    with live.quiet(keep=second):
        assert all(_stopped(pid) for pid in tree[:-1])
        with live.quiet(keep=first):
            assert _stopped(second.pid)
        assert _wait_state(second.pid, RUNNING) in RUNNING
    assert all(_wait_state(pid, RUNNING) in RUNNING for pid in tree)


def test_kill_tree_ends_a_whole_tree(spawn: list[subprocess.Popen[str]]) -> None:
    worker = _start(spawn, NESTED)
    tree = [worker.pid, *_wait_tree(worker.pid, 2)]
    live.kill_tree(worker.pid)
    spawn[-1].wait(timeout=10)

    def gone(pid: int) -> bool:
        try:
            return _state(pid) == "Z"  # the grandchild's parent died unreaped: pid 1 or a subreaper reaps it
        except OSError:
            return True

    deadline = time.monotonic() + 5
    while not all(gone(pid) for pid in tree[1:]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(gone(pid) for pid in tree[1:])
