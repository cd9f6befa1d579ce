"""Whether a measurement (`live.quiet`) is in force in this process, for the builds ahead
(`prebuild.py`): `live.quiet` stops the workers alive when it begins, so a build starting during
the phase would run beside it; this watch tells when a phase is in force (no build starts then)
and stops a build that started just as the phase began until it ends."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from kernelwright.harness.workers import live
from kernelwright.harness.workers.process import WorkerProcess


class QuietWatch:
    """Whether `live.quiet` is in force in this process: a sleeping stand-in process registered
    with `live`, which a quiet phase stops like every other worker. While it is stopped no build
    starts (`wait_loud`), and a build worker that the phase missed (started after it listed the
    live workers) is stopped here until the phase ends. The stand-in exits with this process."""

    POLL_S = 0.02

    def __init__(self, running: Callable[[], list[WorkerProcess]]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", "import sys; sys.stdin.read()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pid = self.proc.pid
        live.add(self)
        self._running = running
        self._held: set[int] = set()  # the build workers held here
        self._stopped: list[int] = []  # every process stopped with them (`live.stop_trees`), to continue
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._hold_while_quiet, daemon=True, name="prebuild-quiet-watch")
        self._thread.start()

    def quiet(self) -> bool:
        return live.state(self.pid) in ("T", "t")  # "" once gone (an interrupt ended it): not quiet

    def wait_loud(self, give_up: Callable[[], bool]) -> None:
        while not give_up() and self.quiet():
            time.sleep(self.POLL_S)

    def _hold_while_quiet(self) -> None:
        while not self._ended.wait(self.POLL_S):
            if self.quiet():
                late = [w.pid for w in self._running() if w.pid not in self._held and w.proc.returncode is None]
                if late:
                    self._held.update(late)
                    live.stop_trees(late, into=self._stopped)
            elif self._held:
                self._release()

    def _release(self) -> None:
        stopped, self._stopped = self._stopped, []
        live.cont(stopped)
        self._held.clear()

    def kill(self) -> None:
        self._ended.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._release()
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        live.discard(self)
