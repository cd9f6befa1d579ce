"""A timing phase runs on quiet cores: every other live worker (and what it started) is stopped
while it times, and carries on afterwards."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kernelwright.harness.process import live


@dataclass(eq=False)
class _Worker:
    pid: int

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
            assert _wait_state(builder.pid, {"T"}) == "T"
            assert _wait_state(child, {"T"}) == "T"
            assert _state(timing.pid) != "T"
        assert _wait_state(builder.pid, {"S", "R"}) in {"S", "R"}
        assert _wait_state(child, {"S", "R"}) in {"S", "R"}
    finally:
        live.discard(busy)
        live.discard(keep)
        for proc in (builder, timing):
            live.kill_tree(proc.pid)
            proc.wait(timeout=10)
