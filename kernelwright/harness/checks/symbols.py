"""Which GPU kernels are the candidate's own, read from the shared objects its build produced.

The work-share check tells the candidate's kernels from PyTorch's by name. Names taken from the
source are not enough: a kernel built from a string made in `__init__` or with an f-string has no
name the static reader can find, and a substring match lets an own kernel called `kernel` claim
every ATen kernel. So the harness reads the symbol table of each library the candidate's worker
built (`nm`), keeps the CUDA kernels (nvcc gives each `__global__` function a host stub called
`__device_stub__<mangled name>`), demangles them (`c++filt`) and matches the profiler's kernel
names exactly. A kernel in PyTorch's own namespaces (`at::`, `c10::`, `torch::`) never counts as
the candidate's: declaring one is how an own kernel would pass for ATen's.

This runs in the harness's process, on files the build cache holds; the candidate's worker only
reports where its libraries are.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kernelwright.problems.candidate.kernel_names import base_name, in_torch_namespace, normalize

logger = logging.getLogger(__name__)

STUB_PREFIX = "__device_stub__"
_TOOL_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class OwnKernels:
    """The candidate's CUDA kernels (demangled signatures), or why they could not be read."""

    names: tuple[str, ...]
    read: bool
    """False when a library could not be read (no `nm`, a library outside the build cache...):
    the caller then falls back to the names in the source."""
    note: str = ""
    excluded: tuple[str, ...] = ()
    """Kernels declared in PyTorch's namespaces: never the candidate's own."""


def _run(args: list[str], stdin: str | None = None) -> str:
    done = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S, check=True)
    return done.stdout


_STUB = re.compile(r"__device_stub__([A-Za-z0-9_]+)")


def _kernel_symbols(library: Path) -> list[str]:
    """Mangled names of the `__global__` functions defined in `library`: nvcc's host stub of a
    kernel `_Z...` is `__device_stub__Z...` (itself mangled, and inside the kernel's namespace),
    so the kernel's name is read out of the stub's demangled name."""
    symbols = [line.split()[-1] for line in _run(["nm", "--defined-only", str(library)]).splitlines() if line.split()]
    stubs = [symbol for symbol in symbols if STUB_PREFIX in symbol]
    if not stubs:
        return []
    kernels = set()
    for demangled in _run(["c++filt"], "\n".join(stubs) + "\n").splitlines():
        match = _STUB.search(demangled)
        if match is None:
            continue
        name = match.group(1)
        kernels.add("_" + name if name.startswith("Z") else name)  # extern "C" kernels are not mangled
    return sorted(kernels)


def own_kernels(libraries: Iterable[Path], cache_root: Path) -> OwnKernels:
    """The CUDA kernels defined in `libraries` (each must lie inside `cache_root`)."""
    libraries = list(libraries)
    if not libraries:
        return OwnKernels((), True, "no library was built")
    if shutil.which("nm") is None or shutil.which("c++filt") is None:
        return OwnKernels((), False, "nm/c++filt (binutils) not found: own kernels taken from the source")
    root = cache_root.resolve()
    mangled: list[str] = []
    for library in libraries:
        path = Path(library).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            return OwnKernels((), False, f"{library} is not a library in the build cache")
        try:
            mangled += _kernel_symbols(path)
        except (OSError, subprocess.SubprocessError) as exc:
            return OwnKernels((), False, f"reading the symbols of {path.name} failed: {exc}")
    if not mangled:
        return OwnKernels((), True, "the libraries define no CUDA kernel")
    try:
        demangled = _run(["c++filt"], "\n".join(mangled) + "\n").splitlines()
    except (OSError, subprocess.SubprocessError) as exc:
        return OwnKernels((), False, f"c++filt failed: {exc}")
    names = [d for d in dict.fromkeys(demangled) if d and not in_torch_namespace(d)]
    excluded = tuple(d for d in dict.fromkeys(demangled) if d and in_torch_namespace(d))
    logger.debug("own kernels: %s (excluded %s)", names, excluded)
    return OwnKernels(tuple(names), True, excluded=excluded)


class KernelMatcher:
    """Is a kernel the profiler saw one of the candidate's own? Exact demangled signatures when
    the libraries were read; otherwise the source's names, matched on the kernel's function name
    (never by substring, never in PyTorch's namespaces)."""

    def __init__(self, exact: Iterable[str] = (), by_name: Iterable[str] = ()) -> None:
        self.exact = {normalize(n) for n in exact if n}
        self.by_name = {n for n in by_name if n}

    def __bool__(self) -> bool:
        return bool(self.exact or self.by_name)

    def owns(self, kernel: str) -> bool:
        if normalize(kernel) in self.exact:
            return True
        if in_torch_namespace(kernel):
            return False
        return base_name(kernel) in self.by_name

    def to_json(self) -> dict[str, list[str]]:
        return {"exact": sorted(self.exact), "by_name": sorted(self.by_name)}
