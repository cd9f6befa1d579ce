"""`memory export` / `memory import`: a knowledge base as JSON lines, so a team can share one.

The first line is a header naming the format and its version; then one line per problem
(its operator signature), candidate and lesson. Entries keep their uids, so importing the same
file twice, or a file that overlaps what is already here, adds nothing twice. An import is
validated whole before anything is written, and written in one transaction: a malformed file
changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from pydantic import ValidationError

from kernelwright.errors import UsageError
from kernelwright.memory.knowledge import KnowledgeBase
from kernelwright.memory.migrations import SCHEMA_VERSION
from kernelwright.memory.records import CandidateEntry, LessonEntry, now
from kernelwright.memory.rows import candidate_row, insert_lesson_sql, lesson_row, upsert_candidate_sql
from kernelwright.memory.signature import OpSignature, ProblemKey

FORMAT = "kernelwright-memory"
FORMAT_VERSION = 1


@dataclass
class ImportCounts:
    candidates_added: int = 0
    candidates_updated: int = 0
    candidates_known: int = 0
    lessons_added: int = 0
    lessons_known: int = 0
    problems_added: int = 0

    def text(self) -> str:
        return (
            f"{self.candidates_added} candidate(s) added, {self.candidates_updated} updated, "
            f"{self.candidates_known} already known; {self.lessons_added} lesson(s) added, "
            f"{self.lessons_known} already known; {self.problems_added} problem signature(s) added"
        )


def export_lines(kb: KnowledgeBase, *, problem: str | None = None, lessons: bool = True) -> Iterator[str]:
    """The export, line by line. Seed lessons are left out (every kernelwright ships them)."""
    candidates = kb.candidates(problem=problem) if problem else kb.all_candidates()
    shas = {c.problem_sha256 for c in candidates}
    problems = [key for sha, key in kb.signatures().items() if sha in shas]
    shared = [lesson for lesson in kb.lessons() if lesson.origin != "seed"] if lessons else []
    header = {
        "kind": "header",
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "exported_at": now(),
        "counts": {"problems": len(problems), "candidates": len(candidates), "lessons": len(shared)},
    }
    yield json.dumps(header)
    for key in sorted(problems, key=lambda k: k.name):
        yield json.dumps(
            {"kind": "problem", "sha256": key.sha256, "name": key.name, "signature": key.signature.model_dump()}
        )
    for entry in sorted(candidates, key=lambda c: (c.created_at, c.uid)):
        yield json.dumps({"kind": "candidate", **entry.model_dump(mode="json", exclude={"id"})})
    for lesson in shared:
        yield json.dumps({"kind": "lesson", **lesson.model_dump(mode="json", exclude={"id"})})


@dataclass
class _Parsed:
    problems: list[ProblemKey]
    candidates: list[CandidateEntry]
    lessons: list[LessonEntry]


def _parse(lines: Iterable[str], name: str) -> _Parsed:
    parsed = _Parsed([], [], [])
    errors: list[str] = []
    header_seen = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data: Any = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            kind = data.pop("kind", None)
            if not header_seen:
                _check_header(kind, data, name)
                header_seen = True
            elif kind == "problem":
                signature = OpSignature.model_validate(data["signature"])
                parsed.problems.append(ProblemKey(str(data["sha256"]), str(data["name"]), signature))
            elif kind == "candidate":
                parsed.candidates.append(CandidateEntry.model_validate(data))
            elif kind == "lesson":
                parsed.lessons.append(LessonEntry.model_validate(data))
            else:
                raise ValueError(f"unknown kind {kind!r}")
        except UsageError:
            raise
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            errors.append(f"line {number}: {detail}")
    if not header_seen:
        raise UsageError(f"{name} is empty: not a kernelwright memory export")
    if errors:
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise UsageError(f"{name}: {len(errors)} malformed line(s), nothing imported: {'; '.join(errors[:3])}{more}")
    return parsed


def _check_header(kind: object, data: dict[str, Any], name: str) -> None:
    if kind != "header" or data.get("format") != FORMAT:
        raise UsageError(
            f"{name} is not a kernelwright memory export (its first line is no {FORMAT} header)",
            hint="`kernelwright memory export FILE` writes one",
        )
    version = data.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise UsageError(
            f"{name} is export format version {version}; this kernelwright reads up to {FORMAT_VERSION}",
            hint="upgrade kernelwright",
        )


def import_lines(kb: KnowledgeBase, handle: IO[str], name: str) -> ImportCounts:
    """Validate the whole file, then write it in one transaction."""
    parsed = _parse(handle, name)
    counts = ImportCounts()
    with kb.store.write() as conn:
        for key in parsed.problems:
            cursor = conn.execute(
                "INSERT INTO problems (sha256, name, signature, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(sha256) DO NOTHING",
                (key.sha256, key.name, key.signature.model_dump_json(), now()),
            )
            counts.problems_added += cursor.rowcount
        for entry in parsed.candidates:
            row = conn.execute("SELECT updated_at FROM candidates WHERE uid = ?", (entry.uid,)).fetchone()
            if row is not None and row["updated_at"] >= entry.updated_at:
                counts.candidates_known += 1
                continue
            conn.execute("DELETE FROM forgotten WHERE uid = ?", (entry.uid,))
            origin = entry.origin if row is not None else "import"
            conn.execute(upsert_candidate_sql(), candidate_row(entry.model_copy(update={"origin": origin})))
            if row is None:
                counts.candidates_added += 1
            else:
                counts.candidates_updated += 1
        for lesson in parsed.lessons:
            conn.execute("DELETE FROM forgotten WHERE uid = ?", (lesson.uid,))
            added = conn.execute(
                insert_lesson_sql(), lesson_row(lesson.model_copy(update={"origin": "import"}))
            ).rowcount
            counts.lessons_added += added
            counts.lessons_known += 1 - added
    return counts
