"""A precompiled `torch/extension.h` for `load_inline` C++ translation units (issue #29).

A cold `load_inline` build spends most of its C++ compile parsing torch's headers (~26 s of g++
on a 2-core machine, for a file of a few lines). GCC can load that parse from a precompiled
header (a `.gch`) instead: same tokens, same object code (checked byte for byte in
`scripts/bench_build.py`), about half the time.

Who writes what:
- The `.gch` is shared across candidates, so only the harness's trusted build step writes it:
  the broker (`broker.py`) asks a builder process in `pch` mode (`prepare`), confined and writable
  only in the header's own folder under the build cache, `<cache>/pch/<key>/`, and marks the
  folder complete itself. A candidate's builder and worker may only read it.
- The key (`pch_key`) covers what the `.gch` depends on: torch's version and header location (and
  the header's size and time), the C++ compiler (its resolved path and `--version`), the Python
  headers, and the flag-bearing arguments of the candidate's `load_inline` call (`pch_inputs`).
  A candidate whose flags are not plain (`SAFE_FLAG`: -O, -std, -D, -U, -march, -f..., -W...) or
  that names include folders gets no precompiled header: the plain build, as before.

How a candidate's build uses it (`offer_pch`, run by `ninja_runs.py` in the candidate's builder): torch writes
`build.ninja`; if its `main.cpp` starts with `#include <torch/extension.h>` (load_inline puts it
first) and the C++ command, less the extension's name, is the command the `.gch` was built with
(the manifest's `signature`), the command gets `-isystem <pch>/include -Werror=invalid-pch`
first (and `-H`, whose trace, taken out of the log, is GCC's own record that it loaded the `.gch`):
GCC then finds `<pch>/include/torch/extension.h`, whose `.gch` it loads, or refuses with an
error when the `.gch` does not fit (another compiler, other flags, a damaged file). Any failure
that names the `.gch` reruns the plain `build.ninja`: a precompiled header never fails a
candidate. The wrapper header includes the real one by its absolute path, so even a `.gch`
GCC skips yields the same translation unit.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

ENV_SWITCH = "KERNELWRIGHT_PCH"  # "0": no precompiled headers (the plain build, as before)
MANIFEST = "pch.json"
PCH_DIR = "pch"  # under the build cache's root
HEADER = "torch/extension.h"
INCLUDE_LINE = "#include <torch/extension.h>"
_NAME_DEFINE = re.compile(r"\s*-DTORCH_EXTENSION_NAME=\S+")
# Flags a candidate may pass and still share a precompiled header: they change how the header is
# compiled, never where anything is read from or written to (no -I, -include, -o, -fplugin, @file).
SAFE_FLAG = re.compile(
    r"-(O[0-3sgz]?|std=[\w+]+|[DU][A-Za-z_]\w*(=[\w.+\-]*)?|m(arch|tune)=[\w\-]+|m[a-z0-9\-]+"
    r"|f(?!plugin|dump|profile|record|debug-prefix|file-prefix|macro-prefix|auto-profile)[a-z0-9\-]+(=[\w\-]+)?"
    r"|w|W(?!l,|a,|p,)[\w\-=]*|g[0-3]?|pthread|pipe)"
)


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


def pch_inputs(request: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The arguments of a build request that the C++ command's flags depend on, or None and why
    this build gets no precompiled header."""
    if request.get("kind") != "inline":
        return None, "not a load_inline build"
    spec = request.get("spec")
    if not isinstance(spec, dict):
        return None, "no spec"
    if spec.get("no_implicit_headers"):
        return None, "no_implicit_headers: main.cpp does not start with torch/extension.h"
    if spec.get("extra_include_paths"):
        return None, "extra include folders"
    flags = spec.get("extra_cflags") or []
    if isinstance(flags, str):
        flags = [flags]
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        return None, "extra_cflags not a list of strings"
    odd = [f for f in flags if not SAFE_FLAG.fullmatch(f)]
    if odd:
        return None, f"flags outside the shared set: {odd[:3]}"
    inputs = {
        "extra_cflags": list(flags),
        # A CUDA build's main.cpp too: with the light header and the split nvcc (ninja_runs.py) the
        # .cu's longest path (28 CPU-s on the 2-core host) is about main.cpp's plain compile
        # (24 CPU-s; 10 with the header), so main.cpp would set the build's time (bench_build.py).
        "with_cuda": bool(request.get("with_cuda") or spec.get("cuda_sources")),
    }
    return inputs, ""


@functools.lru_cache(maxsize=4)
def _compiler() -> dict[str, str]:
    name = os.environ.get("CXX", "c++")
    found = shutil.which(name)
    path = os.path.realpath(found) if found else name
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
        version = (done.stdout or done.stderr).strip()
    except (OSError, subprocess.TimeoutExpired):
        version = "absent"
    return {"cxx": name, "path": path, "version": version}


def torch_header() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise RuntimeError("torch is not installed")
    return Path(spec.origin).parent / "include" / HEADER


