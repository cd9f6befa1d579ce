"""The run folder, runs/<run-id>/: what a run leaves behind and what `--resume` reads back.

config.json          the run's AgentConfig (no API key), so --resume needs only the id
checkpoints.sqlite   LangGraph's checkpoints (thread id = run id)
candidates/NNN.py    every candidate, as written by the coder
results/<sha>.json   its EvalResult, keyed by source hash, stored as soon as it exists
drafts/<sha>.py      a coder reply's source as it arrived, built ahead of its evaluation (only the
                     build cache is warmed from it: nothing judges or resumes from this folder)
evidence/NNN/        the harness's evidence folder per candidate (source, result, worker log), and
                     on a GPU its profile: candidate.ncu-rep, digest.json, profile.json
best.py              the best correct candidate, a drop-in file
trajectory.json      every event (versioned);  summary.json  the outcome (versioned)
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

from kernelwright.agent.configuration import AgentConfig, RoleModel
from kernelwright.agent.events import _Event, parse_event
from kernelwright.agent.state import CandidateRecord, ProfileRecord
from kernelwright.errors import UsageError
from kernelwright.harness.result import EvalResult
from kernelwright.harness.sandbox.isolation import redact
from kernelwright.vocabulary import Backend, Device, Policy, Size, StructuredOutput, TemperatureSchedule

log = logging.getLogger(__name__)
SUMMARY_SCHEMA_VERSION = 1
_VOCABULARY: dict[str, type[StrEnum]] = {
    "device": Device,
    "backend": Backend,
    "size": Size,
    "policy": Policy,
    "structured_method": StructuredOutput,
    "temperature_schedule": TemperatureSchedule,
}


def source_sha(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def candidate_path(run_dir: Path, index: int) -> Path:
    return run_dir / "candidates" / f"{index:03d}.py"


def draft_path(run_dir: Path, sha: str) -> Path:
    """Where a draft is built ahead (`nodes/ahead.py`): named by its source, so a draft that comes
    twice (two samples, or a resumed step) is one file."""
    return run_dir / "drafts" / f"{sha[:16]}.py"


def stored_result(run_dir: Path, sha: str) -> EvalResult | None:
    path = run_dir / "results" / f"{sha}.json"
    return EvalResult.load(path) if path.exists() else None


def store_result(run_dir: Path, sha: str, result: EvalResult) -> Path:
    folder = run_dir / "results"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{sha}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(result.to_json())
    tmp.replace(path)  # atomic: a kill leaves the old file or the new one, never half of one
    return path


def store_profile(folder: Path, record: ProfileRecord, digest_json: str) -> Path:
    """digest.json (the NcuDigest) and profile.json (the state's record) of a profiled candidate."""
    folder.mkdir(parents=True, exist_ok=True)
    digest = folder / "digest.json"
    digest.write_text(digest_json)
    (folder / "profile.json").write_text(json.dumps({**record, "digest_json": str(digest)}))
    return digest


def _read_object(path: Path) -> dict[str, Any] | None:
    """A JSON object written by a run, or None when it is missing or unreadable (a run killed midway)."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def read_profile(folder: Path) -> ProfileRecord | None:
    data = _read_object(folder / "profile.json")
    if data is None:
        return None
    return ProfileRecord(**{k: data.get(k) for k in ProfileRecord.__annotations__})  # type: ignore[typeddict-item]


def save_config(config: AgentConfig) -> None:
    config.run_dir.mkdir(parents=True, exist_ok=True)
    data = dataclasses.asdict(config)
    data.pop("api_key", None)
    (config.run_dir / "config.json").write_text(json.dumps(data, indent=2, default=str))


def load_config(runs_dir: Path, run_id: str) -> AgentConfig:
    """The config a run started with (its config.json)."""
    path = runs_dir / run_id / "config.json"
    if not path.is_file():
        raise UsageError(f"no run {run_id!r} in {runs_dir}", hint="`kernelwright runs list` shows the runs")
    data = json.loads(path.read_text())
    data["runs_dir"] = Path(data["runs_dir"])
    data["roles"] = {k: RoleModel(**v) for k, v in data.get("roles", {}).items()}
    if data.get("memory_db"):
        data["memory_db"] = Path(data["memory_db"])
    known = {f.name for f in dataclasses.fields(AgentConfig)}
    data = {k: v for k, v in data.items() if k in known}
    for name, words in _VOCABULARY.items():  # the plain strings of the file, as the vocabulary's members
        if data.get(name) in tuple(words):
            data[name] = words(data[name])
    return AgentConfig(**data)


@contextlib.contextmanager
def exclusive(run_dir: Path) -> Iterator[None]:
    """Hold the run folder for one process: two processes driving one run's checkpoints (an
    `optimize --resume` beside a `tui --resume`) would interleave their steps. An advisory lock on
    run_dir/.lock, released when the process ends however it ends."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / ".lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise UsageError(
                f"run {run_dir.name} is in progress in {holder}", hint="wait for it to stop, then resume it"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {os.getpid()}")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    doc = {"schema_version": SUMMARY_SCHEMA_VERSION, **summary}
    (run_dir / "summary.json").write_text(redact(json.dumps(doc, indent=2)))  # an error line can quote a key


def read_events(run_dir: Path) -> list[_Event]:
    """A run's events from its trajectory.json, in order (none when it has none yet); an event of a
    kind this version does not know is skipped, the rest still read."""
    doc = _read_object(run_dir / "trajectory.json")
    events = []
    for item in (doc or {}).get("events", []):
        try:
            events.append(parse_event(item))
        except ValueError:
            continue
    return events


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    return _read_object(run_dir / "summary.json")


def list_runs(runs_dir: Path) -> list[dict[str, Any]]:
    """One row per run folder (newest first): id, problem, status, best speedup."""
    rows: list[dict[str, Any]] = []
    if not runs_dir.is_dir():
        return rows
    for folder in sorted(runs_dir.iterdir(), reverse=True):
        config = folder / "config.json"
        if not config.is_file():
            continue
        try:
            cfg = json.loads(config.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        summary = read_summary(folder)
        rows.append(
            {
                "run_id": folder.name,
                "problem": cfg.get("problem"),
                "device": cfg.get("device"),
                "scripted": cfg.get("scripted"),
                "status": (summary or {}).get("stop_reason", "unfinished (resumable)"),
                "accepted": (summary or {}).get("accepted", False),
                "candidates": len(list((folder / "candidates").glob("*.py"))),
                "best": (summary or {}).get("best"),
            }
        )
    return rows


def branch_source(runs_dir: Path, run_id: str, index: int | None) -> dict[str, Any]:
    """The summary's record of candidate `index` of run `run_id` (its best when None); a
    UsageError naming what there is when it is not there."""
    folder = runs_dir / run_id
    if not (folder / "config.json").is_file():
        raise UsageError(f"no run {run_id!r} in {runs_dir}", hint="`kernelwright runs list` shows the runs")
    summary = read_summary(folder)
    if summary is None:
        raise UsageError(f"run {run_id} has no summary.json: nothing to branch from")
    found: dict[str, Any] | None
    if index is None:
        found = summary.get("best")
        if not found:
            raise UsageError(f"run {run_id} has no correct candidate", hint="name one: --from-candidate N")
    else:
        known = {int(c["index"]): c for c in summary.get("candidates", [])}
        found = known.get(index)
        if found is None:
            listed = ", ".join(map(str, sorted(known))) or "none"
            raise UsageError(f"run {run_id} has no candidate {index}", hint=f"its candidates: {listed}")
    if not candidate_path(folder, int(found["index"])).is_file():
        raise UsageError(f"candidate file {candidate_path(folder, int(found['index']))} is missing")
    return found


def branch_origin(config: AgentConfig) -> tuple[CandidateRecord, int]:
    """`--from RUN_ID --from-candidate N`: candidate N of the earlier run (its best when N is None),
    copied into this run as candidates/000.py and recorded as index 0, the first plan's parent.
    Returns (that record, the candidate's index in the earlier run)."""
    assert config.branch_from is not None
    found = branch_source(config.runs_dir, config.branch_from, config.branch_candidate)
    source_path = candidate_path(config.runs_dir / config.branch_from, int(found["index"]))
    here = candidate_path(config.run_dir, 0)
    here.parent.mkdir(parents=True, exist_ok=True)
    here.write_text(source_path.read_text())
    base = found.get("target_baseline")
    low = found["speedups"][base]["ci_low"] if base else None
    return CandidateRecord(
        index=0,
        round=0,
        attempt=0,
        sha256=str(found["sha256"]),
        path=str(here),
        verdict=str(found["verdict"]),
        reason=found.get("reason"),
        message=f"from run {config.branch_from}, candidate {found['index']}: {found.get('message', '')}"[:500],
        speedups=dict(found.get("speedups", {})),
        target_baseline=base,
        beats_target=found["verdict"] == "correct" and low is not None and low > config.target,
        parent=None,
    ), int(found["index"])
