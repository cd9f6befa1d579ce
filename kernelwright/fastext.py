"""Fast-building kernels: a C++ or CUDA translation unit with no torch header, compiled straight
to a shared library (`g++`/`nvcc -shared`, about a second, against 20-60 s for `load_inline`,
whose time is spent in torch's headers) and called through ctypes.

A candidate uses it like this (the form the agent is asked to write):

    from kernelwright.fastext import load_kernels
    lib = load_kernels("relu", CUDA_SOURCE, {"relu": "ptr, ptr, i64, stream"})
    ...
    lib.relu(x, y, x.numel())          # tensors pass their data pointers; the current CUDA
                                       # stream is appended for a `stream` parameter

Each function is `extern "C"` in the source and returns an `int` (0 = success, anything else
raises, e.g. the `cudaError_t` of `cudaGetLastError()` after a launch). Argument types: `ptr`
(a tensor, or None for NULL), `i32`, `i64`, `f32`, `f64`, and `stream` (filled in, never passed).
Builds go to a content-addressed cache: the one named through `configure()` by whoever loads
the candidate (the harness's worker, the profiler), else `$KERNELWRIGHT_FASTEXT_CACHE`, else a
folder in the temp dir.

This module sits at the bottom of the package (it imports nothing of kernelwright) so candidate
files can import it; the build cache of `load_inline` builds (`candidate/cache.py`) rests on its
`toolchain()` and `locked_folder()`, and `candidate/loader.py` calls `configure()` before it
loads a candidate.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import json
import os
import subprocess
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ARG_TYPES: dict[str, Any] = {
    "ptr": ctypes.c_void_p,
    "i32": ctypes.c_int32,
    "i64": ctypes.c_int64,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
    "stream": ctypes.c_void_p,
}
BUILD_TIMEOUT_S = 600.0
# Written in a key's folder by the harness's trusted build step once its build is complete
# (`harness/building/broker.py`): such a folder is loaded without writing anything.
BUILT_MARK = "kw-built.json"


@dataclass
class _Hooks:
    """What `configure()` sets before a candidate is loaded (`kernelwright.problems.candidate`)."""

    cache_root: Path | None = None
    wrap: Callable[[Any, str], Any] | None = None  # wraps each returned function (call counts, profiling)
    builds: list[dict[str, Any]] = field(default_factory=list)  # a record of every build
    # Where builds are done instead of here: a harness worker asks the harness's trusted build
    # step (request dict -> reply dict with "ok", "library", "cached", "seconds", "log").
    remote: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # Where builds not complete in `cache_root` are made, when `cache_root` may only be read.
    private_root: Path | None = None


_HOOKS = _Hooks()


def configure(
    cache_root: Path,
    wrap: Callable[[Any, str], Any] | None = None,
    builds: list[dict[str, Any]] | None = None,
    remote: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    private_root: Path | None = None,
) -> None:
    """Route builds into `cache_root` (or to `remote`) and report them: `wrap(fn, "name.fn")` is
    applied to every function handed out, and each build is appended to `builds` (name, key,
    cached, seconds)."""
    _HOOKS.cache_root = Path(cache_root)
    _HOOKS.wrap = wrap
    _HOOKS.builds = builds if builds is not None else []
    _HOOKS.remote = remote
    _HOOKS.private_root = private_root


@functools.cache
def _tool_version(*cmd: str) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "absent"
    text = (done.stdout or done.stderr).strip().splitlines()
    return text[-1] if cmd[0] == "nvcc" and text else (text[0] if text else "unknown")


ARCH_LIST_VAR = "TORCH_CUDA_ARCH_LIST"


@functools.cache
def gpu_capabilities() -> tuple[str, ...]:
    """Every GPU's compute capability on this host ("9.0", ...), in nvidia-smi's order (all GPUs,
    whatever CUDA_VISIBLE_DEVICES says); () without nvidia-smi, a GPU or a driver that answers
    (`compute_cap` needs driver 510 or later). Asked once per process; nothing starts the driver."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    caps = tuple(line.strip() for line in done.stdout.splitlines() if line.strip())
    if done.returncode != 0 or not all(c.replace(".", "", 1).isdigit() for c in caps):
        return ()
    return caps


