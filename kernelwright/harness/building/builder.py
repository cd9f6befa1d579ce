"""The builder process of the trusted build step (`broker.py`): `python -m
kernelwright.harness.building.builder REQUEST.json`.

It runs no candidate file: it confines itself (writable: its key's build folder and its own
temporary folder), builds the extension the request describes with torch's `load_inline` /
`load` or kernelwright's fast form, and prints one JSON line, `{"ok": true, "library": PATH}`.
torch's loader is kept from importing the built module (its static initialisers are the
candidate's code): the worker that asked loads it.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelwright.harness.sandbox.isolation import MODE_VAR, SandboxMode


def _confine(folder: Path, cuda: bool) -> None:
    """As a worker confines itself (the CUDA driver too: torch reads the device's architecture
    for a CUDA build), writable only in the key's folder and this builder's own folders."""
    from kernelwright.harness.sandbox import confine

    writable = [folder, Path(os.environ.get("TMPDIR") or folder), Path(os.environ.get("HOME") or folder)]
    mode = SandboxMode("strict" if os.environ.get(MODE_VAR) == "strict" else "best-effort")
    isolation = confine.confine(writable, mode, cuda=cuda)
    missing = isolation.missing() if mode == "strict" else []
    if missing:
        raise SystemExit(f"--sandbox strict: the builder could not isolate itself: {'; '.join(missing)}")


def _seconds_alive() -> float | None:
    """Seconds since this process was created (a forked builder: since its fork; one started
    afresh: its interpreter's start and imports included), from `/proc`; None where there is none."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, round(uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"), 2))
    except (OSError, ValueError, IndexError):
        return None


def build_torch(request: dict[str, Any], folder: Path, record: dict[str, Any]) -> str:
    """`load_inline` / `load` with the request's arguments, in `folder`; the library's path. With
    `request["pch"]` (set by the broker, never by the worker), the C++ file is compiled with that
    precompiled `torch/extension.h` where it fits (`headers.py`), and with `request["light_cu"]`,
    `request["nvcc_split"]` and `request["op_headers"]` (the broker's too) a CUDA build's `.cu`
    with the light header, nvcc's front ends at once and torch's per-operator headers where they
    fit (`ninja_runs.py`);
    `record["headers"]` (and `record["cuda"]`) say how."""
    start = time.perf_counter()
    import torch.utils.cpp_extension as cpp

    from kernelwright.harness.building import ninja_runs

    timeline = record.setdefault("timeline", {})
    timeline["import_s"] = round(time.perf_counter() - start, 3)  # torch (~0 in a forked builder)

    spec = dict(request["spec"])
    texts = spec.pop("source_text", None)
    name = spec["name"]
    if request["kind"] == "load":  # build the copies whose text the key covers, not the worker's files
        sources = []
        includes = list(spec.get("extra_include_paths") or [])
        for i, (path, text) in enumerate(zip(spec.get("sources") or [], texts or [], strict=True)):
            copy = folder / "sources" / f"{i}_{Path(path).name}"
            copy.parent.mkdir(exist_ok=True)
            copy.write_text(text)
            sources.append(str(copy))
            includes.append(str(Path(path).parent))  # its own headers, as when built where it lay
        spec["sources"], spec["extra_include_paths"] = sources, includes
    spec["build_directory"], spec["verbose"] = str(folder), True

    def path_only(module_name: str, path: str, is_python_module: bool) -> str:
        return os.path.join(path, f"{module_name}{cpp.LIB_EXT}")

    cpp._import_module_from_library = path_only  # type: ignore[attr-defined]  # build, do not load
    run_ninja: Callable[[str, bool, str], None] = cpp._run_ninja_build
    if request["kind"] == "inline":
        pch = Path(request["pch"]) if request.get("pch") else None
        if pch is None:
            record["headers"] = f"plain: {request.get('pch_note') or 'no precompiled header'}"
        run_ninja = ninja_runs.ninja_runner(
            run_ninja,
            pch,
            record,
            light=bool(request.get("light_cu")),
            split=bool(request.get("nvcc_split")),
            ops=bool(request.get("op_headers")),
        )

    def timed_ninja(*args: Any, **kwargs: Any) -> None:  # the compile and link, every attempt
        start = time.perf_counter()
        try:
            run_ninja(*args, **kwargs)
        finally:
            timeline["ninja_s"] = round(timeline.get("ninja_s", 0.0) + time.perf_counter() - start, 3)

    cpp._run_ninja_build = timed_ninja  # type: ignore[assignment]
    builder = cpp.load if request["kind"] == "load" else cpp.load_inline
    start = time.perf_counter()
    result = builder(**spec)
    timeline["torch_s"] = round(time.perf_counter() - start, 3)
    library = result if isinstance(result, str) else os.path.join(str(folder), f"{name}{cpp.LIB_EXT}")
    return str(library)


def build_fast(request: dict[str, Any], folder: Path) -> str:
    from kernelwright.fastext import compile_library

    return str(
        compile_library(
            folder,
            request["name"],
            request["source"],
            request["lang"],
            tuple(request.get("flags") or ()),
            request.get("arch") or None,
        )
    )


def prepare_headers(request: dict[str, Any], folder: Path) -> str:
    """The broker's own request (`pch`): the precompiled torch header for these inputs."""
    from kernelwright.harness.building import headers

    return str(headers.prepare(folder, request["inputs"]))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kernelwright.harness.building.builder REQUEST.json", file=sys.stderr)
        return 2
    alive = _seconds_alive()
    request = json.loads(Path(argv[1]).read_text())
    folder = Path(request["folder"])
    inputs = request.get("inputs") if request["kind"] == "pch" else None
    cuda = bool(request.get("with_cuda")) or request.get("lang") == "cuda" or bool(inputs and inputs.get("with_cuda"))
    start = time.perf_counter()
    _confine(folder, cuda and request["kind"] not in ("fastext", "pch"))  # the fast form is given its architecture
    # Where the builder's time went (the broker's reply carries it): its start (the interpreter;
    # ~0 forked), confining itself, then in `build_torch` importing torch (~0 forked), torch's
    # `load_inline`/`load` and the ninja run in it.
    record: dict[str, Any] = {"timeline": {"start_s": alive, "confine_s": round(time.perf_counter() - start, 3)}}
    try:
        if request["kind"] == "fastext":
            library = build_fast(request, folder)
        elif request["kind"] == "pch":
            library = prepare_headers(request, folder)
        else:
            library = build_torch(request, folder, record)
    except BaseException as exc:  # the compiler's output is already on stderr (verbose builds)
        print(traceback.format_exc(), file=sys.stderr)
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"[-4000:]}))
        return 1
    print(json.dumps({"ok": True, "library": library, **record}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
