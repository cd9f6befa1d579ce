"""The worker process: `python -m kernelwright.harness.workers.main JOB.json`.

A reference worker (`reference.py`) runs the PyTorch reference on every trial and keeps its
outputs; a candidate worker (`candidate.py`) builds the candidate, runs it trial by trial on
inputs it draws from seeds it is told only then (as the harness asks on stdin), checks what it
did, profiles it on every shape and times it against the baselines on fresh inputs. The
candidate's code never runs in the process that holds the reference outputs, and its outputs are
compared there, not here. Protocol: JSON lines on the original stdout, each phase's result a
typed report (`messages.py`); everything else (compiler output, prints) goes to stderr, which
the harness keeps as the log.

First thing, still single-threaded and before torch (or numpy, which the reports' models import)
is imported, the worker confines itself (`confine.py`: network namespace, Landlock, limits) and
installs the audit hook that reports what candidate code attempts (`audit.py`); it then tells
the harness which layers are in force.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kernelwright.harness.sandbox.audit import AttemptLog
from kernelwright.harness.workers.jobs import (
    CandidateAssignment,
    OneThreadRequest,
    TrialRequest,
    WorkerJob,
    WorkerMessage,
    WorkShareRequest,
)

if TYPE_CHECKING:
    from kernelwright.harness.workers.messages import Report


class Channel:
    def __init__(self) -> None:
        self._out: IO[str] = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)  # stray prints and compiler output join stderr
        sys.stdout = sys.stderr
        self.audit: AttemptLog | None = None
        self.isolation: Any = None  # what `_isolate` put this process under (an Isolation)
        self._seq = 0

    def send(self, event: str, phase: str, **data: Any) -> None:
        if self.audit is not None and self.audit.attempts and event != "phase":
            data["sandbox_attempts"] = list(self.audit.attempts)
        self._seq += 1
        message = WorkerMessage(event=event, phase=phase, data=data, seq=self._seq)  # type: ignore[arg-type]
        self._out.write(message.model_dump_json() + "\n")
        self._out.flush()

    def report(self, phase: str, report: Report) -> None:
        """A phase's result: the report's fields are the message's data."""
        self.send("result", phase, **report.wire())

    def wait_command(self) -> str:
        line = sys.stdin.readline()
        return line.strip() or "stop"


def writable_folders(job: WorkerJob, environ: dict[str, str] | os._Environ[str]) -> list[Path]:
    """Where this worker may write: its own folder (scratch, HOME, TMPDIR inside it) and the
    caches named in its environment (each in its scratch unless the harness chose otherwise).
    Never the build cache: the harness's trusted build step writes it (`harness/building/broker.py`);
    a worker without that step (started by hand) builds into its scratch."""
    folders = [job.out_dir]
    for name in (
        "TMPDIR",
        "HOME",
        "TORCHINDUCTOR_CACHE_DIR",
        "TRITON_CACHE_DIR",
    ):
        if environ.get(name):
            folders.append(Path(environ[name]))
    return list(dict.fromkeys(folders))


_SHARED_CACHES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def _seal_shared_caches(job: WorkerJob, chan: Channel, isolation: Any) -> None:
    """Before the candidate's file runs: the shared inductor and triton caches, which compiled
    the baselines (no candidate code had run), are taken out of the writable folders by a further
    Landlock layer, and this process's later compiles (the candidate's own triton kernels) go to
    caches in its scratch. So a candidate cannot leave an entry there for a later baseline."""
    from kernelwright.harness.sandbox import confine

    shared = [Path(os.environ[name]) for name in _SHARED_CACHES if os.environ.get(name)]
    if not shared or isolation is None:
        return
    private = job.out_dir / "caches"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(private / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(private / "triton")
    if isolation.filesystem != "landlock":
        isolation.shared_caches = "writable"
    else:
        writable = [f for f in writable_folders(job, os.environ) if f not in shared]
        sealed = confine.restrict_writes(writable, isolation.notes)
        isolation.shared_caches = "sealed" if sealed else "writable"
        if sealed:
            isolation.writable = [str(f) for f in writable] + ["/dev (existing devices, not /dev/shm)"]
            if chan.audit is not None:
                chan.audit.writable = tuple(os.path.realpath(f) for f in writable)
    chan.send("phase", "sandbox", isolation=isolation.model_dump(), refused="")


def _isolate(job: WorkerJob, chan: Channel) -> bool:
    """Confine this process and report how; False when strict mode cannot be honoured."""
    from kernelwright.harness.sandbox import audit, confine
    from kernelwright.harness.sandbox.isolation import MODE_VAR, SandboxMode

    mode = SandboxMode.STRICT if os.environ.get(MODE_VAR) == "strict" else SandboxMode.BEST_EFFORT
    writable = writable_folders(job, os.environ)
    isolation = confine.confine(writable, mode, cuda=job.device == "cuda")
    chan.audit = audit.install(writable)
    missing = isolation.missing() if mode == "strict" else []
    chan.send("phase", "sandbox", isolation=isolation.model_dump(), refused="; ".join(missing))
    chan.isolation = isolation
    return not missing


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kernelwright.harness.workers.main JOB.json", file=sys.stderr)
        return 2
    chan = Channel()
    job = WorkerJob.model_validate_json(Path(argv[1]).read_text())
    if not _isolate(job, chan):
        return 3
    if job.mode == "reference":
        from kernelwright.harness.workers.reference import serve

        serve(job, chan)
        return 0
    # after `_isolate`: these import numpy and torch, which start threads
    from kernelwright.harness.workers.candidate import CandidateSession
    from kernelwright.harness.workers.messages import ReadyReport

    session = CandidateSession(job, chan)
    if job.candidate_path is None:  # started ahead (a spare): ready, now wait for the candidate
        chan.report("ready", ReadyReport(prepare_s=session.prepare_s))
        command, _, argument = chan.wait_command().partition(" ")
        if command != "candidate":
            return 0
        assignment = CandidateAssignment.model_validate_json(argument)
        job.candidate_path = assignment.candidate_path
    _seal_shared_caches(job, chan, chan.isolation)
    if not session.build() or job.mode == "build":
        return 0
    while True:  # the harness drives the phases: trials, work share, timing, in its order
        command, _, argument = chan.wait_command().partition(" ")
        session.handed.clear()  # the reference's process has copied what was handed over
        if command == "settle":
            session.settle()
            continue
        session.pending = None  # the last trial's output is no longer asked about
        if command == "trial":
            request = TrialRequest.model_validate_json(argument)
            session.ipc = request.ipc
            session.trial(request.plan, request.repeat)
        elif command == "workshare":
            session.workshare(WorkShareRequest.model_validate_json(argument))
        elif command == "timing":
            session.timing(int(argument or 0))
        elif command == "onethread":
            look = OneThreadRequest.model_validate_json(argument)
            session.one_thread(look.shapes, look.median_ms)
        elif command == "ping":  # the harness's last word: every message before this one is in
            chan.send("result", "ping")
        else:
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