def pch_key(inputs: dict[str, Any]) -> str:
    """sha256 over the inputs, torch's header (where, version, size, time), the compiler and Python."""
    from importlib.metadata import version

    header = torch_header()
    stat = header.stat()
    payload = {
        "inputs": inputs,
        "torch": version("torch"),
        "header": [str(header), stat.st_size, stat.st_mtime_ns],
        "compiler": _compiler(),
        "python_include": sysconfig.get_path("include"),
        "cuda_home": os.environ.get("CUDA_HOME", "") if inputs.get("with_cuda") else "",
        "format": 1,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


# -- in a builder process -----------------------------------------------------------------------


def _ninja_vars(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"^(cxx|cflags|post_cflags)\s*=\s?(.*)$", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def signature(build_ninja: str) -> str:
    """The C++ compile command of a `build.ninja`, without the extension's name."""
    found = _ninja_vars(build_ninja)
    cflags = _NAME_DEFINE.sub("", found.get("cflags", "")).strip()
    return json.dumps([found.get("cxx", ""), cflags, found.get("post_cflags", "").strip()])


def prepare(folder: Path, inputs: dict[str, Any]) -> Path:
    """Build the precompiled header for `inputs` in `folder` (a builder in `pch` mode): torch
    writes the `build.ninja` of an empty extension with those inputs; its C++ command, less the
    extension's name, compiles the wrapper header. Returns the manifest's path."""
    import torch.utils.cpp_extension as cpp

    probe = folder / "probe"
    probe.mkdir(parents=True, exist_ok=True)
    seen: dict[str, str] = {}

    def capture(build_directory: str, verbose: bool, error_prefix: str) -> None:
        seen["ninja"] = (Path(build_directory) / "build.ninja").read_text()

    original = cpp._run_ninja_build
    cpp._run_ninja_build = capture
    if inputs["with_cuda"] and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        # torch reads the devices' architecture for the .cu's flags, which the C++ command does
        # not carry; this builder need not see a GPU (nor start its driver) to write main.cpp's
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
    try:
        cpp.load_inline(
            name="kw_pch_probe",
            cpp_sources="",
            extra_cflags=inputs["extra_cflags"],
            with_cuda=inputs["with_cuda"],
            build_directory=str(probe),
        )
    except Exception:
        if "ninja" not in seen:
            raise
    finally:
        cpp._run_ninja_build = original
    text = seen["ninja"]
    found = _ninja_vars(text)
    wrapper = folder / "include" / HEADER
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(f'#include "{torch_header()}"\n')  # the real header is `#pragma once`
    gch = wrapper.with_name(wrapper.name + ".gch")
    cflags = _NAME_DEFINE.sub("", found.get("cflags", ""))
    command = [
        *shlex.split(found["cxx"]),
        *shlex.split(cflags),
        "-x",
        "c++-header",
        str(wrapper),
        "-o",
        str(gch),
        *shlex.split(found.get("post_cflags", "")),
    ]
    print(shlex.join(command), flush=True)
    subprocess.run(command, check=True, stdout=sys.stdout.fileno(), stderr=subprocess.STDOUT)
    shutil.rmtree(probe, ignore_errors=True)
    manifest = folder / MANIFEST
    manifest.write_text(
        json.dumps({"signature": signature(text), "gch": str(gch), "size": gch.stat().st_size, "inputs": inputs})
    )
    return manifest


_TRACE_LINE = re.compile(r"^(?:!|\.+|x) \S")


def header_trace(output: str, gch: Path) -> tuple[bool, str]:
    """Whether GCC's -H trace in `output` shows `gch` loaded, and `output` without the trace."""
    used, kept, guards = False, [], False
    for line in output.splitlines(keepends=True):
        if line.rstrip("\n") == f"! {gch}":
            used = True
        if line.startswith("Multiple include guards may be useful for:"):
            guards = True
            continue
        if guards and line.startswith("/") and ":" not in line:
            continue  # the header list -H ends with
        guards = False
        if not _TRACE_LINE.match(line):
            kept.append(line)
    return used, "".join(kept)


def run_ninja(build_directory: str) -> subprocess.CompletedProcess[str]:
    import torch.utils.cpp_extension as cpp

    command = ["ninja", "-v"]
    workers = cpp._get_num_workers(True)
    if workers is not None:
        command += ["-j", str(workers)]
    sys.stdout.flush()
    return subprocess.run(
        command, cwd=build_directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False
    )


def offer_pch(build_directory: Path, plain: str, pch_folder: Path | None) -> tuple[str | None, str]:
    """`build.ninja` with the precompiled header in the C++ command, or None and why not."""
    if pch_folder is None:
        return None, "no precompiled header for these flags"
    try:
        manifest = json.loads((pch_folder / MANIFEST).read_text())
        gch = pch_folder / "include" / (HEADER + ".gch")
        if gch.stat().st_size != manifest["size"]:
            return None, "the precompiled header's size is not its manifest's"
    except (OSError, ValueError, KeyError, TypeError):
        return None, "the precompiled header or its manifest is unreadable"
    if manifest.get("signature") != signature(plain):
        return None, "the C++ command differs from the precompiled header's"
    main = build_directory / "main.cpp"
    try:
        first = main.read_text(errors="replace").split("\n", 1)[0].strip()
    except OSError:
        return None, "no main.cpp"
    if first != INCLUDE_LINE:
        return None, "main.cpp does not start with torch/extension.h"
    include = shlex.quote(str(pch_folder / "include"))
    lines = plain.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("cflags = ") or line.rstrip("\n") == "cflags =":
            rest = line.split("=", 1)[1].lstrip(" ")
            lines[i] = f"cflags = -isystem {include} -Werror=invalid-pch -H {rest}"
            return "".join(lines), ""
    return None, "no cflags line in build.ninja"
