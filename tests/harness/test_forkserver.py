"""Workers forked from the fork server (`harness/workers/forkserver.py`, `zygote.py`): what a
candidate sees in a forked worker is what it would see in a worker started afresh (its own
environment, descriptors 0-2 and nothing else, no line back to the server), exits and deaths
read as Popen's, and a server that cannot start costs nothing but its time."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelwright.harness.session import evaluate
from kernelwright.harness.verdicts import Reason
from kernelwright.harness.workers import forkserver, process, zygote
from kernelwright.harness.workers.jobs import WorkerJob
from kernelwright.harness.workers.process import classify_death
from kernelwright.problems import resolve_problem
from tests.candidates import harness_options, write_case
from tests.candidates.cpu_kit import HEADER

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux only")

# An honest relu that, at import, reports what its process holds and tries every way back to
# the process it was forked from: a socket among its descriptors, the parent's descriptors
# through /proc. Anything it reaches, it asks for an unconfined process writing a marker.
PROBE = """
import json, os, socket

def _probe():
    fds = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            fds[name] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass
    ppid = os.getppid()
    try:
        with open(f"/proc/{ppid}/cmdline", "rb") as f:
            parent = f.read().replace(b"\\0", b" ").decode()
    except OSError as exc:
        parent = f"unreadable: {exc}"
    reached = []
    request = json.dumps({"op": "fork", "argv": ["x", "/nonexistent"], "env": {}, "cwd": "/",
                          "targets": [0, 1, 2]}).encode()
    for name, target in fds.items():
        if target.startswith("socket:"):
            try:
                with socket.socket(fileno=os.dup(int(name))) as s:
                    s.send(request)
                    reached.append(f"own fd {name}")
            except OSError:
                pass
    try:
        for name in os.listdir(f"/proc/{ppid}/fd"):
            try:
                fd = os.open(f"/proc/{ppid}/fd/{name}", os.O_RDWR)
                reached.append(f"parent fd {name}")
                os.close(fd)
            except OSError:
                pass
    except OSError:
        pass
    return {"fds": fds, "parent": parent, "reached": reached, "home": os.environ.get("HOME"),
            "tmpdir": os.environ.get("TMPDIR"), "env": dict(os.environ), "pgid": os.getpgid(0) == os.getpid()}

