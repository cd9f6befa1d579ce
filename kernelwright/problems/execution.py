"""Running a Python file's source as a fresh module: how problem files, candidate files and the
import check execute user code. No torch here: the import check's parent process stays light.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def exec_as_module(source: str, path: Path, name: str) -> ModuleType:
    """Run `source` as a fresh module registered under `name` (tracebacks name `path`); whatever
    the code raises propagates, and the half-made module is unregistered."""
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
