"""What the harness records of a candidate's extensions while its worker loads and runs it: every
build (name, key, cached, seconds), and every call of the functions they hand out: counted and
clocked always (the timing phase compares the host time spent inside them with the profile's
view, so a candidate cannot run its kernel only while watched), and marked as a
`record_function` region while the dynamic check profiles the forward pass (`checks/dynamic.py`
tells the candidate's own work from library ops by those regions).

The worker hands `wrap` and `builds` to `kernelwright.problems.candidate.load_candidate`.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from typing import Any

REGION_PREFIX = "kw_ext::"
_perf_counter = time.perf_counter  # captured before any candidate is imported


class ExtensionRecorder:
    """What the candidate built and called."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.seconds = 0.0  # host time inside the extensions' functions, always counted
        self.profiling = False
        self.builds: list[dict[str, Any]] = []  # name, key, cached, seconds

    def wrap(self, fn: Any, qualified: str) -> Any:
        import torch

        recorder = self

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            recorder.calls[qualified] += 1
            start = _perf_counter()
            try:
                if recorder.profiling:
                    with torch.profiler.record_function(REGION_PREFIX + qualified):
                        return fn(*args, **kwargs)
                return fn(*args, **kwargs)
            finally:
                recorder.seconds += _perf_counter() - start

        return call
