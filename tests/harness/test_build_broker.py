"""The shared build cache is written only by the harness's trusted build step (#14): a worker
asks for builds over a pipe, the harness keys them itself and builds each in a confined process
writable only in that key's folder. A candidate cannot plant a library for another source."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kernelwright.fastext import build_key, cache_folder
from kernelwright.harness.building import broker as broker_module
from kernelwright.harness.building.broker import BuildBroker
from kernelwright.harness.building.link import broker_link
from kernelwright.harness.sandbox import confine
from kernelwright.harness.session import evaluate
from kernelwright.harness.workers import forkserver, live
from kernelwright.harness.workers.jobs import WorkerJob
from kernelwright.problems import resolve_problem
from kernelwright.problems.candidate.cache import BUILT_MARK
from tests.candidates import harness_options, write_case
from tests.candidates.cpu_kit import CORRECT, HEADER

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")
needs_landlock = pytest.mark.skipif(confine.probe().filesystem != "landlock", reason="needs Landlock")

SOURCE = 'extern "C" int answer(int* out) { *out = 42; return 0; }\n'


def _fast(name: str = "kw_broker_t", source: str = SOURCE, flags: list[str] | None = None) -> dict:
    return {"kind": "fastext", "name": name, "source": source, "lang": "cpp", "flags": flags or [], "arch": ""}


def test_the_harness_keys_builds_itself_and_reuses_complete_ones(tmp_path: Path) -> None:
    broker = BuildBroker(tmp_path / "cache", {}, timeout_s=120)
    first = broker.handle(_fast())
    assert first["ok"] and first["cached"] is False, first.get("log")
    folder = cache_folder(tmp_path / "cache" / "fastext", build_key("kw_broker_t", SOURCE, "cpp", [], ""))
    assert Path(first["library"]).parent == folder.resolve() and (folder / BUILT_MARK).is_file()
    again = broker.handle({**_fast(), "key": "0" * 64})  # a key the worker names is never read
    assert again["ok"] and again["cached"] is True and again["library"] == first["library"]


def test_a_folder_without_the_harness_s_mark_is_rebuilt_from_empty(tmp_path: Path) -> None:
    """What a candidate (or a killed build) left in a key's folder is never taken as the build."""
    folder = cache_folder(tmp_path / "cache" / "fastext", build_key("kw_broker_t", SOURCE, "cpp", [], ""))
    folder.mkdir(parents=True)
    planted = folder / "libkw_broker_t.so"
    planted.write_bytes(b"not a library")
    reply = BuildBroker(tmp_path / "cache", {}, timeout_s=120).handle(_fast())
    assert reply["ok"] and reply["cached"] is False
    assert planted.read_bytes() != b"not a library"  # built again by the builder


def test_a_malformed_request_is_refused(tmp_path: Path) -> None:
    broker = BuildBroker(tmp_path / "cache", {}, timeout_s=60)
    with pytest.raises(ValueError):
        broker.handle({"kind": "shell", "name": "x"})
    with pytest.raises(ValueError):
        broker.handle(_fast(name="../escape"))


@needs_landlock
def test_the_builder_writes_only_in_its_key_s_folder(tmp_path: Path) -> None:
    """Compiler flags come from the candidate: one that makes g++ write a file elsewhere fails
    in the confined builder, and nothing appears there."""
    outside = tmp_path / "outside.d"
    reply = BuildBroker(tmp_path / "cache", {}, timeout_s=120).handle(_fast(flags=["-MD", "-MF", str(outside)]))
    assert not reply["ok"], "the builder wrote outside its folder"
    assert not outside.exists()


POISON = """
import json, pathlib, sys
_job = json.loads(pathlib.Path(sys.argv[-1]).read_text())
_root = pathlib.Path(_job["build_cache"])
for _target in (_root / "planted.txt", _root / "fastext" / "planted.txt"):
    try:
        _target.parent.mkdir(parents=True, exist_ok=True)
        _target.write_text("a library for someone else's key")
    except OSError as exc:
        print("write refused:", _target, exc)
"""


