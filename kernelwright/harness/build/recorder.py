"""What the harness records of a candidate's extensions while its worker loads and runs it: every
build (name, key, cached, seconds), and every call of the functions they hand out, counted always
and marked as a `record_function` region while the dynamic check profiles the forward pass
(`checks/dynamic.py` tells the candidate's own work from library ops by those regions).

The worker hands `wrap` and `builds` to `kernelwright.problems.candidate.load_candidate`.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

REGION_PREFIX = "kw_ext::"


class ExtensionRecorder:
    """What the candidate built and called."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.profiling = False
        self.builds: list[dict[str, Any]] = []  # name, key, cached, seconds

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
