"""Entries to database rows and back: the one place that knows the candidates' and lessons'
column layout (migrations.py creates it)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from kernelwright.memory.records import CandidateEntry, LessonEntry, Speed

CANDIDATE_COLUMNS = [
    "uid",
    "run_id",
    "cand_index",
    "round",
    "problem",
    "problem_sha256",
    "backend",
    "device",
    "machine",
    "arch",
    "source",
    "source_sha256",
    "verdict",
    "reason",
    "error_class",
    "message",
    "eager_ratio",
    "eager_ci_low",
    "eager_ci_high",
    "compile_ratio",
    "compile_ci_low",
    "compile_ci_high",
    "score",
    "digest",
    "plan",
    "lesson",
    "scripted",
    "origin",
    "created_at",
    "updated_at",
]
LESSON_COLUMNS = ["uid", "text", "source", "url", "device", "arch", "ops", "origin", "created_at"]
# On a second write of the same candidate (a resumed run, a re-import), text that arrived later
# (the digest, the lesson) is kept rather than blanked by a copy that predates it.
_KEEP_WHEN_EMPTY = ("digest", "plan", "lesson")


def _speed_columns(prefix: str, speed: Speed | None) -> dict[str, float | None]:
    return {
        f"{prefix}_ratio": speed.ratio if speed else None,
        f"{prefix}_ci_low": speed.ci_low if speed else None,
        f"{prefix}_ci_high": speed.ci_high if speed else None,
    }


def candidate_row(entry: CandidateEntry) -> dict[str, Any]:
    data = entry.model_dump(exclude={"id", "index", "speed_eager", "speed_compile"})
    data["cand_index"] = entry.index
    data.update(_speed_columns("eager", entry.speed_eager))
    data.update(_speed_columns("compile", entry.speed_compile))
    data["score"] = entry.score()
    return {column: data[column] for column in CANDIDATE_COLUMNS}


def _speed(row: sqlite3.Row, prefix: str) -> Speed | None:
    ratio = row[f"{prefix}_ratio"]
    if ratio is None:
        return None
    return Speed(ratio=ratio, ci_low=row[f"{prefix}_ci_low"], ci_high=row[f"{prefix}_ci_high"])


def candidate_from_row(row: sqlite3.Row) -> CandidateEntry:
    data = {k: row[k] for k in row.keys() if k in CandidateEntry.model_fields}  # noqa: SIM118 (a Row iterates values)
    return CandidateEntry(
        **data,
        index=row["cand_index"],
        speed_eager=_speed(row, "eager"),
        speed_compile=_speed(row, "compile"),
    )


def upsert_candidate_sql() -> str:
    names = ", ".join(CANDIDATE_COLUMNS)
    marks = ", ".join(f":{c}" for c in CANDIDATE_COLUMNS)
    updates = []
    for column in CANDIDATE_COLUMNS:
        if column in ("uid", "created_at"):
            continue
        if column in _KEEP_WHEN_EMPTY:
            updates.append(f"{column} = CASE WHEN excluded.{column} != '' THEN excluded.{column} ELSE {column} END")
        else:
            updates.append(f"{column} = excluded.{column}")
    return f"INSERT INTO candidates ({names}) VALUES ({marks}) ON CONFLICT(uid) DO UPDATE SET {', '.join(updates)}"


def lesson_row(entry: LessonEntry) -> dict[str, Any]:
    data = entry.model_dump(exclude={"id"})
    data["ops"] = json.dumps(entry.ops)
    return {column: data[column] for column in LESSON_COLUMNS}


def lesson_from_row(row: sqlite3.Row) -> LessonEntry:
    data = {k: row[k] for k in row.keys() if k in LessonEntry.model_fields}  # noqa: SIM118 (a Row iterates values)
    data["ops"] = json.loads(row["ops"] or "[]")
    return LessonEntry(**data)


def insert_lesson_sql() -> str:
    names = ", ".join(LESSON_COLUMNS)
    marks = ", ".join(f":{c}" for c in LESSON_COLUMNS)
    return f"INSERT INTO lessons ({names}) VALUES ({marks}) ON CONFLICT(uid) DO NOTHING"
