"""An evaluation that will not fit this machine's memory is refused up front (exit 5), with the
figure, the memory available and the flag that fits; shapes are read without allocating."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.errors import EnvironmentProblem
from kernelwright.harness.capacity import check_memory, estimate
from kernelwright.harness.options import EvalOptions
from kernelwright.problems import resolve_problem
from kernelwright.problems.footprint import measure
from tests.candidates.cpu_kit import CORRECT


def test_footprint_reads_default_shapes_without_allocating() -> None:
    footprint = measure(resolve_problem("relu"), "default")
    assert footprint.inputs[0].shape == (16384, 12288)  # type: ignore[union-attr]
    assert footprint.input_bytes == footprint.output_bytes == 16384 * 12288 * 4
    assert footprint.variants  # relu has held-out shapes


def test_the_estimate_counts_every_copy() -> None:
    footprint = measure(resolve_problem("relu"), "default")
    size = footprint.input_bytes
    need = estimate(footprint, EvalOptions(device="cpu"), scratch_in_ram=True)
    assert need.parts["scratch files"] == 4 * size  # outputs in flight; inputs are drawn in each process
    assert need.parts["expected outputs"] >= 8 * size  # every trial's, with no limit known
    assert need.host_bytes > 20 * size and "expected outputs" in need.describe()
    capped = estimate(footprint, EvalOptions(device="cpu"), scratch_in_ram=True, available=16 * size)
    assert capped.parts["expected outputs"] == 4 * size  # the reference's worker recomputes beyond its share
    in_temp = estimate(footprint, EvalOptions(device="cpu"), scratch_in_ram=False)
    assert in_temp.parts["scratch files"] == 0
    gpu = estimate(footprint, EvalOptions(device="cuda"), scratch_in_ram=True)
    assert gpu.parts["expected outputs"] == 0 and gpu.device_bytes > 8 * size  # held on the device there


def test_too_big_is_refused_with_the_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_MEMORY_LIMIT", str(4 << 30))
    problem = resolve_problem("relu")
    with pytest.raises(EnvironmentProblem) as caught:
        check_memory(problem, measure(problem, "default"), EvalOptions(device="cpu"), scratch_in_ram=True)
    line = caught.value.one_line()
    assert "needs about" in line and "4.3 GB available" in line and "`--size small` needs" in line
    small = measure(problem, "small")
    check_memory(problem, small, EvalOptions(device="cpu", size="small"), scratch_in_ram=True)  # fits: no error


def test_eval_refuses_before_starting_anything(tmp_path: Path) -> None:
    candidate = tmp_path / "good.py"
    candidate.write_text(CORRECT.source())
    done = subprocess.run(
        [sys.executable, "-m", "kernelwright", "eval", "relu", str(candidate), "--device", "cpu"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**__import__("os").environ, "KERNELWRIGHT_MEMORY_LIMIT": str(4 << 30)},
    )
    assert done.returncode == 5, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("environment: level1/1_relu at default size needs about") and "--size small" in last


SIGKILLED_REFERENCE = """import os, signal
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.device.type != "meta":  # the harness reads shapes on meta tensors first
            os.kill(os.getpid(), signal.SIGKILL)  # what the out-of-memory killer does
        return x


def get_inputs():
    return [torch.rand(8)]


def get_init_inputs():
    return []
"""


def test_an_out_of_memory_kill_is_the_machine_not_a_bad_problem_file(tmp_path: Path) -> None:
    problem = tmp_path / "killed.py"
    problem.write_text(SIGKILLED_REFERENCE)
    candidate = tmp_path / "cand.py"
    candidate.write_text(CORRECT.source())
    done = subprocess.run(
        [sys.executable, "-m", "kernelwright", "eval", str(problem), str(candidate), "--device", "cpu", "--no-timing"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 5, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("environment:") and "ran out of memory" in last and "bad problem file" not in last


def test_the_cpu_keeps_its_clean_baselines_only_while_they_are_small() -> None:
    """On the CPU the reference's process compiles the baselines once and keeps them for the
    session when they hold little (every candidate's cross-check then times them without
    compiling again); large ones would hold the memory the comparisons need."""
    from kernelwright.harness.capacity import KEPT_BASELINES_BYTES, keeps_baselines_on_host
    from kernelwright.harness.phases.reference import prepares_ahead
    from kernelwright.problems.footprint import Footprint, TensorShape
    from kernelwright.vocabulary import Size

    def footprint(nbytes: int) -> Footprint:
        tensor = TensorShape((nbytes // 4,), "float32", nbytes)
        return Footprint(Size.DEFAULT, [tensor], [], 0, [tensor])

    opts = EvalOptions(device="cpu", timing=True, baselines=("eager", "compile"))
    small, large = footprint(256 << 10), footprint(KEPT_BASELINES_BYTES)
    assert keeps_baselines_on_host(small, opts, available=8 << 30)
    assert not keeps_baselines_on_host(large, opts, available=64 << 30)  # over the fixed cap
    assert not keeps_baselines_on_host(small, opts, available=8 << 20)  # over a sixteenth of a tiny machine
    assert prepares_ahead(opts, measure(resolve_problem("relu"), Size.SMALL))
    assert not prepares_ahead(opts)  # no footprint: nothing known, nothing kept
    assert not prepares_ahead(dataclasses.replace(opts, timing=False), measure(resolve_problem("relu"), Size.SMALL))
    assert prepares_ahead(dataclasses.replace(opts, device="cuda"))  # on CUDA always
