"""The shared build cache is written only by the harness's trusted build step (#14): a worker
asks for builds over a pipe, the harness keys them itself and builds each in a confined process
writable only in that key's folder. A candidate cannot plant a library for another source."""

from __future__ import annotations

import ctypes
import json
import os
import sys
from pathlib import Path

import pytest

from kernelwright.fastext import build_key, cache_folder
from kernelwright.harness.building.broker import BuildBroker
from kernelwright.harness.sandbox import confine
from kernelwright.harness.session import evaluate
from kernelwright.harness.workers import forkserver
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
