"""Content-addressed build cache for candidate extensions.

The key covers the extension's name, sources, functions and flags, plus the toolchain (torch,
CUDA, compiler versions; for CUDA, the architectures it is built for: `fastext.cuda_arch_key`),
so the same kernel source never builds twice, even across candidate files. Each key gets its
own build folder guarded by an OS file lock (`flock`), which the OS releases when a build process
dies; torch's own `lock` file left by a killed build is removed under that lock so it can never
block the next build.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernelwright.fastext import BUILT_MARK, cache_folder, locked_folder, toolchain

__all__ = ["BUILT_MARK", "BuildCache", "cache_key", "json_safe"]

log = logging.getLogger(__name__)


def json_safe(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return str(value)


def cache_key(spec: dict[str, Any], *, with_cuda: bool) -> str:
    """sha256 over the build's inputs and the toolchain."""
    payload = json.dumps({"spec": json_safe(spec), "toolchain": toolchain(with_cuda)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


class BuildCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def folder(self, key: str) -> Path:
        return cache_folder(self.root, key)

    def is_built(self, key: str, name: str) -> bool:
        folder = self.folder(key)
        return any(folder.glob(f"{name}*.so")) or any(folder.glob(f"{name}*.pyd"))

    @contextmanager
    def locked(self, key: str) -> Iterator[Path]:
        """Hold the key's lock for the duration of a build; yields the build folder."""
        with locked_folder(self.root, key) as folder:
            stale = folder / "lock"  # torch's FileBaton; only a dead build can have left it now
            if stale.exists():
                log.warning("removing a stale build lock left by an interrupted build: %s", stale)
                stale.unlink(missing_ok=True)
            yield folder

    def clear_stale_batons(self) -> int:
        """Remove torch's `lock` files that no build holds (their key's flock is free): what an
        interrupted build leaves behind. Returns how many were removed."""
        removed = 0
        for baton in self.root.glob("*/*/lock"):
            flock_file = baton.parent.parent / f"{baton.parent.name}.lock"
            try:
                with open(flock_file, "a+") as handle:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    try:
                        baton.unlink(missing_ok=True)
                        removed += 1
                    finally:
                        fcntl.flock(handle, fcntl.LOCK_UN)
            except BlockingIOError:
                continue  # a build holds it: its baton is live
            except OSError as exc:
                log.debug("cannot check %s: %s", baton, exc)
        return removed