print("FORKPROBE " + json.dumps(_probe()))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return kit.relu_forward(x)
"""


def _probe_report(log: Path) -> dict[str, Any]:
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("FORKPROBE "):
            return dict(json.loads(line.removeprefix("FORKPROBE ")))
    raise AssertionError(f"no probe line in {log}")


def test_a_forked_worker_holds_only_its_own_descriptors_and_environment(tmp_path: Path, shared_home: Path) -> None:
    path = write_case(tmp_path / "cases", "probes_its_process", HEADER + PROBE)
    out = tmp_path / "evidence"
    [result] = evaluate(resolve_problem("relu"), [path], harness_options(shared_home, "cpu", out_dir=out))
    assert result.verdict.value == "correct", result.message
    seen = _probe_report(out / path.stem / "build-and-run.log")
    # forked, not started afresh: the test would pass without the server otherwise
    assert "kernelwright.harness.workers.zygote" in seen["parent"], seen["parent"]
    assert seen["reached"] == [], seen["reached"]
    sockets = {fd: target for fd, target in seen["fds"].items() if target.startswith("socket:")}
    assert sockets == {}, seen["fds"]
    assert seen["pgid"]  # a session of its own: a timeout's group kill reaches its compilers
    assert seen["home"].endswith("/home") and "kernelwright-zygote" not in seen["home"]
    assert not any("kernelwright-zygote" in value for value in seen["env"].values()), seen["env"]
    assert result.isolation is not None and result.isolation.env == "scrubbed"


@pytest.fixture
def server_env(shared_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "VIRTUAL_ENV", "LANG")}
    return env | {"TORCHINDUCTOR_COMPILE_THREADS": "1", "TORCHINDUCTOR_CACHE_DIR": str(shared_home / "inductor-cache")}


def _spawn(env: dict[str, str], job: str, log: Path) -> tuple[forkserver.ForkedProcess, int]:
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    with open(log, "ab") as log_file:
        forked = forkserver.spawn(["kernelwright-worker", job], env, [stdin_r, stdout_w, log_file.fileno()], [0, 1, 2])
    os.close(stdin_r)
    os.close(stdout_w)
    os.close(stdout_r)
    assert forked is not None
    return forked, stdin_w


def test_exits_and_deaths_read_as_popen_s(tmp_path: Path, server_env: dict[str, str]) -> None:
    try:
        crashed, stdin = _spawn(server_env, str(tmp_path / "missing.json"), tmp_path / "crash.log")
        assert crashed.wait(60) == 1  # the worker's exception, as an interpreter exits on one
        os.close(stdin)
        assert "missing.json" in (tmp_path / "crash.log").read_text()
        assert crashed.poll() == 1
        fifo = tmp_path / "fifo.json"
        os.mkfifo(fifo)  # opening it blocks: the worker waits there until it is killed
        blocked, stdin = _spawn(server_env, str(fifo), tmp_path / "blocked.log")
        with pytest.raises(Exception, match="timed out"):
            blocked.wait(0.5)
        assert blocked.poll() is None
        os.kill(blocked.pid, signal.SIGKILL)
        code = blocked.wait(30)
        os.close(stdin)
        assert code == -signal.SIGKILL
        assert classify_death(code, "")[0] == Reason.OUT_OF_MEMORY  # as for a worker started afresh
        deadline = time.monotonic() + 10  # reaped once told: no zombie left behind
        while Path(f"/proc/{blocked.pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(f"/proc/{blocked.pid}").exists()
    finally:
        forkserver.stop_all()


def test_a_server_that_cannot_start_leaves_workers_to_start_afresh(
    tmp_path: Path, server_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(forkserver, "ZYGOTE_MODULE", "kernelwright.no_such_module")
    env = server_env | {"KERNELWRIGHT_TEST_KEY": str(tmp_path)}
    r, w = os.pipe()
    try:
        assert forkserver.spawn(["x", "job.json"], env, [r, w, 2], [0, 1, 2]) is None
        assert "cannot start workers" in caplog.text
        assert forkserver.server_for(env) is None  # not tried again for this environment
    finally:
        os.close(r)
        os.close(w)
        forkserver.stop_all()
        forkserver._FAILED.clear()


def test_forking_is_chosen_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(forkserver.FORK_VAR, raising=False)  # the default: every worker forked
    assert forkserver.forking_for("cpu") and forkserver.forking_for("cuda")
    assert forkserver.forking_for("cuda", times=False)
    monkeypatch.setenv(forkserver.FORK_VAR, "cpu")  # CUDA workers that time afresh, the rest forked
    assert forkserver.forking_for("cpu") and not forkserver.forking_for("cuda")
    assert forkserver.forking_for("cuda", times=False)  # a GPU job's builders and build workers
    monkeypatch.setenv(forkserver.FORK_VAR, " ALL ")
    assert forkserver.forking_for("cuda")
    monkeypatch.setenv(forkserver.FORK_VAR, "0")
    assert not forkserver.forking_for("cpu")
    assert not forkserver.forking_for("cuda", times=False) and not forkserver.forking_for("cpu", times=False)


def test_a_switch_value_it_does_not_know_is_said_and_read_as_the_default(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(forkserver.FORK_VAR, "cuda-too")
    with caplog.at_level(logging.WARNING, logger=forkserver.__name__):
        assert forkserver.forking_for("cuda") and forkserver.forking_for("cuda")  # asked twice
    said = [r.getMessage() for r in caplog.records if "cuda-too" in r.getMessage()]
    assert len(said) == 1 and "none of all, cpu, 0" in said[0]  # said once per process


@pytest.mark.parametrize(
    ("device", "mode", "switch", "forked"),
    [
        ("cuda", "build", None, True),  # builds only: times nothing, forked on a GPU job too
        ("cuda", "candidate", None, True),  # the default: forked (the forked false-rejection run)
        ("cuda", "reference", None, True),
        ("cuda", "candidate", "cpu", False),  # times: afresh under "cpu" (#28's figures)
        ("cuda", "reference", "cpu", False),
        ("cuda", "candidate", "all", True),
        ("cuda", "build", "0", False),
        ("cpu", "candidate", None, True),
    ],
)
def test_a_worker_is_forked_as_its_device_its_mode_and_the_switch_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, device: str, mode: str, switch: str | None, forked: bool
) -> None:
    if switch is None:
        monkeypatch.delenv(forkserver.FORK_VAR, raising=False)
    else:
        monkeypatch.setenv(forkserver.FORK_VAR, switch)
    asked: list[str] = []

    class Started(Exception):
        pass

    def spawn(*args: Any, **kwargs: Any) -> None:  # the server cannot fork: started afresh next
        asked.append("fork")

    def popen(*args: Any, **kwargs: Any) -> None:
        raise Started

    monkeypatch.setattr(forkserver, "spawn", spawn)
    monkeypatch.setattr(process.subprocess, "Popen", popen)
    job = WorkerJob(mode=mode, problem_path=tmp_path / "p.py", device=device, out_dir=tmp_path, build_cache=tmp_path)  # type: ignore[arg-type]
    with open(tmp_path / "log", "wb") as log, pytest.raises(Started):
        process._start(job, tmp_path / "job.json", {}, log, ())
    assert asked == (["fork"] if forked else [])


class _Stub:
    def __init__(self, env: dict[str, str], apart: bool = False) -> None:
        self.env, self.pausable, self.dead, self.stopped, self.children = env, not apart, None, False, False
        self.last_used = time.monotonic()
        self.started = True  # `ready`'s answer
        self.waits: list[float] = []  # every `ready` call's timeout
        self.forks = 0

    def ready(self, timeout: float = 0.0) -> bool:
        self.waits.append(timeout)
        return self.started

    def fork(self, argv: list[str], env: dict[str, str], fds: list[int], targets: list[int], entry: str) -> str:
        self.forks += 1
        return f"forked {entry}"

    def busy(self) -> bool:
        return self.children

    def stop(self) -> None:
        self.stopped = True


def test_servers_are_kept_per_environment_and_an_idle_one_gives_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forkserver, "ForkServer", _Stub)
    monkeypatch.setattr(forkserver, "_SERVERS", {})
    monkeypatch.setattr(forkserver, "MAX_SERVERS", 2)
    one = forkserver.server_for({"OMP_NUM_THREADS": "1", "HOME": "/a"})
    assert forkserver.server_for({"OMP_NUM_THREADS": "1", "HOME": "/b", "TMPDIR": "/t"}) is one  # own entries differ
    two = forkserver.server_for({"OMP_NUM_THREADS": "2"})
    assert two is not one and len(forkserver._SERVERS) == 2
    one.children = True  # type: ignore[union-attr]
    three = forkserver.server_for({"OMP_NUM_THREADS": "3"})
    assert two.stopped and not one.stopped and three is not None  # type: ignore[union-attr]
    three.children = True  # type: ignore[union-attr]
    assert forkserver.server_for({"OMP_NUM_THREADS": "4"}) is None  # every slot busy: start afresh


def test_a_server_apart_is_another_server_for_the_same_environment_that_timing_phases_leave_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A GPU job's builders (never paused by a timing phase) are forked from a server of their own:
    the worker's server for the same environment is stopped by every phase, as it must be."""
    monkeypatch.setattr(forkserver, "ForkServer", _Stub)
    monkeypatch.setattr(forkserver, "_SERVERS", {})
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    workers, builders = forkserver.server_for(env), forkserver.server_for(env, apart=True)
    assert workers is not builders and forkserver.server_for(env, apart=True) is builders
    assert workers.pausable and not builders.pausable  # type: ignore[union-attr]
    assert forkserver.MAX_SERVERS >= 3  # a CPU job's server, and a GPU job's two, side by side


