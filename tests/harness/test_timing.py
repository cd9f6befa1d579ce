"""The timing layer: interleaving, input rotation, stopping rules, tamper resistance, hidden-work detection."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import torch

from kernelwright.harness.timing import timers as timing
from kernelwright.harness.timing.timers import (
    CpuTimer,
    CudaEventTimer,
    InterleavedResult,
    hidden_work_suspected,
    time_interleaved,
    timer_functions_intact,
)


class ScriptedTimer:
    """A Timer whose clock is a script: each call's time comes from `clock(fn_name)`; calls really run."""

    name = "scripted"
    launch_overhead_ms = 0.0
    drains_device = True  # stands in for a device timer (its wall calls are scripted)

    def __init__(self, log: list[tuple[str, int]], clock: Callable[[str], float]) -> None:
        self.log = log
        self.clock = clock
        self.batches: list[list[str]] = []

    def time_calls(self, calls: Sequence[Callable[[], object]]) -> list[float]:
        names = []
        for call in calls:
            call()
            names.append(self.log[-1][0])
        self.batches.append(names)
        return [self.clock(n) for n in names]

    def wall_ms(self, call: Callable[[], object]) -> float:
        call()
        return self.clock(self.log[-1][0])

    def synchronize(self) -> None:
        return None


def _recording_fns(log: list[tuple[str, int]]) -> dict[str, Callable[[Sequence[Any]], Any]]:
    def make(name: str, op: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[Sequence[Any]], Any]:
        def fn(inputs: Sequence[Any]) -> torch.Tensor:
            log.append((name, id(inputs)))
            assert not torch.is_grad_enabled()
            return op(inputs[0])

        return fn

    return {"sum": make("sum", torch.sum), "cumsum": make("cumsum", lambda x: torch.cumsum(x, 0))}


def _input_sets(k: int) -> list[list[torch.Tensor]]:
    return [[torch.randn(256)] for _ in range(k)]


def test_stops_early_when_converged_and_rotates_inputs_and_order() -> None:
    log: list[tuple[str, int]] = []
    sets = _input_sets(3)
    timer = ScriptedTimer(log, {"sum": 1.0, "cumsum": 2.0}.__getitem__)
    res = time_interleaved(
        _recording_fns(log), sets, timer=timer, warmup=2, min_reps=10, max_reps=1000, batch=5, wall_reps=4
    )
    assert res.stop_reason == "converged" and res.converged
    assert res.batches == 2  # constant times converge as soon as min_reps is reached
    for name, expected in (("sum", 1.0), ("cumsum", 2.0)):
        fr = res.fns[name]
        assert fr.reps == fr.stats.n == 10 and fr.converged
        assert fr.stats.median_ms == expected
        assert fr.wall_median_ms == expected and len(fr.wall_samples_ms) == 4
        assert fr.hidden_work is None
    # 2 warm-up + 10 timed + 4 wall calls per fn
    assert [n for n, _ in log].count("sum") == 16
    set_ids = {id(s) for s in sets}
    for name in ("sum", "cumsum"):
        seen = [i for n, i in log if n == name]
        assert set(seen) == set_ids  # every input set used
        assert all(a != b for a, b in itertools.pairwise(seen))  # never the same set twice running
    # in one round the two fns get different sets
    first_round = log[:2]
    assert first_round[0][1] != first_round[1][1]
    # order rotated every round: each fn goes first in half the rounds
    rounds = [tuple(b[i : i + 2]) for b in timer.batches for i in range(0, len(b), 2)]
    assert rounds.count(("sum", "cumsum")) == rounds.count(("cumsum", "sum")) == 5


def test_respects_max_reps_when_not_converging() -> None:
    log: list[tuple[str, int]] = []
    rng = np.random.default_rng(0)
    timer = ScriptedTimer(log, lambda _: float(rng.uniform(1.0, 3.0)))
    res = time_interleaved(
        _recording_fns(log), _input_sets(2), timer=timer, min_reps=5, max_reps=23, target_rel_ci=1e-6, batch=5
    )
    assert res.stop_reason == "max_reps"
    assert not res.converged
    assert all(fr.reps == 23 and not fr.converged for fr in res.fns.values())
    assert [len(b) for b in timer.batches] == [10, 10, 10, 10, 6]


