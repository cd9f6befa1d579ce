"""Progress of a batch as typed events: what the command's progress display and `--events-json`
consume. The driver emits them (never a worker), in the order things happened."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from kernelwright.batch.results import BatchRecord

EVENT_SCHEMA_VERSION = 1


class _BatchEvent(BaseModel):
    schema_version: int = EVENT_SCHEMA_VERSION
    ts: str = Field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"))


class BatchStarted(_BatchEvent):
    kind: Literal["batch_started"] = "batch_started"
    mode: str
    out: str
    problems: int
    to_do: int = Field(description="Candidates (judge) or problems (optimize) this run will work on.")
    already_done: int
    workers: list[str]
    backend: str = Field(description="`local` (worker subprocesses) or `ray`.")


class ProblemStarted(_BatchEvent):
    kind: Literal["problem_started"] = "problem_started"
    worker: str
    problem: str
    to_do: int = Field(description="Results this problem owes (its candidates, or 1 for an optimisation).")


class WorkerStatus(_BatchEvent):
    kind: Literal["worker_status"] = "worker_status"
    worker: str
    problem: str = ""
    text: str


class ResultRecorded(_BatchEvent):
    kind: Literal["result"] = "result"
    worker: str
    record: BatchRecord
    done: int
    to_do: int
    correct: int


class BatchFinished(_BatchEvent):
    kind: Literal["batch_finished"] = "batch_finished"
    done: int
    to_do: int
    correct: int
    seconds: float
    exit_code: int
    report: str | None = None


BatchEvent = BatchStarted | ProblemStarted | WorkerStatus | ResultRecorded | BatchFinished
Listener = Callable[[BatchEvent], None]


class JsonLinesSink:
    """`--events-json FILE`: every event as one JSON line, flushed as it comes."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self._lock = threading.Lock()

    def __call__(self, event: BatchEvent) -> None:
        with self._lock:
            self._file.write(event.model_dump_json() + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()
