"""The timing phase inside a candidate worker: the candidate and its baselines (eager, torch.compile)
timed in the same process, on the same input sets (new values before every batch), interleaved,
with a random sample of the candidate's timed outputs kept for the reference's process to check."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from kernelwright.harness.fuzz import draw_inputs
from kernelwright.harness.options import TimingPlan, TrialPlan
from kernelwright.harness.timing.stats import TimingStats, summarize
from kernelwright.harness.timing.timers import (
    CpuTimer,
    CudaEventTimer,
    InterleavedResult,
    time_interleaved,
    timer_functions_intact,
)
from kernelwright.problems.instance import ProblemInstance

_urandom = os.urandom  # captured before any candidate is imported
_perf_counter = time.perf_counter
_get_num_threads = torch.get_num_threads
_set_num_threads = torch.set_num_threads


class TimingJob(Protocol):
    """What timing needs of a worker's job (`workers.jobs.WorkerJob` is one)."""

    @property
    def device(self) -> str: ...
    @property
    def weight_seed(self) -> int: ...
    @property
    def timing(self) -> TimingPlan | None: ...
    @property
    def baselines(self) -> Sequence[str]: ...


def _fresh_seed() -> int:
    return int.from_bytes(_urandom(8), "little") >> 1


def _pick(n: int) -> int:
    """A uniform index below n from the OS's randomness (not torch's or Python's RNG state, which
    a candidate could read or set)."""
    return _fresh_seed() % n


