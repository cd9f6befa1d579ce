"""The batch's results file, `OUT/results.jsonl`: one JSON line per judged candidate, problem
error or optimisation outcome, appended (flushed and fsynced) the moment it exists. It is the
batch's only memory: a rerun reads it and skips every key whose latest line is final, so a
`kill -9` loses only what was in flight. A line torn by a kill is cut off before the next append.

`OUT/batch.json` records what the batch was asked (mode, the options that decide verdicts and
times, the problem set); a rerun into the same folder with other options is refused.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from kernelwright.errors import UsageError

log = logging.getLogger(__name__)

RECORD_SCHEMA_VERSION = 1
RESULTS_FILE = "results.jsonl"
MANIFEST_FILE = "batch.json"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class SpeedupFigure(BaseModel):
    """One speedup as the report needs it: the ratio of medians and its 95% CI."""

    ratio: float
    ci_low: float
    ci_high: float


class BatchRecord(BaseModel):
    """One line of results.jsonl. `final` lines are done; others (an environment error, a worker
    that died) are tried again by the next run."""

    schema_version: int = RECORD_SCHEMA_VERSION
    kind: Literal["candidate", "problem_error", "optimize"]
    key: str = Field(description="Unique in the batch: `<problem>::<candidate path>` or `<problem>::optimize`.")
    problem: str
    problem_sha256: str = ""
    level: int | None = None
    problem_id: int | None = None
    candidate: str | None = Field(default=None, description="Relative to --candidates (judge mode).")
    candidate_sha256: str = ""
    sample: int | None = None
    verdict: str | None = None
    reason: str | None = None
    message: str = ""
    exit_code: int = 0
    final: bool = True
    speedups: dict[str, SpeedupFigure] = Field(default_factory=dict)
    times_ms: dict[str, float] = Field(default_factory=dict, description="Medians: candidate and each baseline.")
    seconds: float = 0.0
    phases: dict[str, float] = Field(default_factory=dict)
    backend: str = ""
    device: str = ""
    hardware: str = ""
    worker: str = ""
    cost_usd: float = 0.0
    tokens: int = 0
    run_id: str | None = None
    accepted: bool | None = None
    stop_reason: str | None = None
    evidence: str | None = Field(default=None, description="The full result, relative to the batch folder.")
    build_cached: bool | None = Field(
        default=None, description="Every extension the candidate built was in the build cache when it was judged."
    )
    ahead: dict[str, float] = Field(
        default_factory=dict,
        description="Work done for this result ahead of its judging, off the critical path, in seconds: `prebuild` "
        "(its build ahead, when that build did the work) and, on a problem's first result, `session` (how long "
        "its session, opened while the previous problem was judged, was open before judging began).",
    )
    created_at: str = Field(default_factory=_now)

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"


def candidate_key(problem: str, candidate: str) -> str:
    return f"{problem}::{candidate}"


class ResultsFile:
    """results.jsonl: append-only, one writer (the batch's driver), safe against torn lines."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / RESULTS_FILE
        self._lock = threading.Lock()
        folder.mkdir(parents=True, exist_ok=True)
        self._repair()

    def _repair(self) -> None:
        """Cut a last line a kill left half-written, so the next append starts a line of its own."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            log.warning("%s: dropping a torn last line (%d bytes)", self.path, len(data) - keep)
            with open(self.path, "r+b") as handle:
                handle.truncate(keep)

    def append(self, record: BatchRecord) -> None:
        line = (record.model_dump_json() + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

    def read(self) -> list[BatchRecord]:
        return read_records(self.path)


def read_records(path: Path) -> list[BatchRecord]:
    """Every readable line, in order; a torn or foreign line is skipped with a warning."""
    if not path.exists():
        return []
    records: list[BatchRecord] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if int(data.get("schema_version", 0)) > RECORD_SCHEMA_VERSION:
                raise UsageError(f"{path}:{number}: written by a newer kernelwright", hint="upgrade kernelwright")
            records.append(BatchRecord.model_validate(data))
        except (json.JSONDecodeError, ValidationError, AttributeError) as exc:
            log.warning("%s:%d: skipping an unreadable line (%s)", path, number, type(exc).__name__)
    return records


def latest(records: list[BatchRecord]) -> dict[str, BatchRecord]:
    """The last line of each key (a retried key's new line replaces the old one)."""
    out: dict[str, BatchRecord] = {}
    for record in records:
        out[record.key] = record
    return out


def done_keys(records: list[BatchRecord]) -> dict[str, BatchRecord]:
    """Keys a rerun skips: their latest line is final."""
    return {k: r for k, r in latest(records).items() if r.final}


class Manifest(BaseModel):
    """batch.json: what this folder's results were asked for."""

    schema_version: int = 1
    mode: Literal["judge", "optimize"]
    judged_with: dict[str, Any] = Field(default_factory=dict)
    problems: list[dict[str, Any]] = Field(default_factory=list, description="The problem set, for the report.")
    candidates_dir: str | None = None
    unmatched: list[list[str]] = Field(default_factory=list)
    problem_errors: list[str] = Field(default_factory=list)
    invocations: list[dict[str, Any]] = Field(default_factory=list, description="Start, end, worker count, done.")

    @classmethod
    def load(cls, folder: Path) -> Manifest | None:
        path = folder / MANIFEST_FILE
        if not path.exists():
            return None
        try:
            return cls.model_validate_json(path.read_text())
        except (OSError, ValidationError) as exc:
            raise UsageError(f"{path}: not a batch manifest: {exc}") from exc

    def save(self, folder: Path) -> None:
        path = folder / MANIFEST_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.model_dump_json(indent=1))
        tmp.replace(path)

    def check_compatible(self, earlier: Manifest | None, folder: Path) -> None:
        """Results judged with other options (device, size, baselines, ...) are never mixed."""
        if earlier is None:
            return
        if earlier.mode != self.mode:
            raise UsageError(f"{folder} holds a `batch {earlier.mode}` batch; use another --out")
        if earlier.judged_with != self.judged_with:
            diff = sorted(
                k
                for k in {*earlier.judged_with, *self.judged_with}
                if earlier.judged_with.get(k) != self.judged_with.get(k)
            )
            raise UsageError(
                f"{folder} holds results judged with other options ({', '.join(diff)}: "
                f"{', '.join(f'{k}={earlier.judged_with.get(k)!r}' for k in diff)})",
                hint="rerun with the same options to resume, or use another --out",
            )
