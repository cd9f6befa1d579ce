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
import traceback
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


def build_torch(request: dict[str, Any], folder: Path, record: dict[str, Any]) -> str:
    """`load_inline` / `load` with the request's arguments, in `folder`; the library's path. With
    `request["pch"]` (set by the broker, never by the worker), the C++ file is compiled with that
    precompiled `torch/extension.h` where it fits (`headers.py`), and with `request["light_cu"]`,
    `request["nvcc_split"]` and `request["op_headers"]` (the broker's too) a CUDA build's `.cu`
    with the light header, nvcc's front ends at once and torch's per-operator headers where they
    fit (`ninja_runs.py`);
    `record["headers"]` (and `record["cuda"]`) say how."""
    import torch.utils.cpp_extension as cpp

    from kernelwright.harness.building import ninja_runs

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
    if request["kind"] == "inline":
        pch = Path(request["pch"]) if request.get("pch") else None
        if pch is None:
            record["headers"] = f"plain: {request.get('pch_note') or 'no precompiled header'}"
        cpp._run_ninja_build = ninja_runs.ninja_runner(  # type: ignore[assignment]
            cpp._run_ninja_build,
            pch,
            record,
            light=bool(request.get("light_cu")),
            split=bool(request.get("nvcc_split")),
            ops=bool(request.get("op_headers")),
        )
    builder = cpp.load if request["kind"] == "load" else cpp.load_inline
    result = builder(**spec)
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
    request = json.loads(Path(argv[1]).read_text())
    folder = Path(request["folder"])
    inputs = request.get("inputs") if request["kind"] == "pch" else None
    cuda = bool(request.get("with_cuda")) or request.get("lang") == "cuda" or bool(inputs and inputs.get("with_cuda"))
    _confine(folder, cuda and request["kind"] not in ("fastext", "pch"))  # the fast form is given its architecture
    record: dict[str, Any] = {}
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