class InputPool:
    """The timing phase's input sets: redrawn with new values from fresh OS-random seeds before
    every batch (`refresh`), so no timed call sees values its function has seen before, and the
    candidate cannot predict them at import or in a warm-up call. Each set's seed is kept so the
    reference's process can redraw the very inputs of a sampled call."""

    def __init__(self, job: TimingJob, inst: ProblemInstance) -> None:
        assert job.timing is not None
        self.job, self.inst = job, inst
        self.meta = inst.problem.meta
        per_set = sum(v.numel() * v.element_size() for v in inst.inputs if isinstance(v, torch.Tensor))
        self.count = max(1, min(job.timing.input_sets, job.timing.memory_budget_bytes // max(per_set, 1)))
        self.sets: list[list[Any]] = []
        self.plans: list[TrialPlan] = []
        self.refresh()

    def refresh(self) -> None:
        self.plans = [TrialPlan(index=-1, seed=_fresh_seed(), distribution="normal") for _ in range(self.count)]
        self.sets[:] = []  # free the old values before drawing the new ones
        for plan in self.plans:
            self.sets.append(draw_inputs(self.inst.inputs, self.meta, plan, self.job.device))


def _calling(fn: Callable[..., Any]) -> Callable[[Any], Any]:
    return lambda xs: fn(*xs)


@dataclass
class Baselines:
    """What the candidate is timed against, made ready before the candidate's code is imported."""

    fns: dict[str, Callable[[Any], Any]]
    pool: InputPool
    reference: torch.nn.Module
    compile_time_s: float | None = None
    seconds: float = 0.0


def prepare_baselines(job: TimingJob, inst: ProblemInstance) -> Baselines:
    """The reference model (eager) and its torch.compile'd forms, compiled and run once, and the
    rotating input sets. Run in the candidate's worker before the candidate is imported, so the
    candidate cannot influence how the baselines are built."""
    started = time.perf_counter()
    torch.manual_seed(job.weight_seed)
    reference = inst.make_model().to(job.device).eval()
    fns: dict[str, Callable[[Any], Any]] = {}
    if "eager" in job.baselines:
        fns["eager"] = _calling(reference)
    pool = InputPool(job, inst)
    compile_time_s = None
    for mode, name in (("default", "compile"), ("max-autotune", "compile-max-autotune")):
        if name not in job.baselines:
            continue
        compiled = torch.compile(reference, mode=mode)
        start = time.perf_counter()
        with torch.no_grad():
            compiled(*pool.sets[0])
        if job.device == "cuda":
            torch.cuda.synchronize()
        compile_time_s = time.perf_counter() - start
        fns[name] = _calling(compiled)
    return Baselines(fns, pool, reference, compile_time_s, time.perf_counter() - started)


def _clone(output: Any) -> Any:
    if isinstance(output, torch.Tensor):
        return output.detach().clone()
    if isinstance(output, list | tuple):
        return [_clone(o) for o in output]
    return output


class OutputSample:
    """A uniform sample (reservoir) of `size` of the candidate's timed calls: each kept output is
    cloned right after its call, outside the timed region, with the plan of the inputs it got."""

    def __init__(self, size: int, pool: InputPool) -> None:
        self.size, self.pool = size, pool
        self.seen = 0
        self.kept: list[tuple[TrialPlan, Any]] = []

    def __call__(self, name: str, set_index: int, output: object) -> None:
        if name != "candidate" or self.size <= 0:
            return
        self.seen += 1
        slot = len(self.kept) if len(self.kept) < self.size else _pick(self.seen)
        if slot < self.size:
            entry = (self.pool.plans[set_index], _clone(output))
            if slot == len(self.kept):
                self.kept.append(entry)
            else:
                self.kept[slot] = entry


ONE_THREAD_CALLS = 30  # timed calls per baseline in the one-thread look, at most...
ONE_THREAD_MIN_CALLS = 3  # ...at least (past the cap)...
ONE_THREAD_CAP_S = 0.2  # ...and this long per baseline once it has the least
ONE_THREAD_MAX_MS = 1000.0
"""A baseline whose median with the configured threads is above this is not timed again at one
thread (it could take seconds a call there). Stalls of the intra-op pool cost 5-180 ms a call on a
loaded 2-core CPU (measured: eager relu 64x1024 at 5.7-56 ms, mse_loss up to 183 ms, against
0.02-0.09 ms at one thread), well under it. Its one-thread figures are then absent, and every rule
that reads them keeps the configured threads' figures."""


def time_one_thread(job: TimingJob, baselines: Baselines, medians: dict[str, float]) -> dict[str, TimingStats]:
    """The baselines timed once more with one intra-op thread (`torch.set_num_threads(1)` around
    this timing only, restored after), on the CPU when more than one thread is configured: each
    baseline in `medians` (its median with the configured threads) up to `ONE_THREAD_MAX_MS`.
    `ONE_THREAD_MIN_CALLS` to `ONE_THREAD_CALLS` calls, for `ONE_THREAD_CAP_S`; only the first
    (untimed otherwise) when it alone took the cap and at least half the configured median: one
    thread is then no faster, and a long call would cost seconds for nothing.

    On an oversubscribed CPU the intra-op pool makes a call wait until its other threads are
    scheduled (eager relu 64x1024 on a loaded 2-core machine: 5-56 ms a call with 2 threads,
    0.02 ms with 1), and a process stays in that mode for seconds; one thread has no pool to wait
    for (torch.compile's kernels too: 0.06-0.22 ms at one thread where they took 8-94 ms with 2).
    What reads these figures (`judge.timing`) only ever withdraws a speedup with them, never
    reports one."""
    if job.device != "cpu":
        return {}
    threads = _get_num_threads()
    if threads <= 1:
        return {}
    names = [name for name, ms in medians.items() if name in baselines.fns and ms <= ONE_THREAD_MAX_MS]
    if not names:
        return {}
    sets = baselines.pool.sets
    out: dict[str, TimingStats] = {}
    _set_num_threads(1)
    try:
        with torch.no_grad():
            for name in names:
                out[name] = summarize(_one_thread_calls(baselines.fns[name], sets, medians[name], ONE_THREAD_CAP_S))
    finally:
        _set_num_threads(threads)
    return out


def _one_thread_calls(
    fn: Callable[[Any], Any],
    sets: Sequence[Any],
    median_ms: float,
    cap_s: float,
    keep: Callable[[Any], None] | None = None,
) -> list[float]:
    """`fn`'s call times (ms) with whatever threads are set now: a first call on `sets[0]` as a
    probe (its output to `keep`), the one figure when it alone took `cap_s` and at least half
    `median_ms`; else `ONE_THREAD_MIN_CALLS` to `ONE_THREAD_CALLS` calls for `cap_s`, rotating
    over `sets`."""
    t0 = _perf_counter()
    output = fn(sets[0])
    first_ms = (_perf_counter() - t0) * 1e3
    if keep is not None:
        keep(output)
    del output
    if first_ms >= cap_s * 1e3 and first_ms >= median_ms / 2:
        return [first_ms]
    samples: list[float] = []
    started = _perf_counter()
    while len(samples) < ONE_THREAD_CALLS and (
        len(samples) < ONE_THREAD_MIN_CALLS or _perf_counter() - started < cap_s
    ):
        xs = sets[len(samples) % len(sets)]
        t0 = _perf_counter()
        fn(xs)
        samples.append((_perf_counter() - t0) * 1e3)
    return samples


CANDIDATE_LOOK_CAP_S = 0.5
"""How long the candidate is timed alone in the CPU's one-thread look (`time_alone_one_thread`),
once it has `ONE_THREAD_MIN_CALLS`: its fastest call is what the look compares, and at one thread
a call waits for no other thread, so a few unpreempted calls are enough."""


@dataclass(frozen=True)
class AloneTiming:
    """The candidate timed alone with one intra-op thread: its figures, its calls, and one output
    (the probe call's, cloned, with the plan of its inputs) for the reference's process to check."""

    stats: TimingStats
    calls: int
    output: tuple[TrialPlan, Any]


def time_alone_one_thread(candidate: Callable[..., Any], pool: InputPool, median_ms: float) -> AloneTiming:
    """The candidate timed alone on the timing phase's input sets (redrawn first: values it has
    not seen) with one intra-op thread, restored after; `median_ms`: its median in the timing.
    The CPU's one-thread look at the timed-vs-profiled rules (`judge.one_thread`) compares these
    figures with a profile taken at one thread too."""
    threads = _get_num_threads()
    pool.refresh()
    kept: list[Any] = []

    def call(xs: Any) -> Any:
        return candidate(*xs)

    _set_num_threads(1)
    try:
        with torch.no_grad():
            samples = _one_thread_calls(
                call, pool.sets, median_ms, CANDIDATE_LOOK_CAP_S, lambda o: kept.append(_clone(o))
            )
    finally:
        _set_num_threads(threads)
    return AloneTiming(summarize(samples), len(samples) + 1, (pool.plans[0], kept[0]))


@dataclass(frozen=True)
class CandidateTiming:
    """The timing run's figures (the worker adds its extension counts and sends `TimingReport`)."""

    result: InterleavedResult
    compile_time_s: float | None
    prepare_s: float
    input_sets: int
    patched_timers: list[str]
    sampled_calls: int
    candidate_host_s: float
    candidate_calls: int
    threads: int = 1  # intra-op threads the timing ran with
    one_thread: dict[str, TimingStats] = field(default_factory=dict)  # `time_one_thread`, after it


def time_candidate(
    job: TimingJob, candidate: torch.nn.Module, baselines: Baselines, samples: int = 0
) -> tuple[CandidateTiming, list[tuple[TrialPlan, Any]]]:
    """Time the candidate interleaved with the prepared baselines on the same input sets, redrawn
    before every batch; also returns `samples` of the candidate's timed outputs (with the plans of
    their inputs) for the reference's process to check."""
    assert job.timing is not None
    plan = job.timing
    host = [0.0, 0]  # the candidate's calls: host seconds and count (CPU: compute is synchronous)

    def run_candidate(xs: Any) -> Any:
        start = _perf_counter()
        try:
            return candidate(*xs)
        finally:
            host[0] += _perf_counter() - start
            host[1] += 1

    fns: dict[str, Callable[[Any], Any]] = {"candidate": run_candidate, **baselines.fns}
    timer = CudaEventTimer() if job.device == "cuda" else CpuTimer()
    pool = baselines.pool
    sample = OutputSample(samples, pool)
    result = time_interleaved(
        fns,
        pool.sets,
        timer=timer,
        warmup=plan.warmup,
        min_reps=plan.min_reps,
        max_reps=plan.max_reps,
        target_rel_ci=plan.target_rel_ci,
        time_cap_s=plan.time_cap_s,
        batch=pool.count,
        refresh=pool.refresh,
        after_call=sample,
        blocks=plan.blocks,
    )
    patched = timer_functions_intact()
    threads = _get_num_threads()
    one = time_one_thread(job, baselines, {n: fn.stats.median_ms for n, fn in result.fns.items() if n != "candidate"})
    figures = CandidateTiming(
        result=result,
        compile_time_s=baselines.compile_time_s,
        prepare_s=baselines.seconds,
        input_sets=pool.count,
        patched_timers=patched,
        sampled_calls=sample.seen,
        candidate_host_s=host[0],
        candidate_calls=int(host[1]),
        threads=threads,
        one_thread=one,
    )
    return figures, sample.kept


SPACER_CAP_MS = 50.0


def _spacer(ms: float) -> Callable[[Any], None]:
    """A stand-in for the candidate between the baselines' calls: one thread busy for `ms`. What
    runs between a baseline's calls changes its time (an intra-op thread pool that went to sleep
    must be woken: on a loaded 2-core machine that made eager relu 7 ms beside a single-threaded
    candidate and 0.02 ms timed alone)."""
    seconds = min(ms, SPACER_CAP_MS) / 1e3

    def spin(xs: Any) -> None:
        end = _perf_counter() + seconds
        while _perf_counter() < end:
            pass

    return spin


def time_baselines(job: TimingJob, baselines: Baselines, spacer_ms: float = 0.0) -> dict[str, dict[str, Any]]:
    """The `prepare_baselines` baselines timed as the candidate's worker times them, in a process
    that never ran candidate code (the reference's): the figures a candidate's process must agree
    with. With `spacer_ms`, a busy stand-in of that length is interleaved with them where the
    candidate was. The input sets are redrawn before every batch, as in the candidate's worker.
    Each baseline's `one_thread` figures: `time_one_thread`, as the candidate's worker takes them
    (None where not taken)."""
    assert job.timing is not None
    plan = job.timing
    pool = baselines.pool
    fns = dict(baselines.fns)
    if spacer_ms > 0:
        fns["spacer"] = _spacer(spacer_ms)
    result = time_interleaved(
        fns,
        pool.sets,
        timer=CudaEventTimer() if job.device == "cuda" else CpuTimer(),
        warmup=plan.warmup,
        min_reps=plan.min_reps,
        max_reps=plan.max_reps,
        target_rel_ci=plan.target_rel_ci,
        time_cap_s=plan.time_cap_s,
        batch=pool.count,
        refresh=pool.refresh,
        wall_reps=0,
        blocks=plan.blocks,
    )
    timed = {name: fn.stats for name, fn in result.fns.items() if name != "spacer"}
    one = time_one_thread(job, baselines, {name: stats.median_ms for name, stats in timed.items()})

    def figures(stats: TimingStats) -> dict[str, float]:
        return {
            "median_ms": stats.median_ms,
            "ci_low_ms": stats.ci_low_ms,
            "ci_high_ms": stats.ci_high_ms,
            "min_ms": stats.min_ms,
        }

    return {
        name: {**figures(stats), "one_thread": figures(one[name]) if name in one else None}
        for name, stats in timed.items()
    }
