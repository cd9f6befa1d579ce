"""Will a problem file import on this machine, and if not, what is missing?

A KernelBench checkout holds files that need modules torch does not bring (`einops` for two of
level 3, `transformers` for all of level 4). `problems list` must say so before a user picks one,
without running anything: `static_status` reads the file's imports with `ast` and asks
`importlib.util.find_spec` whether each top-level module is installed (no code runs, a few
milliseconds a file). `check_imports` is the thorough answer: it imports each file for real, in
child processes with a timeout per file, so a file that fails for another reason (a version
mismatch, an error at module level) is caught too.

The child processes import many files one after another (torch is imported once per child, not
once per file); a child that crashes or hangs is killed and the next one resumes after the file
that did it.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from kernelwright.problems.execution import exec_as_module

# The pip package that installs a module, where the two names differ or the module is common.
PIP_PACKAGES = {
    "einops": "einops",
    "transformers": "transformers",
    "sklearn": "scikit-learn",
    "cv2": "opencv-python",
    "yaml": "pyyaml",
    "PIL": "pillow",
}
STARTUP_TIMEOUT_S = 180.0  # a child's own start: interpreter and torch, on a slow, busy machine
_ERROR_CHARS = 300


def pip_package(module: str) -> str:
    """The pip package to install for a missing top-level `module`."""
    return PIP_PACKAGES.get(module, module)


def install_hint(modules: Iterable[str]) -> str:
    return "pip install " + " ".join(dict.fromkeys(pip_package(m) for m in modules))


class ImportStatus(BaseModel):
    """Whether a problem file imports here: by reading its imports (`static`) or by importing it."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    missing: list[str] = []  # top-level modules that are not installed
    error: str | None = None  # any other failure (a real import only)
    checked: Literal["static", "import"] = "static"

    def describe(self) -> str:
        """Short, for a table cell: `ok`, `no: einops` (the missing modules), `no: RuntimeError`."""
        if self.ok:
            return "ok"
        if self.missing:
            return f"no: {', '.join(self.missing)}"
        return f"no: {(self.error or 'unknown').split(': ')[0]}"


@cache
def is_installed(module: str) -> bool:
    """Whether the top-level `module` can be imported here (found, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _guards_import_errors(node: ast.Try) -> bool:
    """`try: import x / except ImportError:` — the file copes without x."""
    for handler in node.handlers:
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        for kind in kinds:
            if kind is None or (
                isinstance(kind, ast.Name) and kind.id in {"ImportError", "ModuleNotFoundError", "Exception"}
            ):
                return True
    return False


def imported_modules(source: str) -> list[str]:
    """Top-level names of the modules `source` imports, in order, except relative imports and
    imports inside a `try` that handles ImportError."""
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Try) and _guards_import_errors(node):
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.extend(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return list(dict.fromkeys(names))


def static_status(source: str) -> ImportStatus:
    """Which of the modules `source` imports are not installed here; runs none of its code."""
    try:
        missing = [m for m in imported_modules(source) if not is_installed(m)]
    except SyntaxError as exc:  # the loader rejects these first; say so rather than guess
        return ImportStatus(ok=False, error=f"syntax error: {exc.msg}")
    return ImportStatus(ok=not missing, missing=missing)


def _failure(exc: BaseException) -> ImportStatus:
    name = getattr(exc, "name", None)
    if isinstance(exc, ModuleNotFoundError) and name and not is_installed(name.split(".")[0]):
        return ImportStatus(ok=False, missing=[name.split(".")[0]], checked="import")
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return ImportStatus(ok=False, error=text[:_ERROR_CHARS], checked="import")


def _child_main(paths: list[str]) -> None:
    """In a child process: import each file, one JSON line per file on the original stdout.
    What the files print goes to stderr, so it cannot be mistaken for a result."""
    results = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import torch  # noqa: F401  (once, before the files: their import time is their own)

    results.write(json.dumps({"ready": True}) + "\n")
    for i, path in enumerate(paths):
        try:
            source = Path(path).read_text(encoding="utf-8")
            exec_as_module(source, Path(path), f"kernelwright_import_check_{i}")
            status = ImportStatus(ok=True, checked="import")
        except BaseException as exc:  # the file's own code: every failure is its result
            status = _failure(exc)
        results.write(json.dumps({"path": path, **status.model_dump()}) + "\n")


def _read_line(proc: subprocess.Popen[bytes], pending: bytearray, timeout_s: float) -> bytes | None:
    """The child's next line, or None when it exits or stays silent for `timeout_s`."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while b"\n" not in pending:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            return None
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            return None
        pending.extend(chunk)
    line, _, rest = bytes(pending).partition(b"\n")
    pending[:] = rest
    return line


def _stop(proc: subprocess.Popen[bytes]) -> int | None:
    if proc.poll() is None:
        proc.kill()
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # killed but not reaped yet: nothing more to do
        return None


def _check_chunk(paths: list[Path], timeout_s: float) -> dict[Path, ImportStatus]:
    """Import `paths` in one child; after a crash or a hang, blame that file and start another."""
    found: dict[Path, ImportStatus] = {}
    todo = list(paths)
    while todo:
        cmd = [sys.executable, "-m", "kernelwright.problems.imports", *map(str, todo)]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        pending = bytearray()
        try:
            if _read_line(proc, pending, STARTUP_TIMEOUT_S) is None:
                error = f"the import checker did not start (exit code {_stop(proc)})"
                return found | {p: ImportStatus(ok=False, error=error, checked="import") for p in todo}
            while todo:
                line = _read_line(proc, pending, timeout_s)
                if line is None:  # this file hung or crashed the child
                    try:
                        code: int | None = proc.wait(timeout=1)  # output ended: a crash, or a hang
                    except subprocess.TimeoutExpired:
                        code = None
                    error = f"timed out after {timeout_s:g} s" if code is None else f"crashed (exit code {code})"
                    found[todo.pop(0)] = ImportStatus(ok=False, error=error, checked="import")
                    break
                doc = json.loads(line)
                found[todo.pop(0)] = ImportStatus.model_validate({k: v for k, v in doc.items() if k != "path"})
        finally:
            _stop(proc)
    return found


def check_imports(
    paths: Sequence[Path], *, timeout_s: float = 60.0, jobs: int | None = None
) -> dict[Path, ImportStatus]:
    """Import every file for real, in `jobs` child processes (default: one per core, at most 8);
    a file gets `timeout_s` seconds."""
    if not paths:
        return {}
    jobs = max(1, min(jobs or min(os.cpu_count() or 1, 8), len(paths)))
    chunks = [list(paths[i::jobs]) for i in range(jobs)]
    found: dict[Path, ImportStatus] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for part in pool.map(lambda chunk: _check_chunk(chunk, timeout_s), chunks):
            found.update(part)
    return found


if __name__ == "__main__":
    _child_main(sys.argv[1:])
