"""A finished run's winner as the exporters read it: the run folder (`runs/<id>/`, or any folder
holding a run's config.json, such as one of a batch), its best correct candidate and the problem
it was judged on. Read straight from the files the agent writes (`agent/runs.py` documents the
layout): this layer sits below the agent and imports none of it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.errors import UsageError
from kernelwright.problems import Problem, resolve_problem


@dataclass(frozen=True)
class RunWinner:
    """The best correct candidate of one run."""

    run_id: str
    run_dir: Path
    problem: Problem
    device: str  # "cpu" or "cuda": where the harness judged it
    size: str  # the input size it was judged at ("small" or "default")
    index: int  # the candidate's number in the run
    path: Path  # its file
    source: str


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {what} {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{what} {path} is not a JSON object")
    return data


def run_folder(runs_dir: Path, run: str) -> Path:
    """The folder of `run`: an id under `runs_dir`, or a path to a run folder."""
    given = Path(run)
    for folder in (given, Path(runs_dir) / run):
        if (folder / "config.json").is_file():
            return folder
    raise UsageError(f"no run {run!r} in {runs_dir}", hint="`kernelwright runs list` shows the runs")


def read_winner(runs_dir: Path, run: str) -> RunWinner:
    """The run's best correct candidate; a run without one is a usage error (nothing to export)."""
    folder = run_folder(runs_dir, run)
    config = _read_json(folder / "config.json", "run config")
    if not (folder / "summary.json").is_file():
        raise UsageError(f"run {folder.name} has no summary.json yet (still running, or killed before it wrote one)")
    summary = _read_json(folder / "summary.json", "run summary")
    best = summary.get("best")
    if not isinstance(best, dict) or best.get("verdict") != "correct":
        raise UsageError(
            f"run {folder.name} has no correct candidate to export", hint="`kernelwright runs show` lists them"
        )
    index = int(best["index"])
    candidates = [folder / "candidates" / f"{index:03d}.py", folder / "best.py"]
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise UsageError(f"run {folder.name}: its best candidate #{index} is missing from {folder / 'candidates'}")
    problem_ref = str(config.get("problem") or summary.get("problem") or "")
    if not problem_ref:
        raise UsageError(f"run {folder.name}: its config.json names no problem")
    return RunWinner(
        run_id=folder.name,
        run_dir=folder,
        problem=resolve_problem(problem_ref),
        device=str(config.get("device") or summary.get("device") or "cpu"),
        size=str(config.get("size") or "default"),
        index=index,
        path=path,
        source=path.read_text(encoding="utf-8"),
    )
