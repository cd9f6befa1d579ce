"""What the harness records of a candidate's extensions while its worker loads and runs it: every
build (name, key, cached, seconds), and every call of the functions they hand out: counted and
clocked always, the fastest call of each function kept per window (the timing phase's fastest
calls are compared with the profiled phase's, so a candidate cannot run its kernel only while
watched; the fastest call is what load cannot inflate), and marked as a
`record_function` region while the dynamic check profiles the forward pass (`checks/dynamic.py`
tells the candidate's own work from library ops by those regions).

The worker hands `wrap` and `builds` to `kernelwright.problems.candidate.load_candidate`.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

REGION_PREFIX = "kw_ext::"
_perf_counter = time.perf_counter  # captured before any candidate is imported


class ExtensionRecorder:
    """What the candidate built and called."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.seconds = 0.0  # host time inside the extensions' functions, always counted
        self.fastest: dict[str, float] = {}  # per function, its fastest call inside `window()`s
        self.profiling = False
        self.builds: list[dict[str, Any]] = []  # name, key, cached, seconds
        self._window = False

    def clear_fastest(self) -> None:
        self.fastest = {}

    @contextlib.contextmanager
    def window(self) -> Iterator[None]:
        """Calls made inside count towards `fastest` (e.g. only while the profiler records: calls
        between profiled rounds are not the profiled view)."""
        self._window = True
        try:
            yield
        finally:
            self._window = False

    def _took(self, qualified: str, seconds: float) -> None:
        self.seconds += seconds
        if not self._window:
            return
        best = self.fastest.get(qualified)
        if best is None or seconds < best:
            self.fastest[qualified] = seconds

    def wrap(self, fn: Any, qualified: str) -> Any:
        import torch

        recorder = self

        def clocked(*args: Any, **kwargs: Any) -> Any:
            start = _perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                recorder._took(qualified, _perf_counter() - start)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            recorder.calls[qualified] += 1
            if recorder.profiling:  # the clock runs inside the region: its own cost is not the call's
                with torch.profiler.record_function(REGION_PREFIX + qualified):
                    return clocked(*args, **kwargs)
            return clocked(*args, **kwargs)

        return call
