"""The agent's evaluation pool (`batch/eval_pool.py`) on the CPU, with two CPU "devices": real C++
relu candidates judged side by side, results in the caller's order with their verdicts and the
device that judged each; the two sessions' work overlaps while their timing phases never do. One
device (the CPU default, or one GPU) stays exactly today's single EvalSession; several visible
GPUs give one slot each, pinned."""

from __future__ import annotations

import json
import threading
import time
from itertools import combinations
from pathlib import Path

import pytest

from kernelwright.agent.assembly import harness_session
from kernelwright.agent.configuration import AgentConfig, RunFlags
from kernelwright.batch.eval_pool import EvalPool, TimingGate, device_slots
from kernelwright.batch.spec import JudgeSpec
from kernelwright.config import load_settings
from kernelwright.harness.session import EvalSession
from kernelwright.problems import resolve_problem
from kernelwright.vocabulary import Device, Size
from tests.candidates import write_case

SOLUTIONS = Path(__file__).resolve().parents[2] / "kernelwright" / "problems" / "solutions" / "relu"


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return min(a[1], b[1]) - max(a[0], b[0])


@pytest.mark.slow
def test_two_cpu_devices_judge_side_by_side_and_time_one_at_a_time(tmp_path: Path, shared_home: Path) -> None:
    # Three C++ kernels in the fast-build form (a second each to build, so the test is about the
    # pool, not g++): the bundled honest one, an honest variant, and one wrong on negative inputs.
    fast = (SOLUTIONS / "cpp_fast.py").read_text()
    loop = "y[i] = x[i] > 0.f ? x[i] : 0.f;"
    assert loop in fast
    sources = {
        "cpp_fast": fast,
        "cpp_fast_variant": fast.replace(loop, "y[i] = x[i] < 0.f ? 0.f : x[i];").replace(
            "kw_relu_cpp_fast", "kw_relu_pool_variant"
        ),
        "cpp_wrong_abs": fast.replace(loop, "y[i] = x[i] > 0.f ? x[i] : -x[i];").replace(
            "kw_relu_cpp_fast", "kw_relu_pool_wrong"
        ),
    }
    paths = [write_case(tmp_path / "candidates", name, source) for name, source in sources.items()]
    spec = JudgeSpec(
        device=Device.CPU,
        size=Size.SMALL,
        baselines=["eager"],
        timing=True,
        build_cache=shared_home / "build-cache",
        inductor_cache=shared_home / "inductor-cache",
        time_cap_s=2.0,
        run_timeout_s=120,
        build_timeout_s=300,
    )
    slots = device_slots(Device.CPU, cpu_devices=2)
    assert [s.label for s in slots] == ["cpu0", "cpu1"]
    started = time.time()
    with EvalPool(resolve_problem("relu"), spec, slots, tmp_path / "logs", out_dir=tmp_path / "evidence") as pool:
        results = pool.evaluate(paths)
        wall = time.time() - started

    assert [Path(r.candidate).name for r in results] == [p.name for p in paths]  # the caller's order
    assert [r.verdict.value for r in results] == ["correct", "correct", "incorrect"], [r.message for r in results]
    assert all(r.phase_seconds.get("timing", 0) > 0 for r in results[:2])
    assert [r.hardware["slot"] for r in results] == [j.device for j in pool.log]
    journal = [json.loads(line) for line in (tmp_path / "logs" / "judged.jsonl").read_text().splitlines()]
    assert sorted((j["index"], j["device"], j["verdict"]) for j in journal) == [
        (j.index, j.device, r.verdict.value) for j, r in zip(pool.log, results, strict=True)
    ]  # the run folder keeps which device judged what, as it happened
    assert {r.hardware["slot"] for r in results} == {"cpu0", "cpu1"}  # both devices judged

    by_device: dict[str, list[tuple[float, float]]] = {}
    spans: dict[str, list[tuple[float, float]]] = {}
    for judged in pool.log:
        by_device.setdefault(judged.device, []).extend(judged.quiet)
        spans.setdefault(judged.device, []).append((judged.start, judged.end))
    # the two sessions worked at the same time ...
    side_by_side = max(_overlap(a, b) for a in spans["cpu0"] for b in spans["cpu1"])
    assert side_by_side > 0
    # ... and each timed (its candidates, its clean baselines) inside the quiet phases it recorded,
    # never while the other did
    assert by_device["cpu0"] and by_device["cpu1"]
    for device, windows in by_device.items():
        timed = sum(r.phase_seconds.get("timing", 0) for r in results if r.hardware["slot"] == device)
        assert sum(e - s for s, e in windows) >= timed
    for a, b in combinations(["cpu0", "cpu1"], 2):
        for w in by_device[a]:
            for v in by_device[b]:
                assert _overlap(w, v) <= 0, (w, v)
    judging = sum(j.end - j.start for j in pool.log)
    quiet = sum(e - s for w in by_device.values() for s, e in w)
    print(
        f"\n2 CPU devices, 3 candidates: wall {wall:.1f}s (session opens included), judging summed {judging:.1f}s, "
        f"spans overlapped up to {side_by_side:.1f}s; quiet phases {quiet:.1f}s in all, none overlapping"
    )


def test_timing_gate_lets_one_process_in_at_a_time(tmp_path: Path) -> None:
    """Two gates on one lock file (as two devices' workers hold them): the second waits for the
    first to leave; one gate entered twice (phases of one session overlapping) does not wait."""
    lock = tmp_path / "timing.lock"
    first, second = TimingGate(lock), TimingGate(lock)
    entered = threading.Event()

    def other() -> None:
        with second():
            entered.set()

    with first(), first():  # nested: no deadlock
        thread = threading.Thread(target=other)
        thread.start()
        assert not entered.wait(0.5)  # held out while the first is in a quiet phase
    thread.join(5)
    assert entered.is_set()
    first_left = max(end for _, end in first.take())
    assert first_left <= second.take()[0][0]  # the second came in after the first left


def test_visible_gpus_give_one_pinned_slot_each(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5,7")
    slots = device_slots(Device.CUDA)
    assert [(s.label, s.env()) for s in slots] == [
        ("gpu2", {"CUDA_VISIBLE_DEVICES": "2"}),
        ("gpu5", {"CUDA_VISIBLE_DEVICES": "5"}),
        ("gpu7", {"CUDA_VISIBLE_DEVICES": "7"}),
    ]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert len(device_slots(Device.CUDA)) == 1  # one GPU: the single session below


@pytest.mark.slow  # two references run (the sessions open for real)
def test_one_device_is_todays_single_session_and_several_a_pool() -> None:
    config = AgentConfig.from_settings(
        load_settings(), "relu", RunFlags(device=Device.CPU, size=Size.SMALL, timing=False)
    )
    with harness_session(config, load_settings()) as evaluator:
        assert type(evaluator) is EvalSession
    with harness_session(config, load_settings(), cpu_devices=2) as evaluator:
        assert isinstance(evaluator, EvalPool)
        assert [s.label for s in evaluator.slots] == ["cpu0", "cpu1"]
