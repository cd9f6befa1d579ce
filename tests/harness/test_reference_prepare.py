"""The reference's process makes the clean baselines once (`prepare`, sent right after the
reference while nothing is timed) and every later `baselines` only times them: the compile is off
the critical path of the first correct candidate, and the spacer re-time reuses the same compiled
forms. Without `prepare` (the CPU), each `baselines` makes its own and keeps nothing. Driven through
`oracle.serve` with a scripted channel, on the CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernelwright.harness.options import TimingPlan
from kernelwright.harness.timing import run as timing_run
from kernelwright.harness.workers import reference as oracle
from kernelwright.harness.workers.jobs import WorkerJob
from kernelwright.harness.workers.messages import Report
from kernelwright.problems import resolve_problem


class ScriptedChannel:
    def __init__(self, commands: list[str]) -> None:
        self.commands = [*commands, "stop"]
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    def send(self, event: str, phase: str, **data: Any) -> None:
        self.sent.append((event, phase, data))

    def report(self, phase: str, report: Report) -> None:
        self.send("result", phase, **report.wire())

    def wait_command(self) -> str:
        return self.commands.pop(0)


def _job(tmp_path: Path) -> WorkerJob:
    plan = TimingPlan(warmup=1, min_reps=3, max_reps=5, time_cap_s=2.0, input_sets=2)
    return WorkerJob(
        mode="reference",
        problem_path=resolve_problem("relu").path,
        size="small",
        out_dir=tmp_path,
        build_cache=tmp_path / "cache",
        timing=plan,
        baselines=["eager"],
    )


@pytest.fixture
def prepared_count(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    made: list[int] = []
    real = timing_run.prepare_baselines

    def counting(job: WorkerJob, inst: Any) -> timing_run.Baselines:
        made.append(1)
        return real(job, inst)

    monkeypatch.setattr(timing_run, "prepare_baselines", counting)
    return made


def _results(chan: ScriptedChannel, phase: str) -> list[dict[str, Any]]:
    return [data for event, name, data in chan.sent if event == "result" and name == phase]


def test_prepare_makes_the_baselines_once_and_baselines_only_times_them(
    tmp_path: Path, prepared_count: list[int]
) -> None:
    chan = ScriptedChannel(["prepare", "baselines 0", "baselines 0.5"])
    oracle.serve(_job(tmp_path), chan)
    assert len(prepared_count) == 1  # the spacer re-time reuses what `prepare` made
    [prepare] = _results(chan, "prepare")
    assert prepare["seconds"] >= 0
    clean, spaced = _results(chan, "baselines")
    for times in (clean["times"], spaced["times"]):
        assert set(times) == {"eager"} and times["eager"]["median_ms"] > 0  # the spacer is never reported


def test_without_prepare_each_baselines_makes_its_own(tmp_path: Path, prepared_count: list[int]) -> None:
    """The CPU's way: nothing kept between calls (the input sets would hold host memory the
    comparisons need)."""
    chan = ScriptedChannel(["baselines 0", "baselines 0"])
    oracle.serve(_job(tmp_path), chan)
    assert len(prepared_count) == 2 and len(_results(chan, "baselines")) == 2