def test_a_builder_never_waits_for_a_server_apart_that_is_still_starting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A builder started afresh costs its imports, about what waiting for a starting server
    would: while the builders' server starts (on an H200 host one once never became ready, and
    each build waited for it), builders start afresh at once and the server is kept, not given up;
    once it is ready they are forked. A worker's server is waited for, as before."""
    monkeypatch.setattr(forkserver, "ForkServer", _Stub)
    monkeypatch.setattr(forkserver, "_SERVERS", {})
    monkeypatch.setattr(forkserver, "_FAILED", set())
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    builders = forkserver.server_for(env, apart=True)
    builders.started = False  # type: ignore[union-attr]
    assert forkserver.spawn(["b"], env, [], [], entry="builder", apart=True) is None
    assert builders.waits == [0.0] and builders.forks == 0  # type: ignore[union-attr]
    assert forkserver.server_for(env, apart=True) is builders and not forkserver._FAILED  # kept
    builders.started = True  # type: ignore[union-attr]
    assert forkserver.spawn(["b"], env, [], [], entry="builder", apart=True) == "forked builder"
    workers = forkserver.server_for(env)
    workers.started = False  # type: ignore[union-attr]
    assert forkserver.spawn(["w"], env, [], []) == "forked worker"  # its wait is fork's own
    assert workers.waits == []  # type: ignore[union-attr]