def test_respects_time_cap() -> None:
    log: list[tuple[str, int]] = []
    rng = np.random.default_rng(0)

    def slow_clock(_: str) -> float:
        time.sleep(0.002)
        return float(rng.uniform(1.0, 3.0))

    timer = ScriptedTimer(log, slow_clock)
    t0 = time.perf_counter()
    res = time_interleaved(
        _recording_fns(log),
        _input_sets(2),
        timer=timer,
        min_reps=50,
        max_reps=100_000,
        target_rel_ci=1e-6,
        time_cap_s=0.1,
        batch=5,
        wall_reps=0,
    )
    assert time.perf_counter() - t0 < 2.0
    assert res.stop_reason == "time_cap" and not res.converged
    assert 5 <= res.fns["sum"].reps < 100  # at least one batch, far fewer than max_reps
    assert res.fns["sum"].wall_median_ms is None and res.fns["sum"].hidden_work is None


def test_real_cpu_timer_sum_vs_cumsum() -> None:
    log: list[tuple[str, int]] = []
    res = time_interleaved(
        _recording_fns(log),
        _input_sets(4),
        timer=CpuTimer(),
        min_reps=20,
        max_reps=3000,
        target_rel_ci=0.05,
        time_cap_s=5.0,
    )
    assert res.timer == "cpu_perf_counter"
    assert res.stop_reason == "converged", res.model_dump(exclude={"fns"})
    for fr in res.fns.values():
        assert 20 <= fr.reps < 3000
        assert 0 < fr.stats.median_ms < 1.0  # microseconds, not seconds
        assert fr.stats.ci_low_ms <= fr.stats.median_ms <= fr.stats.ci_high_ms
        # no wall calls on the CPU: the same clock around the same call would compare the timer with itself
        assert fr.wall_median_ms is None and fr.wall_samples_ms == [] and fr.hidden_work is None
    assert InterleavedResult.model_validate_json(res.model_dump_json()) == res


def test_cpu_timer_measures_a_sleep_and_flushes_when_asked() -> None:
    timer = CpuTimer(flush_cache=True, flush_bytes=1 << 20)
    [ms] = timer.time_calls([lambda: time.sleep(0.01)])
    assert 9.5 <= ms < 200
    assert CpuTimer()._flush_buf is None  # no flush unless asked: it dominates tiny ops


def test_patched_timers_are_reported_and_do_not_fool_cpu_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    assert timer_functions_intact() == []
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)

    class FakeEvent:
        pass

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    assert set(timer_functions_intact()) == {"time.perf_counter", "time.perf_counter_ns", "torch.cuda.Event"}
    [ms] = CpuTimer().time_calls([lambda: time.sleep(0.01)])
    assert ms >= 9.5  # our captured perf_counter_ns still ticks
    monkeypatch.undo()
    assert timer_functions_intact() == []


def test_patched_event_method_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.001)
    assert timer_functions_intact() == ["torch.cuda.Event.elapsed_time"]


def test_hidden_work_suspected_thresholds() -> None:
    assert hidden_work_suspected(1.0, 1.2) is None
    assert hidden_work_suspected(1.0, 1.55) is None  # 1.5x + 0.05 ms allowance, inclusive
    reason = hidden_work_suspected(0.01, 1.0)
    assert reason is not None and "another stream" in reason and "1.0000 ms" in reason
    assert hidden_work_suspected(0.001, 0.04) is None  # tiny op: launch allowance covers sync cost
    assert hidden_work_suspected(0.001, 0.04, launch_overhead_ms=0.0) is not None
    assert hidden_work_suspected(1.0, 2.5, ratio=3.0) is None


