"""The CPU's one-thread look end to end (#28): real workers with two intra-op threads, fast-form
C++ candidates (built in about a second). A loaded machine is stood in for by a kernel that
spins while profiled with several threads (what a parallel region's barrier waits do to a
profile on an oversubscribed CPU); the hacks the timed-vs-profiled rules exist for still lose."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.harness.result import EvalResult
from kernelwright.harness.session import evaluate
from kernelwright.problems import load_problem_file
from tests.candidates import harness_options, write_case

# Alone (`make test` runs it after the parallel suite): it stands a loaded machine in for with a
# kernel that spins while profiled; a real neighbour on CI's 2 cores (the other xdist worker) once
# slowed every profiled call at one thread 4x (0.501 ms against 0.115 ms timed) and the honest case
# was rejected: noise the test does not model, which docs/harness.md records.
pytestmark = [pytest.mark.slow, pytest.mark.alone]

SOURCE = r'''
import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <time.h>

static double now_us() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

extern "C" int relu(const float* x, float* y, int64_t n, int64_t wait_us) {
    if (wait_us > 0) {
        const double until = now_us() + wait_us;
        while (now_us() < until) {}
    }
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
"""

lib = load_kernels("kw_relu_look", SOURCE, {"relu": "ptr, ptr, i64, i64"}, lang="cpp")


def watched():
    return getattr(torch.autograd.profiler, "_is_" + "profiler_enabled")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
BODY
'''

# ReLU on 1024 x 1024 (4 MB): long enough a call (~0.3 ms on one thread) that a kernel on one
# element is far from its fastest call; relu's own small size (64 x 1024) is within a ctypes
# call's overhead of it.
PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
"""

# Honest: a loaded machine stood in for, slowing every profiled call with several threads; by
# 20 ms, so that the timed calls stay under half of it however loaded the machine running the
# test is (with 3 ms, a CI run's fastest timed call under load came within 2x: no rule tripped and
# nothing was left for the look to decide).
LOADED_PROFILE = """        lib.relu(x, y, x.numel(), 20000 if watched() and torch.get_num_threads() > 1 else 0)
        return y
"""
# Its kernel on one element, PyTorch doing the work, whenever it is not profiled.
SLICE_UNLESS_PROFILED = """        if watched():
            lib.relu(x, y, x.numel(), 0)
            return y
        lib.relu(x, y, 1, 0)
        return torch.clamp_min(x, 0.0)
"""
# The same, but only while several threads are configured (honest at one thread).
SLICE_WITH_THREADS = """        if watched() or torch.get_num_threads() == 1:
            lib.relu(x, y, x.numel(), 0)
            return y
        lib.relu(x, y, 1, 0)
        return torch.clamp_min(x, 0.0)
"""


@pytest.fixture(scope="module")
def looked(tmp_path_factory: pytest.TempPathFactory, shared_home: Path) -> dict[str, EvalResult]:
    folder = tmp_path_factory.mktemp("one-thread-look")
    cases = {"loaded_profile": LOADED_PROFILE, "slice_unless_profiled": SLICE_UNLESS_PROFILED}
    cases["slice_with_threads"] = SLICE_WITH_THREADS
    paths = [write_case(folder, name, SOURCE.replace("BODY\n", body)) for name, body in cases.items()]
    problem = folder / "relu_1m.py"
    problem.write_text(PROBLEM)
    opts = harness_options(shared_home, "cpu", timing=True, num_threads=2, size="default")
    return {Path(r.candidate).stem: r for r in evaluate(load_problem_file(problem), paths, opts)}


def _codes(result: EvalResult) -> set[str]:
    return {f.code for f in result.flags}


def test_a_profile_slowed_with_several_threads_is_acquitted_by_the_look(looked: dict[str, EvalResult]) -> None:
    result = looked["loaded_profile"]
    assert result.verdict.value == "correct", result.message
    assert "profiled_at_one_thread" in _codes(result), result.message
    # The look leaves the timing standing; the timing itself may still be too noisy to report on a
    # machine this busy (the test suite beside it: the pool stall or a wide interval withholds it).
    contended = [f.message for f in result.flags if f.code == "device_contended"]
    assert not any("the profile disagreed with the timing" in m for m in contended), contended
    assert "eager" in result.speedups or contended
    assert result.phase_seconds.get("one_thread_look", 0.0) > 0


def test_a_kernel_run_only_while_profiled_is_still_rejected(looked: dict[str, EvalResult]) -> None:
    result = looked["slice_unless_profiled"]
    assert (result.verdict.value, result.reason.value if result.reason else None) == (
        "rejected",
        "profile_mismatch",
    ), result.message
    # Rejected at one thread: after a disagreement with two threads ("as well"), or, on a machine
    # too busy for the two-thread comparison (its timing withheld), by the look alone.
    assert "with one intra-op thread as well" in result.message or "too busy to compare" in result.message


def test_a_kernel_skipped_only_with_several_threads_gains_no_speedup(looked: dict[str, EvalResult]) -> None:
    result = looked["slice_with_threads"]
    assert result.verdict.value == "correct" and result.speedups == {}, result.message
    # Idle, the look withholds them (`device_contended`: slower at one thread than two threads
    # explain). Loaded (a CI run), the baselines' cross-check may withhold them first, and then the
    # slowed timing may sit within what two threads explain: no speedup either way.
    assert _codes(result) & {"device_contended", "baselines_disagree"}, result.message
