"""KnowledgeBase: what the agent and `kernelwright memory` do with the memory database — record a
candidate as soon as it is judged, attach the profiler's digest and the reviewer's lesson when
they arrive, look entries up, forget them. Retrieval for the planner is `retrieval.py`;
export/import is `exchange.py`; the file itself is `store.py`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from kernelwright.errors import UsageError
from kernelwright.memory.records import CandidateEntry, LessonEntry, now
from kernelwright.memory.retrieval import SCAN_LIMIT, Recall, RecallQuery, rank
from kernelwright.memory.rows import (
    candidate_from_row,
    candidate_row,
    insert_lesson_sql,
    lesson_from_row,
    lesson_row,
    upsert_candidate_sql,
)
from kernelwright.memory.seed import load_seed
from kernelwright.memory.signature import SIGNATURE_VERSION, OpSignature, ProblemKey, signature_of
from kernelwright.memory.store import MemoryStore
from kernelwright.problems import Problem

_REF = re.compile(r"^(?P<kind>[cl])(?P<id>\d+)$")
_SEARCHED = (
    "problem || ' ' || plan || ' ' || lesson || ' ' || message || ' ' || verdict || ' ' || "
    "COALESCE(reason, '') || ' ' || machine || ' ' || arch || ' ' || backend || ' ' || digest"
)


def name_matches(qualified: str, ref: str) -> bool:
    """`relu`, `1_relu` and `level1/1_relu` all name level1/1_relu (not level1/6_leaky_relu)."""
    q, ref = qualified.lower(), ref.lower().strip()
    stem = q.rsplit("/", 1)[-1]
    head, _, rest = stem.partition("_")
    bare = rest if head.isdigit() and rest else stem
    return ref in (q, stem, bare)


class KnowledgeBase:
    """The memory database's operations. Every write is its own committed transaction."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    @classmethod
    def open(cls, path: Path) -> KnowledgeBase:
        """Open (create, migrate) the database and add any seed lessons it lacks."""
        kb = cls(MemoryStore.open(path))
        try:
            kb.seed()
        except BaseException:
            kb.close()
            raise
        return kb

    @property
    def path(self) -> Path:
        return self.store.path

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # problems -------------------------------------------------------------------------------
    def problem_key(self, problem: Problem) -> ProblemKey:
        """The problem's key; its signature is computed once (tracing the reference) and stored."""
        rows = self.store.query("SELECT signature FROM problems WHERE sha256 = ?", (problem.sha256,))
        if rows:
            signature = OpSignature.model_validate_json(rows[0]["signature"])
            if signature.version == SIGNATURE_VERSION:
                return ProblemKey(problem.sha256, problem.qualified, signature)
        key = ProblemKey(problem.sha256, problem.qualified, signature_of(problem))
        self.put_problem(key)
        return key

    def put_problem(self, key: ProblemKey) -> None:
        with self.store.write() as conn:
            conn.execute(
                "INSERT INTO problems (sha256, name, signature, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(sha256) DO UPDATE SET name = excluded.name, signature = excluded.signature, "
                "updated_at = excluded.updated_at",
                (key.sha256, key.name, key.signature.model_dump_json(), now()),
            )

    def signatures(self) -> dict[str, ProblemKey]:
        """Every known problem, by source hash."""
        return {
            row["sha256"]: ProblemKey(row["sha256"], row["name"], OpSignature.model_validate_json(row["signature"]))
            for row in self.store.query("SELECT sha256, name, signature FROM problems")
        }

    def problem_shas(self, ref: str) -> list[str]:
        """Hashes of the problems a user's reference names: a name form, or a hash prefix."""
        rows = self.store.query("SELECT DISTINCT problem, problem_sha256 FROM candidates")
        ref_l = ref.lower()
        return sorted(
            {
                r["problem_sha256"]
                for r in rows
                if name_matches(r["problem"], ref) or (len(ref_l) >= 6 and r["problem_sha256"].startswith(ref_l))
            }
        )

    # candidates -----------------------------------------------------------------------------
    def record(self, entry: CandidateEntry) -> None:
        """Insert or update (same uid: a resumed run, a re-import) one candidate, committed now."""
        with self.store.write() as conn:
            conn.execute(upsert_candidate_sql(), candidate_row(entry))

    def annotate(
        self, run_id: str, indexes: Sequence[int], *, digest: str | None = None, lesson: str | None = None
    ) -> int:
        """Attach a digest or a lesson to candidates of a run; returns how many rows changed."""
        sets, values = [], []
        for column, value in (("digest", digest), ("lesson", lesson)):
            if value:
                sets.append(f"{column} = ?")
                values.append(value)
        if not sets or not indexes:
            return 0
        marks = ", ".join("?" for _ in indexes)
        with self.store.write() as conn:
            cursor = conn.execute(
                f"UPDATE candidates SET {', '.join(sets)}, updated_at = ? WHERE run_id = ? AND cand_index IN ({marks})",
                (*values, now(), run_id, *indexes),
            )
            return int(cursor.rowcount)

    def candidates(
        self,
        *,
        problem: str | None = None,
        machine: str | None = None,
        verdict: str | None = None,
        run_id: str | None = None,
        text: str | None = None,
        limit: int | None = None,
    ) -> list[CandidateEntry]:
        """Candidates, newest first, filtered by problem (name or hash prefix), machine or
        architecture (substring), verdict, run and words (each must appear somewhere)."""
        where, params = self._filters(problem=problem, machine=machine, verdict=verdict, run_id=run_id, text=text)
        sql = f"SELECT * FROM candidates {where} ORDER BY created_at DESC, id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [candidate_from_row(r) for r in self.store.query(sql, params)]

    def _filters(self, **given: str | None) -> tuple[str, list[object]]:
        clauses: list[str] = []
        params: list[object] = []
        if given.get("problem"):
            shas = self.problem_shas(str(given["problem"]))
            clauses.append(f"problem_sha256 IN ({', '.join('?' for _ in shas) or 'NULL'})")
            params += shas
        if given.get("machine"):
            clauses.append("(LOWER(machine) LIKE ? OR LOWER(arch) LIKE ?)")
            params += [f"%{str(given['machine']).lower()}%"] * 2
        if given.get("verdict"):
            clauses.append("verdict = ?")
            params.append(given["verdict"])
        if given.get("run_id"):
            clauses.append("run_id = ?")
            params.append(given["run_id"])
        for word in str(given.get("text") or "").split():
            clauses.append(f"LOWER({_SEARCHED}) LIKE ?")
            params.append(f"%{word.lower()}%")
        return ("WHERE " + " AND ".join(clauses)) if clauses else "", params

    def all_candidates(self) -> list[CandidateEntry]:
        return [candidate_from_row(r) for r in self.store.query("SELECT * FROM candidates ORDER BY id")]

    # lessons --------------------------------------------------------------------------------
    def add_lesson(self, lesson: LessonEntry, *, revive: bool = False) -> bool:
        """Add a lesson unless its uid is there already (or was forgotten, unless `revive`)."""
        return self._add_lessons([lesson], revive=revive) == 1

    def _add_lessons(self, lessons: Iterable[LessonEntry], *, revive: bool = False, seed_version: int = 0) -> int:
        added = 0
        with self.store.write() as conn:
            for lesson in lessons:
                if conn.execute("SELECT 1 FROM forgotten WHERE uid = ?", (lesson.uid,)).fetchone():
                    if not revive:
                        continue
                    conn.execute("DELETE FROM forgotten WHERE uid = ?", (lesson.uid,))
                added += conn.execute(insert_lesson_sql(), lesson_row(lesson)).rowcount
            if seed_version:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('seed_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (str(seed_version),),
                )
        return added

    def lessons(self, text: str | None = None, limit: int | None = None) -> list[LessonEntry]:
        clauses, params = [], []
        for word in (text or "").split():
            clauses.append("LOWER(text || ' ' || source || ' ' || ops || ' ' || COALESCE(arch, '')) LIKE ?")
            params.append(f"%{word.lower()}%")
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        sql = f"SELECT * FROM lessons {where} ORDER BY id" + (f" LIMIT {int(limit)}" if limit is not None else "")
        return [lesson_from_row(r) for r in self.store.query(sql, params)]

    def seed(self) -> int:
        """Add the packaged seed lessons this database has not seen (a newer package may ship more),
        in one transaction; a seed lesson someone forgot stays forgotten."""
        version, lessons = load_seed()
        if int(self.store.meta("seed_version") or 0) >= version:
            return 0
        return self._add_lessons(lessons, seed_version=version)

    # look-up and forgetting -----------------------------------------------------------------
    def entry(self, ref: str) -> CandidateEntry | LessonEntry:
        """One entry by its local id (`c12`, `l3`) or a prefix of its uid (6 characters or more)."""
        found = self._find(ref)
        if len(found) == 1:
            return found[0]
        if not found:
            raise UsageError(
                f"no memory entry {ref!r}",
                hint="ids look like c12 (a candidate) or l3 (a lesson); `kernelwright memory list` shows them",
            )
        labels = ", ".join(e.label for e in found[:6])
        raise UsageError(f"{ref!r} matches several entries ({labels})", hint="give more of the uid")

    def _find(self, ref: str) -> list[CandidateEntry | LessonEntry]:
        match = _REF.match(ref.strip().lower())
        if match:
            table = "candidates" if match["kind"] == "c" else "lessons"
            rows = self.store.query(f"SELECT * FROM {table} WHERE id = ?", (int(match["id"]),))
            convert = candidate_from_row if table == "candidates" else lesson_from_row
            return [convert(r) for r in rows]
        if len(ref) < 6 or not re.fullmatch(r"[0-9a-zA-Z_-]+", ref):
            return []
        like = (ref.lower() + "%",)
        found: list[CandidateEntry | LessonEntry] = [
            candidate_from_row(r) for r in self.store.query("SELECT * FROM candidates WHERE uid LIKE ?", like)
        ]
        found += [lesson_from_row(r) for r in self.store.query("SELECT * FROM lessons WHERE uid LIKE ?", like)]
        return found

    def forget(self, entries: Iterable[CandidateEntry | LessonEntry]) -> int:
        """Delete entries; their uids are remembered as forgotten so a seed never brings them back."""
        count = 0
        with self.store.write() as conn:
            for entry in entries:
                table = "candidates" if isinstance(entry, CandidateEntry) else "lessons"
                count += conn.execute(f"DELETE FROM {table} WHERE uid = ?", (entry.uid,)).rowcount
                conn.execute(
                    "INSERT INTO forgotten (uid, forgotten_at) VALUES (?, ?) ON CONFLICT(uid) DO NOTHING",
                    (entry.uid, now()),
                )
        return count

    # retrieval ------------------------------------------------------------------------------
    def recall(self, query: RecallQuery) -> Recall:
        """What the planner is shown (`retrieval.rank`): ranked, budgeted, each item with its why."""
        rows = self.store.query(
            "SELECT * FROM candidates WHERE device = ? ORDER BY created_at DESC, id DESC LIMIT ?",
            (query.machine.device, SCAN_LIMIT),
        )
        return rank([candidate_from_row(r) for r in rows], self.signatures(), self.lessons(), query)

    def counts(self) -> dict[str, int]:
        row = self.store.query(
            "SELECT (SELECT COUNT(*) FROM candidates) AS candidates, (SELECT COUNT(*) FROM lessons) AS lessons, "
            "(SELECT COUNT(*) FROM problems) AS problems"
        )[0]
        return {k: int(row[k]) for k in row.keys()}  # noqa: SIM118 (a Row iterates values)
