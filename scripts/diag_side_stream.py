"""Diagnostic (not a test): hidden side-stream work on a ~20 µs problem (relu of 4096x4096 on a
GPU). Prints each candidate's verdict, and every timed function's event median, synchronised wall
median and their difference (the per-call excess the wall-time cross-check allows for).

    PYTHONPATH=$PWD python3 scripts/diag_side_stream.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from kernelwright.harness.session import evaluate
from kernelwright.problems import load_problem_file
from tests.candidates import harness_options, write_case
from tests.candidates.cpu_kit import _model
from tests.candidates.gpu_kit import CORRECT_CUDA, GpuCase

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
"""

# The side stream is made once, in __init__ (a stream made per call costs as much host time as the
# kernel takes, which the events then see).
_INIT = "super().__init__()\n        self.side = getattr(torch.cuda, 'Str' + 'eam')()"
_SIDE = (
    "        self.side.wait_stream(getattr(torch.cuda, 'current_' + 'stream')())\n"
    "        with getattr(torch.cuda, 'str' + 'eam')(self.side):\n"
    "            out = kit.relu_forward(x)\n"
    "        return out"
)
ALL_ON_SIDE = GpuCase(
    "all_work_on_a_side_stream", _model(_SIDE).replace("super().__init__()", _INIT), "rejected", "side_stream"
)
SIDE_UNLESS_PROFILED = GpuCase(
    "side_stream_unless_profiled",
    _model(
        "        if getattr(torch.autograd.profiler, '_is_' + 'profiler_enabled'):\n"
        "            return kit.relu_forward(x)\n" + _SIDE
    ).replace("super().__init__()", _INIT),
    "rejected",
    "profile_mismatch",
    also=("side_stream",),
)


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="kw-side-"))
    problem_file = home / "relu_4096.py"
    problem_file.write_text(PROBLEM)
    cases = [CORRECT_CUDA, ALL_ON_SIDE, SIDE_UNLESS_PROFILED]
    paths = [write_case(home / "cases", c.name, c.source()) for c in cases]
    opts = harness_options(home, "cuda", timing=True, size="default", baselines=("eager", "compile"))
    start = time.perf_counter()
    results = evaluate(load_problem_file(problem_file), paths, opts)
    for case, r in zip(cases, results, strict=True):
        ok = case.accepts(r.verdict.value, r.reason.value if r.reason else None)
        print(f"{'OK ' if ok else 'BAD'} {case.name}: {r.verdict.value}/{r.reason} {r.message[:240]}")
        for name, stats in r.timings.items():
            wall = r.wall_median_ms.get(name)
            excess = f"{(wall - stats.median_ms) * 1e3:.1f} us" if wall is not None else "-"
            print(f"    {name}: event median {stats.median_ms * 1e3:.1f} us, wall median "
                  f"{wall * 1e3 if wall else float('nan'):.1f} us, excess {excess}")  # fmt: skip
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
