"""The one way a candidate file is loaded, in every process that runs one: the harness's worker
and the profiler's targets (`profiler/target.py` under ncu, `profiler/sweep_worker.py`).

Before the file runs, its builds are routed into the content-addressed build cache: the
`torch.utils.cpp_extension.load_inline` / `load` it calls build in the folder of their key
(`cache.py`), and `kernelwright.fastext` builds in the cache's `fastext/` folder. So
`kernelwright profile` after `kernelwright eval` reuses eval's builds instead of compiling again.

The torch functions are patched once per process and read the routing in force when they are
called, so loading again (another cache root, another recorder) never stacks one patch on another.
"""

from __future__ import annotations

import functools
import inspect
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright import fastext
from kernelwright.problems.candidate.cache import BUILT_MARK, BuildCache, cache_key
from kernelwright.problems.execution import exec_as_module

MODULE_NAME = "kernelwright_candidate"
Wrap = Callable[[Any, str], Any]  # wrap(fn, "extension.function") -> what the candidate gets instead
Remote = Callable[[dict[str, Any]], dict[str, Any]]  # a build request -> its reply (`remote.py`)


@dataclass
class _Routing:
    """Where builds go and who hears of them: set by every load, read by the patched functions."""

    cache: BuildCache | None = None
    remote: Remote | None = None  # the harness's trusted build step (a worker), else build here
    private: BuildCache | None = None  # where builds not complete in `cache` go, if `cache` is read-only
    wrap: Wrap | None = None
    builds: list[dict[str, Any]] = field(default_factory=list)
    patched: bool = False


_ROUTING = _Routing()


def load_candidate(
    path: Path,
    build_cache_root: Path,
    *,
    wrap: Wrap | None = None,
    builds: list[dict[str, Any]] | None = None,
    remote: Remote | None = None,
    private_root: Path | None = None,
) -> types.ModuleType:
    """Run the candidate file at `path` as the module `kernelwright_candidate`, its extensions
    built in (or taken from) the build cache under `build_cache_root`; with `remote` (a harness
    worker, which may not write the cache), built by the harness's trusted build step and only
    loaded here.

    Every build is appended to `builds` (name, key, cached, seconds, the built library's path;
    `fast` for the fast form),
    and every function an extension hands out is passed through `wrap` first. Whatever the file
    raises (a SyntaxError, a compiler error) propagates."""
    _route_builds(Path(build_cache_root), wrap, builds if builds is not None else [], remote, private_root)
    path = Path(path)
    return exec_as_module(path.read_text(), path, MODULE_NAME)


def _route_builds(
    cache_root: Path,
    wrap: Wrap | None,
    builds: list[dict[str, Any]],
    remote: Remote | None,
    private_root: Path | None = None,
) -> None:
    private_fast = private_root / "fastext" if private_root is not None else None
    fastext.configure(cache_root / "fastext", wrap=wrap, builds=builds, remote=remote, private_root=private_fast)
    _ROUTING.cache, _ROUTING.wrap, _ROUTING.builds = BuildCache(cache_root), wrap, builds
    _ROUTING.remote, _ROUTING.private = remote, BuildCache(private_root) if private_root is not None else None
    if not _ROUTING.patched:
        _patch_cpp_extension()
        _ROUTING.patched = True


def _wrap_module(module: types.ModuleType, ext_name: str, wrap: Wrap) -> types.ModuleType:
    proxy = types.ModuleType(module.__name__, module.__doc__)
    for attr in dir(module):
        value = getattr(module, attr)
        if attr.startswith("__") or not callable(value):
            setattr(proxy, attr, value)
            continue
        setattr(proxy, attr, wrap(value, f"{ext_name}.{attr}"))
    return proxy