@pytest.mark.slow
@needs_landlock
def test_a_candidate_cannot_write_the_shared_build_cache(tmp_path: Path, shared_home: Path) -> None:
    """The candidate's worker still gets its extension (built by the harness's step), but its
    own attempt to write into the shared cache is refused."""
    source = CORRECT.source().replace(HEADER, HEADER + POISON)
    path = write_case(tmp_path, "poisons_the_cache", source)
    [result] = evaluate(resolve_problem("relu"), [path], harness_options(shared_home, "cpu"))
    cache = shared_home / "build-cache"
    assert not (cache / "planted.txt").exists() and not (cache / "fastext" / "planted.txt").exists()
    assert result.verdict.value == "correct", result.message  # best-effort: flagged, not rejected
    assert result.build_cached is not None
    assert any(f.code == "write_outside_scratch" for f in result.flags), [f.code for f in result.flags]
    assert json.loads(result.to_json())["isolation"]["filesystem"] == "landlock"


INDUCTOR_POISON = """
import os, pathlib
for _name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
    _target = pathlib.Path(os.environ[_name]) / "planted.txt"
    print(_name, "now", _target)
_shared = pathlib.Path({shared!r})
for _target in (_shared / "planted.txt", _shared / "triton" / "planted.txt"):
    try:
        _target.parent.mkdir(parents=True, exist_ok=True)
        _target.write_text("an entry for a later baseline compile")
    except OSError as exc:
        print("write refused:", _target, exc)
"""


@pytest.mark.slow
@needs_landlock
def test_the_shared_compile_caches_are_sealed_before_the_candidate_runs(tmp_path: Path, shared_home: Path) -> None:
    """The baselines compile into the shared inductor/triton caches before any candidate code
    runs; then a further Landlock layer takes them away: the candidate's write is refused."""
    shared = tmp_path / "inductor-cache"
    source = CORRECT.source().replace(HEADER, HEADER + INDUCTOR_POISON.format(shared=str(shared)))
    path = write_case(tmp_path, "poisons_inductor", source)
    opts = harness_options(shared_home, "cpu", inductor_cache=shared, timing=True)
    [result] = evaluate(resolve_problem("relu"), [path], opts)
    assert not (shared / "planted.txt").exists() and not (shared / "triton" / "planted.txt").exists()
    assert result.isolation is not None and result.isolation.shared_caches == "sealed"
    assert str(shared) not in " ".join(result.isolation.writable)
    assert any(f.code == "write_outside_scratch" for f in result.flags), [f.code for f in result.flags]


def test_a_worker_gone_before_its_answer_ends_the_broker_thread_quietly(tmp_path: Path) -> None:
    """Ctrl-C (or a killed worker) closes the reply pipe's reader while a build is answered: the
    broker stops serving without a traceback on the user's terminal (CI saw one at close)."""
    import os
    import threading

    errors: list[BaseException] = []
    hook = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)  # type: ignore[assignment]
    try:
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        os.close(reply_r)  # the worker is gone
        os.write(request_w, b"not json\n")
        os.close(request_w)
        thread = threading.Thread(
            target=BuildBroker(tmp_path / "cache", {}, timeout_s=5)._serve, args=(request_r, reply_w)
        )
        thread.start()
        thread.join(timeout=30)
    finally:
        threading.excepthook = hook
    assert not thread.is_alive() and errors == []
    for fd in (request_r, reply_w):  # both ends were closed by the broker
        with pytest.raises(OSError):
            os.fstat(fd)


def _server_children() -> dict[int, int | None]:
    """Every fork server's children this process knows of, with their exit codes (None: running)."""
    return {pid: server.returncode(pid) for server in forkserver._SERVERS.values() for pid in server._children}


@pytest.mark.parametrize("fork", [False, True], ids=["afresh", "forked"])
def test_a_builder_is_forked_from_the_server_where_asked(tmp_path: Path, fork: bool) -> None:
    """The builder forked from the fork server (torch already imported there) is the server's
    child and builds what a builder started afresh builds; without `fork` no child is forked."""
    before = _server_children()
    reply = BuildBroker(tmp_path / "cache", {}, timeout_s=120, fork=fork).handle(_fast(name=f"kw_broker_{fork:d}"))
    assert reply["ok"] and reply["cached"] is False, reply.get("log")
    new = {pid: code for pid, code in _server_children().items() if pid not in before}
    assert list(new.values()) == ([0] if fork else []), new
    library = ctypes.CDLL(reply["library"])
    out = ctypes.c_int(0)
    assert library.answer(ctypes.byref(out)) == 0 and out.value == 42


