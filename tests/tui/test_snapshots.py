"""Snapshots of the TUI (pytest-textual-snapshot), fed by a recorded event stream replayed
through the real app (tests/data/tui/run, recorded by make_run.py there: fixed timestamps, no
live timings): the start screen, a run in progress, a finished run, and the finished run's chart
at 160x50. After an intended change of the screens: `pytest tests/tui/test_snapshots.py
--snapshot-update`, then look at the new SVGs (tests/__snapshots__/) before committing them."""

from __future__ import annotations

from pathlib import Path

from kernelwright.config import load_settings
from kernelwright.problems.loader import builtin_problems
from kernelwright.tui.app import make_app
from kernelwright.tui.launch import RunRequest
from kernelwright.tui.screens.start import StartChoices
from kernelwright.vocabulary import Device
from tests.tui.helpers import FakeBackend, recorded_run

# The event after which round 3's evaluation is running: a mid-run picture.
MID_RUN = 53


def _app(runs_dir: Path, replay: int | None = None):  # type: ignore[no-untyped-def]
    config = recorded_run(runs_dir)
    request = RunRequest(config=config, read_only=True, replay_events=replay)
    return make_app(load_settings(), request=request, backend=FakeBackend())


def test_start_screen(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    choices = StartChoices(problems=builtin_problems(), runs=[], devices=[Device.CPU])
    app = make_app(load_settings(), choices=choices, backend=FakeBackend())
    assert snap_compare(app, terminal_size=(80, 24))


def test_a_run_in_progress(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_app(tmp_path / "runs", MID_RUN), terminal_size=(80, 24))


def test_a_finished_run(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_app(tmp_path / "runs"), terminal_size=(80, 24))


def test_a_finished_run_wide_with_the_chart(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_app(tmp_path / "runs"), terminal_size=(160, 50), press=["5"])


def test_the_finished_runs_code_and_diff(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_app(tmp_path / "runs"), terminal_size=(100, 30), press=["3"])