def _patch_cpp_extension() -> None:
    import torch.utils.cpp_extension as cpp

    original_inline, original_load = cpp.load_inline, cpp.load
    inline_sig, load_sig = inspect.signature(original_inline), inspect.signature(original_load)

    def build(original: Any, sig: inspect.Signature, args: tuple, kwargs: dict, files: bool) -> Any:
        cache, wrap, builds = _ROUTING.cache, _ROUTING.wrap, _ROUTING.builds
        assert cache is not None  # patched only by _route_builds, which sets the cache first
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        spec = {k: v for k, v in bound.arguments.items() if k not in ("build_directory", "verbose")}
        if files:  # `load(sources=[paths])`: the key must cover the files' contents
            spec["source_text"] = [Path(p).read_text(errors="replace") for p in spec.get("sources") or []]
        with_cuda = (
            bool(spec.get("cuda_sources"))
            or bool(spec.get("with_cuda"))
            or any(str(p).endswith(".cu") for p in (spec.get("sources") or []))
        )
        name = str(bound.arguments["name"])
        if _ROUTING.remote is not None:  # the harness computes the key (`building/broker.py`)
            module = _remote_build(_ROUTING.remote, spec, name, with_cuda, files, builds)
            if wrap is not None and isinstance(module, types.ModuleType):
                return _wrap_module(module, name, wrap)
            return module
        key = cache_key(spec, with_cuda=with_cuda)
        marked = cache.folder(key) / BUILT_MARK
        start = time.perf_counter()
        if marked.is_file():  # complete (the harness's build step marked it): load, write nothing
            module = cpp._import_module_from_library(name, str(marked.parent), bound.arguments["is_python_module"])
            cached = True
        else:
            cache = _ROUTING.private or cache
            with cache.locked(key) as folder:
                cached = cache.is_built(key, name)
                start = time.perf_counter()
                bound.arguments["build_directory"] = str(folder)
                bound.arguments["verbose"] = True  # the compiler's commands and output go to the build log
                module = original(*bound.args, **bound.kwargs)
        # the built shared object: its symbols are the candidate's own
        library = getattr(module, "__file__", None) or (module if isinstance(module, str) else None)
        builds.append(
            {
                "name": name,
                "key": key[:24],
                "cached": cached,
                "seconds": time.perf_counter() - start,
                "library": str(library) if library else None,
            }
        )
        if wrap is not None and isinstance(module, types.ModuleType):
            return _wrap_module(module, name, wrap)
        return module

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        return build(original_inline, inline_sig, args, kwargs, files=False)

    def load(*args: Any, **kwargs: Any) -> Any:
        return build(original_load, load_sig, args, kwargs, files=True)

    functools.update_wrapper(load_inline, original_inline)
    functools.update_wrapper(load, original_load)
    cpp.load_inline = load_inline
    cpp.load = load


def _plain(value: Any) -> Any:
    """`value` as JSON carries it to the builder: numbers, booleans and None kept (the cache key's
    `json_safe` spells them as text), anything else as text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


def _remote_build(
    remote: Remote, spec: dict[str, Any], name: str, with_cuda: bool, files: bool, builds: list[dict[str, Any]]
) -> Any:
    """Have the harness build the extension, then load its library (nothing is written here)."""
    import torch.utils.cpp_extension as cpp

    request = {"kind": "load" if files else "inline", "spec": _plain(spec), "with_cuda": with_cuda}
    reply = remote(request)
    log_text = str(reply.get("log") or "")
    if log_text:
        sys.stderr.write(log_text if log_text.endswith("\n") else log_text + "\n")
    if not reply.get("ok"):
        raise RuntimeError(f"Error building extension '{name}':\n{log_text[-6000:]}")
    library = Path(str(reply["library"]))
    if spec.get("is_standalone"):
        module: Any = str(library)
    else:
        module = cpp._import_module_from_library(name, str(library.parent), spec.get("is_python_module", True))
    builds.append(
        {
            "name": name,
            "key": str(reply.get("key", "")),
            "cached": bool(reply.get("cached")),
            "seconds": float(reply.get("seconds", 0.0)),
            "library": str(library),
            # how the harness compiled its C++ file: with the precompiled torch header or plain
            **({"headers": str(reply["headers"])} if reply.get("headers") else {}),
        }
    )
    return module