@needs_landlock
def test_a_forked_builder_writes_only_in_its_key_s_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside.d"
    broker = BuildBroker(tmp_path / "cache", {}, timeout_s=120, fork=True)
    reply = broker.handle(_fast(flags=["-MD", "-MF", str(outside)]))
    assert not reply["ok"], "the forked builder wrote outside its folder"
    assert not outside.exists()


def test_a_forked_builder_past_its_limit_is_killed_with_its_compiler(tmp_path: Path) -> None:
    """g++ told to include a FIFO waits on it for ever: the build ends at its limit, the builder
    and the compiler it started killed, and the reply says why."""
    fifo = tmp_path / "never.h"
    os.mkfifo(fifo)
    before = _server_children()
    reply = BuildBroker(tmp_path / "cache", {}, timeout_s=3, fork=True).handle(_fast(flags=["-include", str(fifo)]))
    assert not reply["ok"] and "the build took longer than 3 s" in reply["log"]
    [pid] = [pid for pid in _server_children() if pid not in before]
    server = next(s for s in forkserver._SERVERS.values() if pid in s._children)
    assert server.wait(pid, 30) == -9
    compilers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and str(fifo) in _cmdline(p)]
    assert compilers == []


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_a_builder_whose_server_cannot_start_is_started_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(forkserver, "ZYGOTE_MODULE", "kernelwright.no_such_module")
    monkeypatch.setattr(forkserver, "_SERVERS", {})
    monkeypatch.setattr(forkserver, "_FAILED", set())
    try:
        reply = BuildBroker(tmp_path / "cache", {}, timeout_s=120, fork=True).handle(_fast(name="kw_broker_afresh"))
        assert reply["ok"], reply.get("log")
        assert "cannot start workers" in caplog.text  # tried, and fell back
    finally:
        forkserver.stop_all()


def test_an_interrupt_while_a_builder_is_forked_leaves_no_descriptor_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt("interrupted: no new worker starts")

    monkeypatch.setattr(forkserver, "spawn", interrupted)
    broker = BuildBroker(tmp_path / "cache", {}, timeout_s=60, fork=True)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(KeyboardInterrupt):
        broker.handle(_fast(name="kw_broker_interrupted"))
    assert len(os.listdir("/proc/self/fd")) == before


def _build_in_thread(broker: BuildBroker, name: str) -> tuple[threading.Thread, list[dict]]:
    replies: list[dict] = []
    thread = threading.Thread(target=lambda: replies.append(broker.handle(_fast(name=name))), daemon=True)
    thread.start()
    return thread, replies


def test_a_gpu_job_s_builder_is_forked_during_a_timing_phase_from_a_server_the_phase_leaves_running(
    tmp_path: Path,
) -> None:
    """A GPU job's builders carry on through timing phases (`pausable=False`); forked, they come
    from a server of builders alone that the phase does not stop, so a build asked for while a
    candidate is timed does not wait for the phase to end. A CPU job's builders come from the
    worker's server (which the phase stops, as it must: no worker starts beside a measurement),
    so the same build waits."""
    gpu_like = BuildBroker(tmp_path / "cache", {}, timeout_s=120, pausable=False, fork=True)
    shared = BuildBroker(tmp_path / "cache", {}, timeout_s=120, pausable=True, fork=True)
    shared.handle(_fast(name="kw_broker_warm_shared"))  # both servers started before the phase
    gpu_like.handle(_fast(name="kw_broker_warm_apart"))  # afresh (the server is never waited for)
    apart_server = next(s for s in forkserver._SERVERS.values() if not s.pausable)
    assert apart_server.ready(120), apart_server.log_tail()
    before = _server_children()
    with live.quiet(keep=None):
        apart, apart_reply = _build_in_thread(gpu_like, "kw_broker_apart")
        apart.join(timeout=60)
        assert not apart.is_alive(), "the builder's server was stopped by the timing phase"
        waiting, waiting_reply = _build_in_thread(shared, "kw_broker_shared")
        waiting.join(timeout=3)
        assert waiting.is_alive() and not waiting_reply, "a worker's server forked during a timing phase"
    waiting.join(timeout=60)
    assert apart_reply[0]["ok"] and waiting_reply[0]["ok"], (apart_reply, waiting_reply)
    new = [pid for pid in _server_children() if pid not in before]
    parents = {pid: next(s for s in forkserver._SERVERS.values() if pid in s._children) for pid in new}
    assert sorted(s.pausable for s in parents.values()) == [False, True], parents


