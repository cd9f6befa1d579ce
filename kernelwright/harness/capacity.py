"""How much memory an evaluation will take, decided before anything starts.

An evaluation at a problem's default size holds many copies of its tensors at once: each process
draws its inputs from seeds (no input is shipped), the candidate's outputs pass through scratch
files on their way to the reference's worker (in RAM-backed /dev/shm when it has room; each is
deleted once compared, and the timing phase writes its sampled outputs together), the reference's
worker keeps the trials' expected outputs (up to a share of the memory, `oracle.CACHE_SHARE`),
runs the model in fp32 and fp64 and compares in fp64, and the candidate's worker holds the
rotating timing inputs, the trial inputs and the outputs of the candidate and its baselines. On a machine without enough memory the
out-of-memory killer ends a worker minutes in; refusing up front, with the figure and the flag
that fits, is better. The estimate errs on the large side.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from kernelwright.errors import EnvironmentProblem
from kernelwright.harness.options import EvalOptions, plan_trials
from kernelwright.problems import Problem
from kernelwright.problems.footprint import Footprint, TensorShape, human_bytes, measure
from kernelwright.vocabulary import Size

# Headroom for what the estimate cannot see: interpreters, torch, allocator slack, compilers.
FIXED_OVERHEAD_BYTES = 5 << 29  # 2.5 GiB: sum_reduction at default size peaked 8.3 GB against 7.8 estimated without it
USABLE_FRACTION = 0.9


@dataclass(frozen=True)
class MemoryEstimate:
    """Host-memory bytes by part; `device_bytes` on the GPU (0 on the CPU)."""

    parts: dict[str, int]
    device_bytes: int

    @property
    def host_bytes(self) -> int:
        return sum(self.parts.values())

    def describe(self) -> str:
        shown = ", ".join(f"{name} {human_bytes(n)}" for name, n in self.parts.items() if n >= 1 << 20)
        return f"about {human_bytes(self.host_bytes)} of memory ({shown})"


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, or None where that is not known."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# Outputs in flight as files at once: the timing phase writes its sampled outputs together.
OUTPUT_FILES_AT_ONCE = 4
HELD_SHARE = 0.25  # the reference's worker holds expected outputs up to this share (oracle.CACHE_SHARE)


# On the CPU the reference's process keeps the baselines it prepared (compiled model and input
# sets) for the session only while they are this small: beside the comparisons they would hold the
# host memory those need, and then each timing of the clean baselines makes its own.
KEPT_BASELINES_BYTES = 256 << 20
KEPT_BASELINES_SHARE = 1 / 16


def timing_sets(input_bytes: int, opts: EvalOptions) -> int:
    """How many input sets a timing rotates through (`timing.run.InputPool`): its plan's count,
    fewer where they would pass its memory budget."""
    return min(opts.timing_plan.input_sets, max(1, opts.timing_plan.memory_budget_bytes // max(input_bytes, 1)))


def kept_baselines_bytes(footprint: Footprint, opts: EvalOptions) -> int:
    """What the reference's process holds when it keeps the baselines it prepared: the timing's
    input sets and one output."""
    inputs = footprint.largest_input_bytes
    outputs = footprint.output_bytes if footprint.output_bytes is not None else inputs
    return timing_sets(inputs, opts) * inputs + outputs + footprint.param_bytes


def keeps_baselines_on_host(footprint: Footprint, opts: EvalOptions, available: int | None) -> bool:
    """Whether, on the CPU, the reference's process makes the clean baselines once (torch.compile
    included) and keeps them, instead of compiling them again for every candidate's cross-check."""
    kept = kept_baselines_bytes(footprint, opts)
    limit = KEPT_BASELINES_BYTES if available is None else min(KEPT_BASELINES_BYTES, available * KEPT_BASELINES_SHARE)
    return kept <= limit


def estimate(
    footprint: Footprint, opts: EvalOptions, scratch_in_ram: bool, available: int | None = None
) -> MemoryEstimate:
    inputs = footprint.largest_input_bytes
    outputs = footprint.output_bytes if footprint.output_bytes is not None else inputs
    params = footprint.param_bytes
    trials = len(plan_trials(opts.trials, len(footprint.variants), 0))
    sets = timing_sets(inputs, opts)
    on_host = opts.device == "cpu"
    held = trials * outputs
    if on_host and available is not None:
        held = min(held, int(HELD_SHARE * available))  # beyond it, a trial's reference is recomputed
    parts = {
        "scratch files": OUTPUT_FILES_AT_ONCE * outputs if scratch_in_ram else 0,
        "expected outputs": held if on_host else 0,
        # fp32 and fp64 runs (inputs and outputs in both), a comparison in fp64 (both sides, and
        # the candidate's output read in), or timing the clean baselines on their input sets,
        # whichever is largest; the model in fp64
        "reference worker": max(3 * inputs + 3 * outputs, 5 * outputs, (sets + 1) * inputs + 2 * outputs) + 3 * params
        if on_host
        else 2 * inputs + outputs,
        "candidate worker": (sets + 2) * inputs + 3 * outputs + 2 * params if on_host else 2 * inputs + outputs,
        "overhead": FIXED_OVERHEAD_BYTES,
    }
    if on_host and opts.timing and opts.baselines and keeps_baselines_on_host(footprint, opts, available):
        parts["kept baselines"] = kept_baselines_bytes(footprint, opts)
    # a candidate's worker, and the reference's held outputs and the baselines it prepares after
    # the reference and keeps for the session (`phases.reference.prepare_baselines`)
    kept = sets * inputs + outputs if opts.timing else 0
    device = 0 if on_host else (sets + 2) * inputs + 4 * outputs + 3 * params + held + kept
    return MemoryEstimate(parts, device)