def test_a_server_apart_starts_on_the_calling_thread_s_cores_and_a_worker_s_server_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The builders' server runs beside timing phases, so it starts where a builder started afresh
    by the same thread would (a build thread's cores); a worker's server starts from the launcher
    thread, whatever the caller's cores."""
    monkeypatch.setattr(forkserver, "_SERVERS", {})
    everywhere = os.sched_getaffinity(0)
    if len(everywhere) < 2:
        pytest.skip("needs two cores to tell the placements apart")
    one = {min(everywhere)}
    found: dict[bool, set[int]] = {}

    def start() -> None:
        os.sched_setaffinity(0, one)  # this thread only
        for apart in (True, False):
            server = forkserver.server_for({"KW_TEST_PLACEMENT": "1"}, apart=apart)
            assert server is not None
            found[apart] = os.sched_getaffinity(server.pid)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join(timeout=60)
    forkserver.stop_all()
    assert found == {True: one, False: everywhere}


class _ClosedLine:
    """A server's line that carries one exit report and is then closed under the reader, as
    `stop_all` does at interpreter exit while a worker's death is being reported."""

    def __init__(self, pid: int, code: int) -> None:
        self.reports = [json.dumps({"op": "exit", "pid": pid, "code": code}).encode()]

    def recv(self, _size: int) -> bytes:
        if self.reports:
            return self.reports.pop()
        raise OSError(9, "Bad file descriptor")

    def send(self, _data: bytes) -> int:
        raise OSError(9, "Bad file descriptor")


def test_a_death_reported_as_the_line_closes_is_recorded_without_an_error() -> None:
    """CI once ended `eval` (exit 5, its message right) with a reader thread's traceback as the
    last line of stderr: the reap answer went out on a line `stop_all` had closed."""
    server = object.__new__(forkserver.ForkServer)
    server._sock = _ClosedLine(4242, -9)  # type: ignore[assignment]
    server._send_lock = forkserver.threading.Lock()
    server._state = forkserver.threading.Condition()
    server._ready = forkserver.threading.Event()
    server._replies = forkserver.queue.Queue()
    server._codes, server._children, server.dead = {}, {4242}, None
    server._read()  # raises nothing
    assert server.returncode(4242) == -9 and server.dead == "its process ended"
    assert server._replies.get_nowait()["op"] == "failed"  # a waiting fork hears of it


def _warm_up(monkeypatch: pytest.MonkeyPatch, gpu: bool, compile_: Callable[..., Any]) -> list[str | None]:
    """The server's warm-up in this process, on a host with or without a visible GPU, torch.compile
    replaced by `compile_`; returns the NVML switch's value each time CUDA was asked about."""
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")
    monkeypatch.delenv(zygote.NVML_CHECK, raising=False)
    asked: list[str | None] = []

    def available() -> bool:
        asked.append(os.environ.get(zygote.NVML_CHECK))
        return gpu

    monkeypatch.setattr(torch.cuda, "is_available", available)
    monkeypatch.setattr(torch, "compile", compile_)
    try:
        zygote._warm()
    finally:
        assert zygote.NVML_CHECK not in os.environ  # a child gets the job's environment, not this
    return asked


@pytest.mark.parametrize("gpu", [True, False], ids=["gpu-host", "cpu-host"])
def test_the_server_s_warm_up_compiles_only_where_no_gpu_is_visible_and_asks_through_nvml(
    monkeypatch: pytest.MonkeyPatch, gpu: bool
) -> None:
    """On a host with a GPU, torch.compile starts the CUDA driver even for a function on the CPU
    (an H200 host, 2026-11-28): a server that did would fork children that cannot use CUDA. The
    question itself goes through NVML (torch's switch), set only while warming."""
    compiled: list[object] = []

    def compile_(fn: Any, *args: Any, **kwargs: Any) -> Any:
        compiled.append(fn)
        return fn

    assert _warm_up(monkeypatch, gpu, compile_) == ["1"]  # answered through NVML, which starts no driver
    assert len(compiled) == (0 if gpu else 1)


def test_a_warm_up_that_starts_a_thread_is_refused_and_the_refusal_lists_the_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A thread started while warming would be missing in every child (the CUDA driver's, on a GPU
    host): the server refuses, and says which threads the process has."""
    release = threading.Event()

    def compile_(fn: Any, *args: Any, **kwargs: Any) -> Any:
        threading.Thread(target=release.wait, daemon=True).start()
        return fn

    try:
        with pytest.raises(RuntimeError, match=r"warming up started 1 thread\(s\) \(\w.*\); a forked child"):
            _warm_up(monkeypatch, False, compile_)
    finally:
        release.set()
