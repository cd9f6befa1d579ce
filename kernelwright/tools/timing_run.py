"""The timing phase inside a candidate worker: the candidate and its baselines (eager, torch.compile)
timed in the same process, on the same rotating input buffers, interleaved."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from kernelwright.problems import load_problem_file, materialize
from kernelwright.tools.jobs import WorkerJob
from kernelwright.tools.timing import CpuTimer, CudaEventTimer, time_interleaved, timer_functions_intact


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


def time_candidate(job: WorkerJob, candidate: torch.nn.Module, baselines_ready: Callable[[], None]) -> dict[str, Any]:
    assert job.timing is not None
    plan = job.timing
    problem = load_problem_file(job.problem_path)
    inst = materialize(problem, job.size, seed=job.weight_seed)
    torch.manual_seed(job.weight_seed)
    reference = inst.make_model().to(job.device).eval()
    fns: dict[str, Any] = {"candidate": lambda xs: candidate(*xs)}
    if "eager" in plan.baselines:
        fns["eager"] = lambda xs: reference(*xs)
    input_sets = _input_sets(job)
    compile_time_s = None
    for mode, name in (("default", "compile"), ("max-autotune", "compile-max-autotune")):
        if name not in plan.baselines:
            continue
        compiled = torch.compile(reference, mode=mode)
        start = time.perf_counter()
        with torch.no_grad():
            compiled(*input_sets[0])
        if job.device == "cuda":
            torch.cuda.synchronize()
        compile_time_s = time.perf_counter() - start
        fns[name] = lambda xs, c=compiled: c(*xs)
    baselines_ready()
    timer = CudaEventTimer() if job.device == "cuda" else CpuTimer()
    result = time_interleaved(
        fns,
        input_sets,
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
        "compile_time_s": compile_time_s,
        "input_sets": len(input_sets),
        "patched_timers": patched,
    }
