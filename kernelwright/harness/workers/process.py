"""Run a worker in its own process with a time limit per phase; a crash, hang or OOM becomes a
value (`Outcome`), never an exception, and never takes the harness down.

Every live worker is registered here, so an interrupt (`kill_all`) can end all of them and
everything they started. A worker's descendants are found through /proc and not only by process
group: ninja puts each compiler command in a process group of its own, so a group kill alone
leaves `cc1plus` running after the worker is gone.

A worker never inherits the harness's environment: it gets the scrubbed one of `isolation.py`
(no keys, tokens or credential locations; HOME and TMPDIR in its own folder), and confines itself
at start (`confine.py`). In strict mode a worker is not even started where the machine lacks a
layer. What the worker reports (the layers in force, what its candidate attempted) is kept here
for the judge; its log is read back through the harness's own descriptor and redacted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from kernelwright.errors import EnvironmentProblem
from kernelwright.harness.sandbox import confine
from kernelwright.harness.sandbox.isolation import MODE_VAR, Isolation, redact, scrubbed_env
from kernelwright.harness.verdicts import Reason
from kernelwright.harness.workers import forkserver, live
from kernelwright.harness.workers.forkserver import ForkedProcess
from kernelwright.harness.workers.jobs import WorkerJob, WorkerMessage
from kernelwright.harness.workers.live import kill_tree

log = logging.getLogger(__name__)
CLOSE_GRACE_S = 0.05
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class BuildLink:
    """A worker's line to the harness's trusted build step (`harness/building/broker.py`): what
    the child gets (its environment entries and descriptors), what starts serving it once the
    child runs, and what ends it with the worker."""

    env: dict[str, str]
    child_fds: tuple[int, ...]
    serve: Callable[[], None]
    close: Callable[[], None]


class BuildStep(Protocol):
    """Opens a `BuildLink` for a worker that may build (every mode but the reference's): the
    harness's build step, made by whoever starts the worker (`building.link.broker_link`)."""

    def __call__(self, job: WorkerJob, env: dict[str, str]) -> BuildLink: ...


_SIGNALS = {
    signal.SIGSEGV: Reason.SEGFAULT,
    signal.SIGBUS: Reason.SEGFAULT,
    signal.SIGABRT: Reason.ABORT,
    signal.SIGFPE: Reason.ABORT,
    signal.SIGILL: Reason.ABORT,
    signal.SIGKILL: Reason.OUT_OF_MEMORY,
}


@dataclass(frozen=True)
class Outcome:
    """A phase's end: its result message, or how the worker died or timed out."""

    message: WorkerMessage | None
    died: Reason | None = None
    timed_out: bool = False
    detail: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.message is not None and self.message.event == "result"

    def report(self, kind: type[R]) -> R | None:
        """The message's data as `kind` (`messages.py`); None without a message, or when the data
        does not validate (not a line the worker wrote: handled as a missing one)."""
        if self.message is None:
            return None
        try:
            return kind.model_validate(self.message.data)
        except ValidationError as exc:
            log.warning("a %s message from a worker did not validate as %s: %s", self.message.phase, kind.__name__, exc)
            return None


def classify_death(returncode: int | None, stderr_tail: str) -> tuple[Reason, str]:
    text = stderr_tail.lower()
    if "illegal memory access" in text or "misaligned address" in text:
        return Reason.ILLEGAL_MEMORY_ACCESS, "the kernel made an illegal memory access"
    if "unspecified launch failure" in text or "launch timed out" in text:
        return (
            Reason.LAUNCH_FAILURE,
            "the GPU aborted the kernel (unspecified launch failure: a fault or the driver's watchdog)",
        )
    if "out of memory" in text or "outofmemoryerror" in text:
        return Reason.OUT_OF_MEMORY, "the candidate ran out of memory"
    if returncode is not None and returncode < 0:
        sig = signal.Signals(-returncode)
        reason = _SIGNALS.get(sig, Reason.PROCESS_DIED)
        note = " (killed: likely the out-of-memory killer)" if sig == signal.SIGKILL else ""
        return reason, f"the worker died of {sig.name}{note}"
    return Reason.PROCESS_DIED, f"the worker exited with status {returncode}"


def cuda_init_env() -> dict[str, str]:
    """What tells a CUDA worker when to start the driver: under the layers where this host's
    probe found that works (its helper threads confined too), else before them."""
    works, _ = confine.cuda_after_layers()
    return {confine.CUDA_INIT_VAR: "after-layers" if works else "before-layers"}


def refuse_unless_isolated(mode: str, *, cuda: bool = False) -> None:
    """Strict mode: raise (exit 5) unless this machine gives a worker every isolation layer
    (with `cuda`, the CUDA driver's threads under them too)."""
    if mode != "strict":
        return
    missing = confine.probe().missing()
    if cuda:
        works, why = confine.cuda_after_layers()
        if not works:
            missing.append(f"the CUDA driver does not start under the layers ({why})")
    if missing:
        raise EnvironmentProblem(
            f"--sandbox strict: this machine cannot isolate candidates: {'; '.join(missing)}",
            hint="`kernelwright doctor` says how to enable each layer; `--sandbox best-effort` runs without them",
        )


def _start(
    job: WorkerJob, job_file: Path, env: dict[str, str], log_file: IO[bytes], child_fds: tuple[int, ...]
) -> subprocess.Popen[bytes] | ForkedProcess:
    """The worker's process: forked from a server that has torch imported already where that is
    on (`forkserver.py`), else started afresh; the same program, environment and descriptors
    either way, in a session of its own (a timeout kills its compilers too). A worker that only
    builds times nothing: it is forked on a GPU job too."""
    if forkserver.forking_for(job.device, times=job.mode != "build"):
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        fds = [stdin_r, stdout_w, log_file.fileno(), *child_fds]
        try:
            forked = forkserver.spawn(["kernelwright-worker", str(job_file)], env, fds, [0, 1, 2, *child_fds])
        finally:
            os.close(stdin_r)
            os.close(stdout_w)
        if forked is not None:
            forked.stdin = open(stdin_w, "wb")  # noqa: SIM115 (the worker's stdin, for its life)
            forked.stdout = open(stdout_r, "rb")  # noqa: SIM115
            return forked
        os.close(stdin_w)
        os.close(stdout_r)
    return subprocess.Popen(
        [sys.executable, "-m", "kernelwright.harness.workers.main", str(job_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log_file,
        env=env,
        pass_fds=child_fds,
        start_new_session=True,
    )


class WorkerProcess:
    """One worker subprocess. `expect(phase, timeout)` waits for that phase's result."""

    def __init__(
        self,
        job: WorkerJob,
        job_file: Path,
        log_file: Path,
        env: dict[str, str] | None = None,
        builds: BuildStep | None = None,
    ) -> None:
        """`builds`: the build step a worker that may build asks (without one, its builds stay in
        its own scratch)."""
        if live.interrupted():
            raise KeyboardInterrupt("interrupted: no new worker starts")
        extra = dict(env or {})
        if job.device == "cuda":
            extra.update(cuda_init_env())
        refuse_unless_isolated(extra.get(MODE_VAR, "best-effort"), cuda=job.device == "cuda")
        job_file.write_text(job.model_dump_json(indent=1))
        self.log_file = log_file
        self._log: IO[bytes] = open(log_file, "ab")  # noqa: SIM115 (closed in close()/__exit__)
        # Read back through our own descriptor: the worker can replace the file at this path.
        self._log_reader = os.open(log_file, os.O_RDONLY | os.O_CLOEXEC)
        self.isolation: Isolation | None = None  # what the worker reported it runs under
        self.attempts: list[dict[str, str]] = []  # what its candidate tried (network, writes outside)
        home, tmp = job.out_dir / "home", job.out_dir / "tmp"
        home.mkdir(parents=True, exist_ok=True)
        tmp.mkdir(parents=True, exist_ok=True)
        child_env = scrubbed_env(os.environ, extra, home=home, tmp=tmp)
        # Torch's own extension folder and CUDA's JIT cache: the worker's, never shared ones.
        child_env["TORCH_EXTENSIONS_DIR"] = str(job.out_dir / "torch-extensions")
        child_env["CUDA_CACHE_PATH"] = str(job.out_dir / "cuda-cache")
        # Builds go to the harness's trusted build step: the worker may read the build cache, not write it.
        self.builds: BuildLink | None = None
        child_fds: tuple[int, ...] = ()
        if job.mode != "reference" and builds is not None:
            self.builds = builds(job, extra)
            child_fds = self.builds.child_fds
            child_env.update(self.builds.env)
        try:
            self.proc = _start(job, job_file, child_env, self._log, child_fds)
        finally:
            for fd in child_fds:  # the worker's ends: ours would keep its pipes open after it exits
                os.close(fd)
        if self.builds is not None:
            self.builds.serve()
        self.pid = self.proc.pid
        self._seq = 0  # the last message number seen from the worker
        self.forged: str | None = None  # why the channel's sequence broke, if it did
        live.add(self)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.phases_seen: set[str] = set()  # phases the worker announced it was starting
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self._lines.put(raw.decode(errors="replace"))
        self._lines.put(None)

    def stderr_tail(self, limit: int = 4000) -> str:
        """The end of the worker's log, secrets redacted."""
        if self._log.closed:
            return ""
        self._log.flush()
        try:
            size = os.fstat(self._log_reader).st_size
            data = os.pread(self._log_reader, limit, max(0, size - limit))
        except OSError:
            return ""
        return redact(data.decode(errors="replace"))

    def _check_sequence(self, message: WorkerMessage) -> None:
        """Every message carries the worker's count; one out of sequence was not written by the
        worker's channel (a forged line, or a genuine one after a forgery took its place)."""
        if self.forged is None and message.seq != self._seq + 1:
            self.forged = f"message {message.event} {message.phase} came as number {message.seq} after {self._seq}"
        if message.seq is not None:
            self._seq = max(self._seq, message.seq)

    def close_channel(self, timeout_s: float) -> None:
        """Ask for one last answer: a forged result taken earlier shows now, when the worker's own
        message for that phase arrives out of sequence before this one."""
        if self.proc.poll() is not None:
            return
        self.send("ping")
        self.expect("ping", timeout_s)

    def _note(self, message: WorkerMessage) -> None:
        """Keep what the worker says about its isolation; strict workers that could not confine
        themselves refuse, and that ends the command (exit 5)."""
        if message.phase == "sandbox" and message.event == "phase":
            self.isolation = Isolation.model_validate(message.data.get("isolation", {}))
            refused = message.data.get("refused")
            if refused:
                self.kill()
                raise EnvironmentProblem(
                    f"--sandbox strict: the worker could not isolate itself: {refused}",
                    hint="`kernelwright doctor` says how to enable each layer",
                )
        attempts = message.data.get("sandbox_attempts")
        if isinstance(attempts, list):
            self.attempts = [a for a in attempts if isinstance(a, dict)]

    def send(self, command: str) -> None:
        if self.proc.stdin is None or self.proc.poll() is not None:
            return
        try:
            self.proc.stdin.write((command + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass

    def expect(self, phase: str, timeout_s: float) -> Outcome:
        """Wait up to timeout_s for `phase`'s result (the clock starts now)."""
        start = time.monotonic()
        deadline = start + timeout_s
        while True:
            if live.interrupted():
                # Ended by an interrupt (Ctrl-C, a frontend leaving): never a verdict on the candidate,
                # whichever thread is waiting here.
                self.kill()
                raise KeyboardInterrupt("interrupted: the worker was ended")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                return Outcome(
                    None,
                    timed_out=True,
                    detail=f"{phase} took longer than {timeout_s:.0f} s",
                    seconds=time.monotonic() - start,
                )
            try:
                line = self._lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if line is None:  # the worker's stdout closed: it exited
                try:
                    code = self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.kill()
                    code = None
                reason, detail = classify_death(code, self.stderr_tail())
                return Outcome(None, died=reason, detail=detail, seconds=time.monotonic() - start)
            try:
                message = WorkerMessage.model_validate_json(line)
            except ValidationError:
                continue  # not protocol: ignore
            self._note(message)
            self._check_sequence(message)
            if message.event == "phase":
                self.phases_seen.add(message.phase)
            if message.event == "error":
                text = str(message.data.get("detail", ""))
                code = self._wait_exit()
                reason, detail = classify_death(code, text + "\n" + self.stderr_tail())
                return Outcome(
                    message,
                    died=reason,
                    detail=f"{detail}: {text.splitlines()[-1] if text else ''}",
                    seconds=time.monotonic() - start,
                )
            if message.event == "result" and message.phase == phase:
                return Outcome(message, seconds=time.monotonic() - start)

    def _wait_exit(self) -> int | None:
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """End the worker and everything it started (compilers included, and the builds it asked
        the harness for). Only while the worker is not yet reaped: after that its pid may belong to
        someone else."""
        if self.builds is not None:
            self.builds.close()
        if self.proc.poll() is None:
            kill_tree(self.proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        self._forget()

    def _forget(self) -> None:
        live.discard(self)

    def close(self) -> None:
        """End a worker whose results are all in: ask it to stop, give it a moment, then end its
        whole process group (interpreter teardown of a CUDA process with compile-worker pools can
        take seconds that nobody needs; the group kill also reaps children it left behind)."""
        self.send("stop")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=CLOSE_GRACE_S)
        self.kill()
        self._close_log()

    def _close_log(self) -> None:
        if not self._log.closed:
            self._log.close()
            os.close(self._log_reader)

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.kill() if exc[0] is not None else self.close()
        self._close_log()