@pytest.mark.parametrize(
    ("device", "mode", "expected"),
    [
        ("cpu", "cpu", (True, True, False)),
        ("cuda", "cpu", (False, True, True)),
        ("cuda", "all", (False, True, True)),
        ("cpu", "0", (True, False, False)),
        ("cuda", "0", (False, False, True)),
        ("cuda", None, (False, True, True)),
    ],
)
def test_a_job_s_builders_are_forked_as_its_device_and_the_switch_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, device: str, mode: str | None, expected: tuple[bool, bool, bool]
) -> None:
    """(pausable, forked, from a server apart): a CPU job's builders pause with timing phases and
    come from its worker's server; a GPU job's carry on, and are forked (by default, the switch
    unset, too: they run no candidate code and time nothing) from a server a phase does not stop."""
    if mode is None:
        monkeypatch.delenv(forkserver.FORK_VAR, raising=False)
    else:
        monkeypatch.setenv(forkserver.FORK_VAR, mode)
    job = WorkerJob(
        mode="candidate", problem_path=tmp_path / "p.py", device=device, out_dir=tmp_path, build_cache=tmp_path / "c"
    )
    link = broker_link(job, {})
    broker = link.close.__self__  # type: ignore[attr-defined]
    try:
        assert (broker.pausable, broker.fork, broker.fork_apart) == expected
    finally:
        link.close()


class _GoneServer:
    """A fork server whose child ended (status 3) before it could build: no answer on its line."""

    def returncode(self, pid: int) -> int:
        return 3

    def wait(self, pid: int, timeout: float | None) -> int:
        return 3


def _count_builders(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The `fork` flag of every builder the broker starts from now on."""
    started: list[bool] = []

    class Counted(broker_module._Builder):
        def __init__(
            self, request_file: Path, env: dict[str, str], log_file: Path, pausable: bool, fork: bool, apart: bool
        ) -> None:
            started.append(fork)
            super().__init__(request_file, env, log_file, pausable, fork, apart)

    monkeypatch.setattr(broker_module, "_Builder", Counted)
    return started


def test_a_forked_builder_that_ends_without_an_answer_is_built_again_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A forked builder that dies before building (the server's side, not the candidate's) must
    not turn into the candidate's build error: forking may only save time. The build is run once
    more, started afresh, and succeeds."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    monkeypatch.setattr(forkserver, "spawn", lambda *a, **k: forkserver.ForkedProcess(_GoneServer(), ended.pid))  # type: ignore[arg-type]
    started = _count_builders(monkeypatch)
    reply = BuildBroker(tmp_path / "cache", {}, timeout_s=120, fork=True).handle(_fast(name="kw_broker_gone"))
    assert reply["ok"], reply.get("log")
    assert started == [True, False] and "ended without an answer" in caplog.text
    out = ctypes.c_int(0)
    assert ctypes.CDLL(reply["library"]).answer(ctypes.byref(out)) == 0 and out.value == 42


def test_a_forked_builder_s_compile_error_is_the_answer_and_not_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The retry is only for a builder that gave no answer: a compiler error is the candidate's,
    reported once, from one build."""
    started = _count_builders(monkeypatch)
    broken = 'extern "C" int answer(int* out) { return *out + ; }\n'
    reply = BuildBroker(tmp_path / "cache", {}, timeout_s=120, fork=True).handle(
        _fast(name="kw_broker_broken", source=broken)
    )
    assert not reply["ok"] and "error" in reply["log"]
    assert started == [True] and "ended without an answer" not in caplog.text