class WallScriptedTimer(ScriptedTimer):
    """Event times 1 ms for every fn; wall times from `walls(fn_name, nth_wall_call_of_that_fn)`."""

    def __init__(self, log: list[tuple[str, int]], walls: Callable[[str, int], float]) -> None:
        super().__init__(log, lambda _: 1.0)
        self.walls = walls
        self.wall_calls: dict[str, int] = {}

    def wall_ms(self, call: Callable[[], object]) -> float:
        call()
        name = self.log[-1][0]
        self.wall_calls[name] = self.wall_calls.get(name, 0) + 1
        return self.walls(name, self.wall_calls[name] - 1)


def _time_with_walls(walls: Callable[[str, int], float]) -> InterleavedResult:
    log: list[tuple[str, int]] = []
    timer = WallScriptedTimer(log, walls)
    return time_interleaved(_recording_fns(log), _input_sets(2), timer=timer, min_reps=5, wall_reps=4)


def test_a_busy_neighbour_on_the_gpu_is_not_hidden_work() -> None:
    # Another process time-slicing the GPU delays most synchronised calls, but not all of them.
    res = _time_with_walls(lambda name, k: 1.1 if k % 5 == 4 else 4.0)
    for fr in res.fns.values():
        assert len(fr.wall_samples_ms) == 12  # 4, then 8 more to re-check the suspicion
        assert fr.wall_median_ms == 4.0 and fr.wall_min_ms == 1.1
        assert fr.hidden_work is None


def test_hidden_work_on_every_call_is_suspected_after_the_recheck() -> None:
    res = _time_with_walls(lambda name, k: 4.0 if name == "cumsum" else 1.05)
    assert res.fns["sum"].hidden_work is None
    reason = res.fns["cumsum"].hidden_work
    assert reason is not None and "fastest synchronised wall time per call 4.0000 ms" in reason
    assert len(res.fns["cumsum"].wall_samples_ms) == 12


def test_no_recheck_when_nothing_is_suspected() -> None:
    res = _time_with_walls(lambda name, k: 1.0)
    assert all(len(fr.wall_samples_ms) == 4 and fr.hidden_work is None for fr in res.fns.values())


def test_rejects_bad_arguments() -> None:
    timer = CpuTimer()
    with pytest.raises(ValueError, match="at least one function"):
        time_interleaved({}, _input_sets(1), timer=timer)
    with pytest.raises(ValueError, match="input set"):
        time_interleaved(_recording_fns([]), [], timer=timer)
    with pytest.raises(ValueError, match="min_reps"):
        time_interleaved(_recording_fns([]), _input_sets(1), timer=timer, min_reps=20, max_reps=10)


# ---- GPU ----


@pytest.mark.gpu
def test_cuda_event_timer_flush_buffer_covers_twice_l2() -> None:
    timer = CudaEventTimer()
    l2 = timing.l2_cache_bytes(timer.device)
    assert l2 is not None and l2 > 0
    assert timer.flush_bytes >= 2 * l2
    assert timer._flush_buf.numel() * 4 >= 2 * l2
    assert timer_functions_intact() == []
    assert CudaEventTimer("cuda").device == timer.device  # a bare "cuda" means the current device


@pytest.mark.gpu
def test_cuda_event_timer_times_a_matmul_within_reason() -> None:
    torch.manual_seed(0)
    n = 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        torch.mm(a, b)
    torch.cuda.synchronize()
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.mm(a, b)
    torch.cuda.synchronize()
    reference_ms = (time.perf_counter() - t0) * 1e3 / reps
    res = time_interleaved(
        {"mm": lambda xs: torch.mm(xs[0], xs[1])},
        [[a, b]],
        timer=CudaEventTimer(),
        min_reps=20,
        max_reps=200,
        target_rel_ci=0.01,
    )
    fr = res.fns["mm"]
    assert 0.8 < fr.stats.median_ms / reference_ms < 1.25, (fr.stats.median_ms, reference_ms)
    assert fr.hidden_work is None


