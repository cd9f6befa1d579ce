"""The trusted build step: builds a worker asks for, done in a process of their own.

A candidate's worker may read the shared build cache but never write it (Landlock): otherwise a
candidate could leave a library of its own in the folder of another source's key, and the next
candidate (or the user's next run) with that source would load it. So the worker's
`load_inline`, `load` and `fastext.load_kernels` send their build's inputs to the harness over a
pipe (`BuildBroker`), and the harness:

1. computes the key itself from those inputs (never one the worker names);
2. under the key's lock, answers at once if the folder holds a build the harness marked complete;
3. else runs `harness/building/builder.py` in a fresh process, confined like a worker but writable
   only in that key's folder and a temporary folder of its own (no candidate can write there),
   with the worker's scrubbed environment;
4. marks the folder complete (`BUILT_MARK`, written by the harness, not the builder) and answers
   with the library's path, which the worker loads without writing anything.

Whatever the build's inputs make the compiler do (flags included) lands only in the folder of
those inputs' key: one candidate cannot change what another, with other inputs, loads.

The one thing shared across keys is torch's precompiled header (`headers.py`): the broker
prepares it (once per toolchain and flag set, in a builder writable only in the header's folder
under `<cache>/pch/`), marks it complete, and names it in the requests it hands its builders.
Whether a CUDA build's `.cu` may use the light header, the split nvcc and the per-operator headers
is the broker's word too (`light_cu`, `nvcc_split`, `op_headers` in the builder's request;
`ninja_runs.py` says how a build used them).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from kernelwright.fastext import build_key, locked_folder
from kernelwright.harness.building import headers, light_header, ninja_runs
from kernelwright.harness.building import op_headers as op_headers_module
from kernelwright.harness.sandbox.isolation import redact, scrubbed_env
from kernelwright.harness.workers import forkserver, live
from kernelwright.harness.workers.jobs import BUILD_FDS_VAR
from kernelwright.problems.candidate.cache import BUILT_MARK, BuildCache, cache_key

log = logging.getLogger(__name__)

FDS_VAR = BUILD_FDS_VAR  # "request_fd,reply_fd" in a worker: where it asks for builds
_MAX_REQUEST = 64 << 20  # one request line: sources of an extension, far below this
_LOG_TAIL = 20_000


BUILDER_MODULE = "kernelwright.harness.building.builder"
CLOSE_WAIT_S = 10.0  # at most, for killed builds' requests to end (`BuildBroker.close`)


class _Builder:
    """One builder process, registered with `live` (Ctrl-C ends it; a timing phase pauses it):
    forked from the fork server where `fork` says so and the server can (`forkserver.py`: the
    builder's imports, torch's among them, are already done there), else started afresh; `apart`:
    from a server of builders alone (`BuildBroker.fork_apart`)."""

    def __init__(
        self, request_file: Path, env: dict[str, str], log_file: Path, pausable: bool, fork: bool, apart: bool
    ) -> None:
        self.pausable = pausable  # see live.quiet
        self._log = open(log_file, "wb")  # noqa: SIM115 (closed in wait())
        self.proc: subprocess.Popen[bytes] | forkserver.ForkedProcess
        self._out: IO[bytes] | None = None  # the forked builder's stdout (Popen keeps its own)
        try:
            forked = self._fork(request_file, env, apart) if fork else None
            if forked is not None:
                self.proc = forked
            else:
                argv = [sys.executable, "-m", BUILDER_MODULE, str(request_file)]
                self.proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=self._log,
                    env=env,
                    start_new_session=True,
                )
        except BaseException:  # an interrupt while the server started, say: nothing left open
            self._log.close()
            raise
        self.pid = self.proc.pid
        live.add(self)

    def _fork(self, request_file: Path, env: dict[str, str], apart: bool) -> forkserver.ForkedProcess | None:
        read, write = os.pipe()
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            argv = ["kernelwright-builder", str(request_file)]
            forked = forkserver.spawn(
                argv, env, [devnull, write, self._log.fileno()], [0, 1, 2], entry="builder", apart=apart
            )
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(devnull)
            os.close(write)
        if forked is None:
            os.close(read)
            return None
        self._out = os.fdopen(read, "rb")
        return forked

    def wait(self, timeout_s: float) -> tuple[int | None, str]:
        try:
            if isinstance(self.proc, subprocess.Popen):
                out, _ = self.proc.communicate(timeout=timeout_s)
                code: int | None = self.proc.returncode
            else:
                out, code = self._wait_forked(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            out, code = b"", None
        finally:
            self._log.close()
            live.discard(self)
        return code, out.decode(errors="replace")

    def _wait_forked(self, timeout_s: float) -> tuple[bytes, int]:
        """Its stdout to the end (the compilers it started hold it too, as Popen's pipe) and its
        exit code, within `timeout_s` together."""
        out = self._out
        assert out is not None
        deadline = time.monotonic() + timeout_s
        chunks: list[bytes] = []

        def read() -> None:  # to the end: after a kill too, once the last holder is gone
            with out:
                chunks.append(out.read())

        reader = threading.Thread(target=read, daemon=True, name="kernelwright-builder-output")
        reader.start()
        code = self.proc.wait(timeout_s)
        reader.join(max(0.0, deadline - time.monotonic()))
        if reader.is_alive():  # a descendant still holds the pipe past the limit
            raise subprocess.TimeoutExpired("builder output", timeout_s)
        return b"".join(chunks), code

    def kill(self) -> None:
        if self.proc.poll() is None:
            live.kill_tree(self.proc.pid)
        live.discard(self)


class BuildBroker:
    """Serves one worker's build requests (a thread per worker; see the module's docstring)."""

    def __init__(
        self,
        cache_root: Path,
        env_extra: dict[str, str],
        timeout_s: float,
        *,
        pausable: bool = True,
        precompiled_headers: bool | None = None,
        light_cu: bool | None = None,
        nvcc_split: bool | None = None,
        op_headers: bool | None = None,
        fork: bool = False,
    ) -> None:
        """`pausable`: whether a timing phase (`live.quiet`) stops the builders. A GPU evaluation's
        builders run compilers only, on the CPU cores their requester was given (a batch keeps the
        timing cores apart), so there they carry on while a candidate is timed.
        `precompiled_headers`: whether `load_inline` C++ files use a precompiled torch header
        (`headers.py`); by default unless the environment says KERNELWRIGHT_PCH=0.
        `light_cu`, `nvcc_split`: whether a `load_inline` CUDA build's `.cu` may compile against
        the light `torch/extension.h` (`light_header.py`) and with nvcc's front ends at once
        (`nvcc_split.py`); by default unless KERNELWRIGHT_LIGHT_CU=0 / KERNELWRIGHT_NVCC_SPLIT=0.
        `op_headers`: whether such a `.cu`, with the light header, is compiled in torch's
        per-operator mode against trimmed operator lists (`op_headers.py`); by default unless
        KERNELWRIGHT_OP_HEADERS=0.
        `fork`: builders are forked from the fork server of their environment (the worker's, so
        the server its worker came from) where it can, else started afresh; builders that are not
        `pausable` from a server of builders alone, which timing phases do not stop either
        (`fork_apart`)."""
        self.cache = BuildCache(cache_root)
        self.precompiled_headers = headers.enabled() if precompiled_headers is None else precompiled_headers
        self.light_cu = light_header.enabled() if light_cu is None else light_cu
        self.nvcc_split = ninja_runs.split_enabled() if nvcc_split is None else nvcc_split
        self.op_headers = op_headers_module.enabled() if op_headers is None else op_headers
        self.env_extra, self.timeout_s, self.pausable, self.fork = dict(env_extra), timeout_s, pausable, fork
        self._builders: set[_Builder] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._handling = threading.Condition()  # requests being answered (each holds its key's lock)
        self._active = 0

    def serve(self, request_fd: int, reply_fd: int) -> None:
        """Answer requests (one JSON line each) until the worker closes its end."""
        threading.Thread(target=self._serve, args=(request_fd, reply_fd), daemon=True).start()

    def _serve(self, request_fd: int, reply_fd: int) -> None:
        requests, replies = os.fdopen(request_fd, "rb"), os.fdopen(reply_fd, "wb")
        try:
            for raw in requests:
                if len(raw) > _MAX_REQUEST:
                    answer: dict[str, Any] = {"ok": False, "log": "build request too large"}
                else:
                    with self._handling:
                        self._active += 1
                    try:
                        answer = self.handle(json.loads(raw))
                    except Exception as exc:  # a malformed request is the candidate's problem, not ours
                        log.debug("build request refused", exc_info=True)
                        answer = {"ok": False, "log": f"build request refused: {type(exc).__name__}: {exc}"}
                    finally:
                        with self._handling:
                            self._active -= 1
                            self._handling.notify_all()
                replies.write(json.dumps(answer).encode() + b"\n")
                replies.flush()
        except OSError:
            pass  # the worker is gone (killed, or the run interrupted): nobody is left to answer
        finally:
            # Closing flushes what a dead reader never took: that raises again, and the descriptor
            # is closed all the same.
            for stream in (replies, requests):
                with contextlib.suppress(OSError):
                    stream.close()

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """One build: from the cache if complete there, else built now; the reply the worker reads."""
        kind = request.get("kind")
        ours = ("pch", "pch_note", "folder", "light_cu", "nvcc_split", "op_headers")  # ours, never the worker's
        request = {k: v for k, v in request.items() if k not in ours}
        if kind == "fastext":
            name, source, lang = str(request["name"]), str(request["source"]), str(request["lang"])
            flags = [str(f) for f in request.get("flags") or []]
            key = build_key(name, source, lang, flags, str(request.get("arch") or ""))
            root = self.cache.root / "fastext"
        elif kind in ("inline", "load"):
            spec = request["spec"]
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                raise ValueError("spec must be an object with a name")
            name = spec["name"]
            key = cache_key(spec, with_cuda=bool(request.get("with_cuda")))
            root = self.cache.root
        else:
            raise ValueError(f"unknown build kind {kind!r}")
        if not name.replace("_", "a").isalnum():
            raise ValueError(f"extension name {name!r}: letters, digits and underscores only")
        start = time.perf_counter()
        with locked_folder(root, key) as folder:
            mark = folder / BUILT_MARK
            if mark.is_file():
                done = json.loads(mark.read_text())
                return {"ok": True, "cached": True, "key": key[:24], "folder": str(folder), **done, "seconds": 0.0}
            self._clear(folder)
            if kind == "inline":
                request = {
                    **request,
                    **self._headers_for(request),
                    "light_cu": self.light_cu,
                    "nvcc_split": self.nvcc_split,
                    "op_headers": self.op_headers,
                }
            ok, library, text, extra = self._run_builder(request, folder)
            seconds = time.perf_counter() - start
            # ninja_runs.py's record, and where the builder's time went (builder.py)
            record: dict[str, Any] = {k: extra[k] for k in ("headers", "cuda", "timeline") if k in extra}
            if "pch_seconds" in request:
                record["headers_prepared_s"] = request["pch_seconds"]
            if not ok:
                return {"ok": False, "key": key[:24], "log": text, "seconds": seconds, **record}
            mark.write_text(json.dumps({"library": library, **record}))
            return {
                "ok": True,
                "cached": False,
                "key": key[:24],
                "folder": str(folder),
                "library": library,
                "log": text,
                "seconds": seconds,
                **record,
            }

    def prepare_headers(self, extra_cflags: list[str] | None = None, *, with_cuda: bool = False) -> dict[str, Any]:
        """Prepare the precompiled torch header for `load_inline` C++ files with these flags now
        (say, when a session opens), so that the first candidate does not wait for it. Returns
        `{"pch": folder}` or `{"pch_note": why not}`."""
        spec = {"name": "kw_prepare", "extra_cflags": list(extra_cflags or [])}
        return self._headers_for({"kind": "inline", "spec": spec, "with_cuda": with_cuda})

    @property
    def fork_apart(self) -> bool:
        """Whether a forked builder comes from a server of builders alone: exactly those that are
        not `pausable` (timing phases leave that server running, as they leave its builders; from
        its worker's server, stopped by every phase, a builder's start would wait for the phase)."""
        return not self.pausable

    def _headers_for(self, request: dict[str, Any]) -> dict[str, Any]:
        """What the builder of this `load_inline` request is told about the precompiled torch
        header: its folder (`pch`), prepared now if this toolchain and flag set has none yet, or
        why there is none (`pch_note`). A header that failed to build is remembered as failed
        (its folder's mark) and never tried again for that key: the plain build goes on."""
        if not self.precompiled_headers:
            return {"pch_note": "precompiled headers are off"}
        inputs, why = headers.pch_inputs(request)
        if inputs is None:
            return {"pch_note": why}
        try:
            key = headers.pch_key(inputs)
        except (OSError, RuntimeError) as exc:
            return {"pch_note": f"no key for a precompiled header: {exc}"}
        start = time.perf_counter()
        with locked_folder(self.cache.root / headers.PCH_DIR, key) as folder:
            mark = folder / BUILT_MARK
            if mark.is_file():
                try:
                    done = json.loads(mark.read_text())
                except ValueError:
                    done = {}
                if done.get("ok"):
                    return {"pch": str(folder)}
                return {"pch_note": f"the precompiled header failed to build: {done.get('error', '?')}"}
            self._clear(folder)
            ok, manifest, text, _ = self._run_builder({"kind": "pch", "inputs": inputs}, folder)
            seconds = time.perf_counter() - start
            if manifest is None and self._closed:
                return {"pch_note": "the worker's evaluation has ended"}
            if (
                not ok and "the build took longer than" in text
            ):  # timed out (or stopped): not the header's fault, try again later
                return {"pch_note": "preparing the precompiled header timed out"}
            mark.write_text(json.dumps({"ok": ok, "seconds": seconds, "error": "" if ok else text[-2000:]}))
            if not ok:
                log.warning("the precompiled torch header failed to build (plain builds go on): %s", text[-500:])
                return {"pch_note": "the precompiled header failed to build"}
            return {"pch": str(folder), "pch_seconds": round(seconds, 3)}

    @staticmethod
    def _clear(folder: Path) -> None:
        """A folder without the mark holds an interrupted build (or one from before the mark):
        nothing in it is trusted, the builder starts from empty."""
        for entry in folder.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)

    def _run_builder(self, request: dict[str, Any], folder: Path) -> tuple[bool, str | None, str, dict[str, Any]]:
        """Run the builder for `request` in `folder`: (ok, the library's path, the log, the
        builder's answer). A forked builder that ended without an answer (it died before it could
        build: the server's side, not the candidate's) is run once more, started afresh, in the
        folder cleared: forking may only ever save time, never fail a build. A builder that
        answered (a compiler error included) or ran out of time is not run again."""
        outcome, forked = self._run_builder_once(request, folder, self.fork)
        ok, _, text, answer = outcome
        if forked and not ok and not answer and not self._closed and "the build took longer than" not in text:
            log.warning("a forked builder ended without an answer; building again, started afresh:\n%s", text[-1500:])
            self._clear(folder)
            outcome, _ = self._run_builder_once(request, folder, fork=False)
        return outcome

    def _run_builder_once(
        self, request: dict[str, Any], folder: Path, fork: bool
    ) -> tuple[tuple[bool, str | None, str, dict[str, Any]], bool]:
        """One builder's run (see `_run_builder`), and whether that builder was forked."""
        if self._closed:
            return (False, None, "the worker's evaluation has ended", {}), False
        with tempfile.TemporaryDirectory(prefix="kw-build-") as scratch:
            work = Path(scratch)
            (work / "request.json").write_text(json.dumps({**request, "folder": str(folder)}))
            env = scrubbed_env(os.environ, self.env_extra, home=work / "home", tmp=work / "tmp")
            (work / "home").mkdir()
            (work / "tmp").mkdir()
            builder = _Builder(work / "request.json", env, work / "build.log", self.pausable, fork, self.fork_apart)
            forked = isinstance(builder.proc, forkserver.ForkedProcess)
            with self._lock:
                self._builders.add(builder)
            try:
                code, out = builder.wait(self.timeout_s)
            finally:
                with self._lock:
                    self._builders.discard(builder)
            lines = out.strip().splitlines()
            try:
                answer = json.loads(lines[-1]) if lines else {}
                lines = lines[:-1]
            except ValueError:
                answer = {}
            # The compiler's own lines (ninja prints them on stdout), then the builder's log.
            compiler = "\n".join(lines)
            text = redact(compiler + "\n" + (work / "build.log").read_text(errors="replace"))[-_LOG_TAIL:]
        if code is None:
            return (False, None, text + f"\nthe build took longer than {self.timeout_s:.0f} s", {}), forked
        library = answer.get("library")
        if code != 0 or not answer.get("ok") or not isinstance(library, str):
            why = text or str(answer.get("error") or f"the builder exited with status {code}")
            return (False, None, why, answer), forked
        path = Path(library).resolve()
        if not path.is_file() or path.parent != folder.resolve():
            return (False, None, text + f"\nthe builder's library {library} is not in its build folder", answer), forked
        return (True, str(path), text, answer), forked

    def close(self) -> None:
        """End builds still running for this worker (it is gone, or timed out)."""
        self._closed = True
        with self._lock:
            builders = list(self._builders)
        for builder in builders:
            builder.kill()
        # A killed build's request still holds its key's lock until its answer is made: let it
        # end, so whoever clears the dead builds' leftovers next (a session closing) finds the
        # key free and torch's lock file removable.
        with self._handling:
            self._handling.wait_for(lambda: self._active == 0, timeout=CLOSE_WAIT_S)


def open_channel(broker: BuildBroker) -> tuple[dict[str, str], tuple[int, int], Callable[[], None]]:
    """Two pipes for one worker: returns the environment entry naming the worker's ends, those
    ends (to pass to the child and close here once it has started) and a function that starts
    serving on ours."""
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    os.set_inheritable(request_w, True)
    os.set_inheritable(reply_r, True)

    def start() -> None:
        broker.serve(request_r, reply_w)

    return {FDS_VAR: f"{request_w},{reply_r}"}, (request_w, reply_r), start
