"""The timing phase inside a candidate worker: the candidate and its baselines (eager, torch.compile)
timed in the same process, on the same rotating input buffers, interleaved."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kernelwright.harness.process.jobs import WorkerJob
from kernelwright.harness.timing.timers import CpuTimer, CudaEventTimer, time_interleaved, timer_functions_intact
from kernelwright.problems import load_problem_file
from kernelwright.problems.instance import materialize


def _input_sets(job: WorkerJob) -> list[list[Any]]:
    """Distinct input buffers (the problem's own get_inputs under different seeds), as many as
    the memory budget allows (at least 2)."""
    assert job.timing is not None
    problem = load_problem_file(job.problem_path)
    sets: list[list[Any]] = []
    first = materialize(problem, job.size, seed=job.weight_seed)
    per_set = sum(v.numel() * v.element_size() for v in first.inputs if isinstance(v, torch.Tensor))
    wanted = max(2, min(job.timing.input_sets, job.timing.memory_budget_bytes // max(per_set, 1)))
    module = first.module
    for k in range(wanted):
        inst = first if k == 0 else materialize(problem, job.size, seed=job.weight_seed + 1000 + k, module=module)
        sets.append([v.to(job.device) if isinstance(v, torch.Tensor) else v for v in inst.inputs])
    return sets


def _calling(fn: Callable[..., Any]) -> Callable[[Any], Any]:
    return lambda xs: fn(*xs)


@dataclass
class Baselines:
    """What the candidate is timed against, made ready before the candidate's code is imported."""

    fns: dict[str, Callable[[Any], Any]]
    input_sets: list[list[Any]]
    compile_time_s: float | None = None
    seconds: float = 0.0


def prepare_baselines(job: WorkerJob) -> Baselines:
    """The reference model (eager) and its torch.compile'd forms, compiled and run once, and the
    rotating input sets. Run in the candidate's worker before the candidate is imported, so the
    candidate cannot influence how the baselines are built."""
    started = time.perf_counter()
    problem = load_problem_file(job.problem_path)
    inst = materialize(problem, job.size, seed=job.weight_seed)
    torch.manual_seed(job.weight_seed)
    reference = inst.make_model().to(job.device).eval()
    fns: dict[str, Callable[[Any], Any]] = {}
    if "eager" in job.baselines:
        fns["eager"] = _calling(reference)
    input_sets = _input_sets(job)
    compile_time_s = None
    for mode, name in (("default", "compile"), ("max-autotune", "compile-max-autotune")):
        if name not in job.baselines:
            continue
        compiled = torch.compile(reference, mode=mode)
        start = time.perf_counter()
        with torch.no_grad():
            compiled(*input_sets[0])
        if job.device == "cuda":
            torch.cuda.synchronize()
        compile_time_s = time.perf_counter() - start
        fns[name] = _calling(compiled)
    return Baselines(fns, input_sets, compile_time_s, time.perf_counter() - started)


def time_candidate(job: WorkerJob, candidate: torch.nn.Module, baselines: Baselines) -> dict[str, Any]:
    """Time the candidate interleaved with the prepared baselines on the same rotating inputs."""
    assert job.timing is not None
    plan = job.timing
    fns: dict[str, Callable[[Any], Any]] = {"candidate": lambda xs: candidate(*xs), **baselines.fns}
    timer = CudaEventTimer() if job.device == "cuda" else CpuTimer()
    result = time_interleaved(
        fns,
        baselines.input_sets,
        timer=timer,
        warmup=plan.warmup,
        min_reps=plan.min_reps,
        max_reps=plan.max_reps,
        target_rel_ci=plan.target_rel_ci,
        time_cap_s=plan.time_cap_s,
    )
    patched = timer_functions_intact()
    return {
        "result": result.model_dump(mode="json"),
        "compile_time_s": baselines.compile_time_s,
        "prepare_s": baselines.seconds,
        "input_sets": len(baselines.input_sets),
        "patched_timers": patched,
    }