def cuda_arch_key() -> str:
    """What decides a `load_inline` CUDA build's architecture flags, for its cache key:
    TORCH_CUDA_ARCH_LIST where it names architectures. Unset (or "native"), torch reads the
    visible GPUs' capabilities, so the key names them: every GPU's where the host has one kind,
    and where it has several, the variables that say which are visible (CUDA_VISIBLE_DEVICES,
    CUDA_DEVICE_ORDER) with them. A build cache shared by hosts with other GPUs (a home folder on
    a network disk) then never hands one GPU's build to another. No GPU found: the variable's value,
    as before."""
    listed = os.environ.get(ARCH_LIST_VAR, "")
    if listed and listed != "native":
        return listed
    caps = gpu_capabilities()
    if not caps:
        return listed
    kinds = sorted(set(caps))
    if len(kinds) == 1:
        return f"{listed or 'read'}: {kinds[0]}"
    visible = ",".join(f"{v}={os.environ.get(v, '')}" for v in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"))
    return f"{listed or 'read'}: {';'.join(caps)} ({visible})"


def toolchain(with_cuda: bool, arch: str | None = None) -> dict[str, str]:
    """The versions a build's output depends on (torch, CUDA, the compilers) and, for CUDA, its
    architectures: `arch` where the build names its own (the fast form), else what decides them
    (`cuda_arch_key`): part of every cache key."""
    import torch

    chain = {
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "cxx": _tool_version(os.environ.get("CXX", "c++"), "--version"),
    }
    if with_cuda:
        chain["nvcc"] = _tool_version("nvcc", "--version")
        chain["arch"] = cuda_arch_key() if arch is None else arch
    return chain


def cache_folder(root: Path, key: str) -> Path:
    return Path(root) / key[:2] / key[:24]


@contextmanager
def locked_folder(root: Path, key: str) -> Iterator[Path]:
    """The build folder of `key` under `root`, held under an OS file lock (`flock`, released by the
    OS when a build process dies) for as long as the caller builds in it."""
    folder = cache_folder(root, key)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{key[:24]}.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield folder
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class KernelBuildError(RuntimeError):
    """The compiler failed; the message holds its output ("Error building extension" is what the
    harness looks for to call it a compile error)."""


def _parse_signature(name: str, signature: str) -> list[str]:
    kinds = [part.strip() for part in signature.split(",") if part.strip()]
    unknown = [k for k in kinds if k not in ARG_TYPES]
    if unknown:
        raise ValueError(f"{name}: unknown argument type(s) {unknown}; use {sorted(ARG_TYPES)}")
    if kinds.count("stream") > 1:
        raise ValueError(f"{name}: at most one stream parameter")
    return kinds


def _cuda_arch() -> str:
    explicit = os.environ.get("KERNELWRIGHT_CUDA_ARCH")
    if explicit:
        return explicit
    import torch

    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        suffix = "a" if (major, minor) == (9, 0) else ""  # Hopper-only instructions (wgmma, TMA) need sm_90a
        return f"sm_{major}{minor}{suffix}"
    return "sm_90a"


def compile_command(
    source_file: Path, output: Path, lang: str, flags: tuple[str, ...], arch: str | None = None
) -> list[str]:
    if lang == "cuda":
        arch = arch or _cuda_arch()
        return [
            "nvcc",
            "-O3",
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-std=c++17",
            f"-arch={arch}",
            "-lineinfo",
            *flags,
            str(source_file),
            "-o",
            str(output),
        ]
    return [
        os.environ.get("CXX", "g++"),
        "-O3",
        "-shared",
        "-fPIC",
        "-std=c++17",
        "-fopenmp",
        "-march=native",
        *flags,
        str(source_file),
        "-o",
        str(output),
    ]


def _cache_root() -> Path:
    if _HOOKS.cache_root is not None:
        return _HOOKS.cache_root
    env = os.environ.get("KERNELWRIGHT_FASTEXT_CACHE")
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / "kernelwright-fastext"


def build_key(name: str, source: str, lang: str, flags: list[str] | tuple[str, ...], arch: str) -> str:
    """The cache key of a fast build: its inputs, the toolchain and (CUDA) the target architecture."""
    spec = {"name": name, "source": source, "lang": lang, "flags": list(flags)}
    chain = toolchain(with_cuda=lang == "cuda", arch=arch)
    return hashlib.sha256(json.dumps({"spec": spec, "toolchain": chain}, sort_keys=True).encode()).hexdigest()


def _build(name: str, source: str, lang: str, flags: tuple[str, ...]) -> tuple[Path, bool, float]:
    arch = _cuda_arch() if lang == "cuda" else ""
    if _HOOKS.remote is not None:
        request = {"kind": "fastext", "name": name, "source": source, "lang": lang, "flags": list(flags), "arch": arch}
        reply = _HOOKS.remote(request)
        if not reply.get("ok"):
            raise KernelBuildError(f"Error building extension '{name}':\n{str(reply.get('log', ''))[-6000:]}")
        return Path(reply["library"]), bool(reply.get("cached")), float(reply.get("seconds", 0.0))
    key = build_key(name, source, lang, flags, arch)
    start = time.perf_counter()
    mark = cache_folder(_cache_root(), key) / BUILT_MARK
    if mark.is_file():  # complete (the harness's build step marked it): read only, no lock taken
        return Path(json.loads(mark.read_text())["library"]), True, time.perf_counter() - start
    root = _HOOKS.private_root or _cache_root()
    with locked_folder(root, key) as folder:
        library = folder / f"lib{name}.so"
        if library.exists():
            return library, True, time.perf_counter() - start
        return compile_library(folder, name, source, lang, flags, arch or None), False, time.perf_counter() - start


def compile_library(
    folder: Path, name: str, source: str, lang: str, flags: tuple[str, ...], arch: str | None = None
) -> Path:
    """Compile `source` to `folder`/lib`name`.so (raises KernelBuildError with the compiler's output)."""
    library = folder / f"lib{name}.so"
    source_file = folder / (f"{name}.cu" if lang == "cuda" else f"{name}.cpp")
    source_file.write_text(source)
    partial = folder / f"lib{name}.so.partial"
    command = compile_command(source_file, partial, lang, flags, arch)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    except FileNotFoundError as exc:
        raise KernelBuildError(f"Error building extension '{name}': {command[0]} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise KernelBuildError(
            f"Error building extension '{name}': the compiler ran over {BUILD_TIMEOUT_S:.0f} s"
        ) from exc
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()
        raise KernelBuildError(f"Error building extension '{name}' ({' '.join(command)}):\n{output[-6000:]}")
    partial.replace(library)  # a build killed midway never leaves a library that looks complete
    return library


def _caller(lib: ctypes.CDLL, fn_name: str, kinds: list[str], lang: str) -> Callable[..., None]:
    try:
        fn = getattr(lib, fn_name)
    except AttributeError as exc:
        raise KernelBuildError(f'Error building extension: no extern "C" function {fn_name!r} in the library') from exc
    fn.argtypes = [ARG_TYPES[k] for k in kinds]
    fn.restype = ctypes.c_int
    passed = [k for k in kinds if k != "stream"]

    def call(*args: Any) -> None:
        if len(args) != len(passed):
            raise TypeError(f"{fn_name} takes {len(passed)} arguments ({', '.join(passed)}), got {len(args)}")
        values: list[Any] = []
        it = iter(args)
        for kind in kinds:
            if kind == "stream":
                import torch

                values.append(torch.cuda.current_stream().cuda_stream if lang == "cuda" else None)
                continue
            value = next(it)
            if kind == "ptr":
                values.append(None if value is None else value.data_ptr())
            else:
                values.append(value)
        status = fn(*values)
        if status != 0:
            raise RuntimeError(f"{fn_name} returned error code {status}")

    call.__name__ = fn_name
    return call


def load_kernels(
    name: str,
    source: str,
    functions: dict[str, str],
    *,
    lang: Literal["cuda", "cpp"] = "cuda",
    flags: tuple[str, ...] = (),
) -> types.SimpleNamespace:
    """Build (or take from the cache) and load `source`; return an object with one callable per
    entry of `functions` (name -> comma-separated argument types)."""
    if lang not in ("cuda", "cpp"):
        raise ValueError(f"lang must be 'cuda' or 'cpp', not {lang!r}")
    signatures = {fn: _parse_signature(fn, sig) for fn, sig in functions.items()}
    library, cached, seconds = _build(name, source, lang, tuple(flags))
    lib = ctypes.CDLL(str(library))
    namespace = types.SimpleNamespace()
    for fn_name, kinds in signatures.items():
        call: Any = _caller(lib, fn_name, kinds, lang)
        if _HOOKS.wrap is not None:
            call = _HOOKS.wrap(call, f"{name}.{fn_name}")
        setattr(namespace, fn_name, call)
    _HOOKS.builds.append(
        {
            "name": name,
            "key": library.parent.name,
            "cached": cached,
            "seconds": seconds,
            "fast": True,
            "library": str(library),
        }
    )
    return namespace