def usable_memory() -> int | None:
    """The memory this machine has for us: MemAvailable, or less where `KERNELWRIGHT_MEMORY_LIMIT`
    (bytes) says so; None where neither is known."""
    have = available_memory()
    if os.environ.get("KERNELWRIGHT_MEMORY_LIMIT"):  # tests and users can state a tighter limit
        limit = int(os.environ["KERNELWRIGHT_MEMORY_LIMIT"])
        have = limit if have is None else min(have, limit)
    return have


def fits(need: MemoryEstimate, have: int | None) -> bool:
    return have is None or need.host_bytes <= have * USABLE_FRACTION


def scratch_root() -> str | None:
    """Where an evaluation's scratch files go: RAM-backed /dev/shm when it is writable with more
    than 16 GiB free (GB-sized trial inputs), else None (the temp dir)."""
    shm = Path("/dev/shm")
    try:
        if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 16 << 30:
            return str(shm)
    except OSError:
        pass
    return None


def scratch_in_ram() -> bool:
    """Whether the scratch files count against memory (they do in /dev/shm)."""
    return scratch_root() is not None


def _refuse(
    problem: Problem, footprint: Footprint, need: MemoryEstimate, have: int, small: MemoryEstimate | None, what: str
) -> EnvironmentProblem:
    hint = "`--size small` runs the problem's small inputs"
    if footprint.size == "default" and small is not None:
        hint = f"`--size small` needs {human_bytes(small.host_bytes)}{'' if fits(small, have) else ' (also too much)'}"
    elif footprint.size == "default":
        hint = "this problem defines no small size (get_small_inputs); use a machine with more memory"
    return EnvironmentProblem(
        f"{problem.qualified} at {footprint.size} size needs {need.describe()}{what}; "
        f"this machine has {human_bytes(have)} available",
        hint=hint,
    )


def room_for_a_second_worker(need: MemoryEstimate) -> bool:
    """Whether a second candidate worker (the next candidate's, started ahead) fits beside the
    estimate: its host share again, and on a GPU its device share again within the device."""
    return room_for_workers(need, 1) >= 1


def room_for_workers(need: MemoryEstimate, wanted: int) -> int:
    """How many more candidate workers (up to `wanted`, started ahead) fit beside the estimate:
    each its host share again, and on a GPU its device share again, within the machine."""
    have = usable_memory()
    extra = need.parts.get("candidate worker", 0)
    device = _device_memory() if need.device_bytes else None
    fits = 0
    for k in range(1, wanted + 1):
        if have is not None and need.host_bytes + k * extra > have * USABLE_FRACTION:
            break
        if device is not None and (1 + k) * need.device_bytes > device * USABLE_FRACTION:
            break
        fits = k
    return fits


def _device_memory() -> int | None:
    """The GPU's memory as the driver reports it (without creating a CUDA context here)."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
        return int(out.split()[0]) << 20
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def check_memory(problem: Problem, footprint: Footprint, opts: EvalOptions, scratch_in_ram: bool) -> MemoryEstimate:
    """Refuse (exit 5) an evaluation that will not fit this machine's available memory."""
    have = usable_memory()
    need = estimate(footprint, opts, scratch_in_ram, have)
    if have is None or fits(need, have):
        return need
    small = None
    if footprint.size == "default" and problem.has_small:
        small = estimate(measure(problem, Size.SMALL), opts, scratch_in_ram, have)
    raise _refuse(problem, footprint, need, have, small, "")


def reference_run_estimate(footprint: Footprint, device: str) -> MemoryEstimate:
    """A plain run of the reference (`problems run`): every input set is built on the host (the
    variants too), the model runs on `device` and two outputs are alive at once."""
    inputs = footprint.input_bytes + sum(
        sum(i.nbytes for i in v if isinstance(i, TensorShape)) for v in footprint.variants
    )
    outputs = footprint.output_bytes if footprint.output_bytes is not None else footprint.input_bytes
    on_host = device == "cpu"
    parts = {
        "inputs": inputs,
        "outputs": 2 * outputs if on_host else 0,
        "parameters": footprint.param_bytes,
        "overhead": FIXED_OVERHEAD_BYTES,
    }
    device_bytes = 0 if on_host else footprint.input_bytes + 2 * outputs + footprint.param_bytes
    return MemoryEstimate(parts, device_bytes)


def check_reference_run(problem: Problem, footprint: Footprint, device: str) -> MemoryEstimate:
    """Refuse (exit 5) a reference run that will not fit this machine's available memory."""
    need = reference_run_estimate(footprint, device)
    have = usable_memory()
    if have is None or fits(need, have):
        return need
    small = None
    if footprint.size == "default" and problem.has_small:
        small = reference_run_estimate(measure(problem, Size.SMALL), device)
    raise _refuse(problem, footprint, need, have, small, " to run its reference")
