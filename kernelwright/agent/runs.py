"""The run folder, runs/<run-id>/: what a run leaves behind and what `--resume` reads back.

config.json          the run's AgentConfig (no API key), so --resume needs only the id
checkpoints.sqlite   LangGraph's checkpoints (thread id = run id)
candidates/NNN.py    every candidate, as written by the coder
results/<sha>.json   its EvalResult, keyed by source hash, stored as soon as it exists
evidence/NNN/        the harness's evidence folder per candidate (source, result, worker log)
best.py              the best correct candidate, a drop-in file
trajectory.json      every event (versioned);  summary.json  the outcome (versioned)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from kernelwright.agent.configuration import AgentConfig, RoleModel
from kernelwright.errors import UsageError
from kernelwright.harness.result import EvalResult

log = logging.getLogger(__name__)
SUMMARY_SCHEMA_VERSION = 1


def source_sha(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def candidate_path(run_dir: Path, index: int) -> Path:
    return run_dir / "candidates" / f"{index:03d}.py"


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


def save_config(config: AgentConfig) -> None:
    config.run_dir.mkdir(parents=True, exist_ok=True)
    data = dataclasses.asdict(config)
    data.pop("api_key", None)
    (config.run_dir / "config.json").write_text(json.dumps(data, indent=2, default=str))


def load_config(runs_dir: Path, run_id: str, **overrides: Any) -> AgentConfig:
    """The config a run started with; `overrides` (flags given to --resume) win, None ignored."""
    path = runs_dir / run_id / "config.json"
    if not path.is_file():
        raise UsageError(f"no run {run_id!r} in {runs_dir}", hint="`kernelwright runs list` shows the runs")
    data = json.loads(path.read_text())
    data["runs_dir"] = Path(data["runs_dir"])
    data["roles"] = {k: RoleModel(**v) for k, v in data.get("roles", {}).items()}
    known = {f.name for f in dataclasses.fields(AgentConfig)}
    data = {k: v for k, v in data.items() if k in known}
    data.update({k: v for k, v in overrides.items() if v is not None})
    return AgentConfig(**data)


def write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    doc = {"schema_version": SUMMARY_SCHEMA_VERSION, **summary}
    (run_dir / "summary.json").write_text(json.dumps(doc, indent=2))


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / "summary.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


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