@pytest.mark.gpu
def test_side_stream_work_is_suspected_and_normal_work_is_not() -> None:
    torch.manual_seed(0)
    n = 4096
    inputs = [[torch.randn(n, n, device="cuda") for _ in range(2)] for _ in range(3)]
    side = torch.cuda.Stream()

    def on_side_stream(xs: Sequence[torch.Tensor]) -> torch.Tensor:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(4):
                out = torch.mm(xs[0], xs[1])
        return out  # never joined back to the current stream

    def normal(xs: Sequence[torch.Tensor]) -> torch.Tensor:
        for _ in range(4):
            out = torch.mm(xs[0], xs[1])
        return out

    res = time_interleaved(
        {"side": on_side_stream, "normal": normal},
        inputs,
        timer=CudaEventTimer(),
        min_reps=10,
        max_reps=60,
        target_rel_ci=0.02,
    )
    side_fr, normal_fr = res.fns["side"], res.fns["normal"]
    assert side_fr.hidden_work is not None, side_fr.model_dump(exclude={"stats"})
    assert normal_fr.hidden_work is None, normal_fr.model_dump(exclude={"stats"})
    assert side_fr.stats.median_ms < normal_fr.stats.median_ms / 5  # what a naive event timer would report


def test_blocks_split_the_budget_and_carry_their_sizes() -> None:
    # constant times converge at min_reps; with 4 blocks the stopping rule waits for 4 batches (one
    # per block), which min_reps=10 at batch 3 needs anyway: the same sample budget, now in blocks
    log: list[tuple[str, int]] = []
    timer = ScriptedTimer(log, {"sum": 1.0, "cumsum": 2.0}.__getitem__)
    res = time_interleaved(_recording_fns(log), _input_sets(3), timer=timer, min_reps=10, batch=3, blocks=4)
    assert res.stop_reason == "converged" and res.batches == 4 and res.blocks == 4
    assert all(fr.stats.block_sizes == [3, 3, 3, 3] and fr.reps == 12 for fr in res.fns.values())
    # a low min_reps no longer stops before every block has a batch
    log2: list[tuple[str, int]] = []
    timer2 = ScriptedTimer(log2, {"sum": 1.0, "cumsum": 2.0}.__getitem__)
    res2 = time_interleaved(_recording_fns(log2), _input_sets(3), timer=timer2, min_reps=3, batch=3, blocks=4)
    assert res2.batches == 4 and res2.fns["sum"].stats.block_sizes == [3, 3, 3, 3]


def test_drift_between_blocks_reaches_the_speedup_interval() -> None:
    # the baseline's time steps up by 20% halfway through the phase (another tenant, a clock change):
    # the blocks see it and the speedup's interval spans both levels
    from kernelwright.harness.timing.stats import speedup

    log: list[tuple[str, int]] = []
    calls = {"sum": 0}

    def clock(name: str) -> float:
        if name == "cumsum":
            return 1.0
        calls["sum"] += 1
        return 2.0 if calls["sum"] <= 12 else 2.4

    timer = ScriptedTimer(log, clock)
    res = time_interleaved(
        _recording_fns(log), _input_sets(3), timer=timer, min_reps=24, max_reps=24, batch=3, blocks=4, wall_reps=0
    )
    assert res.batches == 8 and res.fns["sum"].stats.block_sizes == [6, 6, 6, 6]
    sp = speedup("sum", res.fns["sum"].stats, res.fns["cumsum"].stats)
    assert sp.block_ratios == [2.0, 2.0, 2.4, 2.4]
    assert sp.ci_low < 2.0 and sp.ci_high > 2.4


def test_block_sizes_group_batches() -> None:
    assert timing.block_sizes([3, 3, 3, 3, 3, 3, 3, 3, 2], 4) == [9, 6, 6, 5]
    assert timing.block_sizes([3, 3], 4) == [3, 3]
    assert timing.block_sizes([3], 4) == []
    assert timing.block_sizes([3, 3, 3], 1) == []
