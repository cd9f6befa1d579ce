"""Hooks the harness installs in a worker process *before* importing a candidate:

- `torch.utils.cpp_extension.load_inline` / `load` build into the content-addressed cache;
- the returned extension's functions are wrapped so the harness can tell whether (and how much)
  the candidate's own kernels ran: call counts always, and `record_function` regions while the
  dynamic check profiles the forward pass.
"""

from __future__ import annotations

import functools
import inspect
import time
import types
from collections import Counter
from pathlib import Path
from typing import Any

from kernelwright import fastext
from kernelwright.harness.build.cache import BuildCache, cache_key

REGION_PREFIX = "kw_ext::"


class ExtensionRecorder:
    """What the candidate built and called."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.profiling = False
        self.builds: list[dict[str, Any]] = []  # name, key, cached, seconds

    def wrap_module(self, module: types.ModuleType, ext_name: str) -> types.ModuleType:
        proxy = types.ModuleType(module.__name__, module.__doc__)
        for attr in dir(module):
            value = getattr(module, attr)
            if attr.startswith("__") or not callable(value):
                setattr(proxy, attr, value)
                continue
            setattr(proxy, attr, self.wrap(value, f"{ext_name}.{attr}"))
        return proxy

    def wrap(self, fn: Any, qualified: str) -> Any:
        import torch

        recorder = self

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            recorder.calls[qualified] += 1
            if recorder.profiling:
                with torch.profiler.record_function(REGION_PREFIX + qualified):
                    return fn(*args, **kwargs)
            return fn(*args, **kwargs)

        return call


def install(cache_root: Path, recorder: ExtensionRecorder) -> None:
    """Route load_inline/load through the build cache and wrap what they return; the fast path
    (`fastext.load_kernels`) builds into the same cache root and reports through the recorder."""
    import torch.utils.cpp_extension as cpp

    fastext.configure(Path(cache_root) / "fastext", wrap=recorder.wrap, builds=recorder.builds)

    cache = BuildCache(cache_root)
    original_inline, original_load = cpp.load_inline, cpp.load
    inline_sig, load_sig = inspect.signature(original_inline), inspect.signature(original_load)

    def build(original: Any, sig: inspect.Signature, args: tuple, kwargs: dict, files: bool) -> Any:
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
        key = cache_key(spec, with_cuda=with_cuda)
        name = str(bound.arguments["name"])
        with cache.locked(key) as folder:
            cached = cache.is_built(key, name)
            start = time.perf_counter()
            bound.arguments["build_directory"] = str(folder)
            bound.arguments["verbose"] = True  # the compiler's commands and output go to the build log
            module = original(*bound.args, **bound.kwargs)
            recorder.builds.append(
                {"name": name, "key": key[:24], "cached": cached, "seconds": time.perf_counter() - start}
            )
        if isinstance(module, types.ModuleType):
            return recorder.wrap_module(module, name)
        return module

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        return build(original_inline, inline_sig, args, kwargs, files=False)

    def load(*args: Any, **kwargs: Any) -> Any:
        return build(original_load, load_sig, args, kwargs, files=True)

    functools.update_wrapper(load_inline, original_inline)
    functools.update_wrapper(load, original_load)
    cpp.load_inline = load_inline
    cpp.load = load
