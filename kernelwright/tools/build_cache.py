"""Content-addressed build cache for candidate extensions.

The key covers the extension's name, sources, functions and flags, plus the toolchain (torch,
CUDA, compiler versions), so the same kernel source never builds twice, even across candidate
files. Each key gets its own build folder guarded by an OS file lock (`flock`), which the OS
releases when a build process dies; torch's own `lock` file left by a killed build is removed
under that lock so it can never block the next build.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import logging
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@functools.cache
def _tool_version(*cmd: str) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "absent"
    text = (done.stdout or done.stderr).strip().splitlines()
    return text[-1] if cmd[0] == "nvcc" and text else (text[0] if text else "unknown")


def toolchain(with_cuda: bool) -> dict[str, str]:
    import torch

    chain = {
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "cxx": _tool_version(os.environ.get("CXX", "c++"), "--version"),
    }
    if with_cuda:
        chain["nvcc"] = _tool_version("nvcc", "--version")
        chain["arch"] = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    return chain


def _text(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return {str(k): _text(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_text(v) for v in value]
    return str(value)


def cache_key(spec: dict[str, Any], *, with_cuda: bool) -> str:
    """sha256 over the build's inputs and the toolchain."""
    payload = json.dumps({"spec": _text(spec), "toolchain": toolchain(with_cuda)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


class BuildCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def folder(self, key: str) -> Path:
        return self.root / key[:2] / key[:24]

    def is_built(self, key: str, name: str) -> bool:
        folder = self.folder(key)
        return any(folder.glob(f"{name}*.so")) or any(folder.glob(f"{name}*.pyd"))

    @contextmanager
    def locked(self, key: str) -> Iterator[Path]:
        """Hold the key's lock for the duration of a build; yields the build folder."""
        folder = self.folder(key)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder.parent / f"{key[:24]}.lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                stale = folder / "lock"  # torch's FileBaton; only a dead build can have left it now
                if stale.exists():
                    log.warning("removing a stale build lock left by an interrupted build: %s", stale)
                    stale.unlink(missing_ok=True)
                yield folder
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
