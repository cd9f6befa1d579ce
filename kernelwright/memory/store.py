"""The memory database file: opening it safely, migrating it, and turning SQLite's failures into
errors a person can act on.

- WAL journal and a busy timeout, so several processes (batch workers, a run beside a
  `memory list`) read and write at once; every write is one short `BEGIN IMMEDIATE` transaction,
  committed before the caller moves on, so a killed process loses nothing it had recorded.
- The schema is versioned (`migrations.py`); a database from a newer kernelwright is refused
  with exit 5 and what to do, never modified.
- A file that is not a SQLite database, or whose pages are damaged, is reported with its path and
  left exactly as it is: kernelwright never deletes, renames or recreates a user's memory.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from kernelwright.errors import EnvironmentProblem
from kernelwright.memory.migrations import BOOTSTRAP, MIGRATIONS, Migration
from kernelwright.memory.records import now

log = logging.getLogger(__name__)
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_S = 30.0
_KEEP = "kernelwright leaves the file as it is"


class MemoryStoreError(EnvironmentProblem):
    """The memory database cannot be used (locked, unwritable, not ours)."""

    title = "memory database"


class MemoryCorrupt(MemoryStoreError):
    """The file is not a SQLite database, or SQLite found it damaged."""


class MemorySchemaTooNew(MemoryStoreError):
    """The database was written by a newer kernelwright than this one."""


def _corrupt(path: Path, detail: str) -> MemoryCorrupt:
    return MemoryCorrupt(
        f"{path} is not a usable SQLite database ({detail}); {_KEEP}",
        hint="move it aside to start a new memory (or restore a `kernelwright memory export` file with "
        "`memory import`); `--no-memory` runs without it",
    )


class MemoryStore:
    """One connection to the memory database. LangGraph may run nodes on worker threads, so the
    connection is shared across threads and every call holds a lock."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn
        self._lock = threading.RLock()

    @classmethod
    def open(
        cls, path: Path, *, migrations: Sequence[Migration] = MIGRATIONS, busy_timeout_s: float = BUSY_TIMEOUT_S
    ) -> MemoryStore:
        """Open (creating it when missing) and migrate the database at `path`."""
        path = Path(path).expanduser()
        if path.exists() and not path.is_file():
            raise MemoryStoreError(
                f"{path} is not a file", hint="set memory_db (KERNELWRIGHT_MEMORY_DB) to a file path"
            )
        _check_header(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise MemoryStoreError(f"cannot open {path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        store = cls(path, conn)
        try:
            with store.guard():
                conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
                conn.execute("PRAGMA schema_version").fetchone()  # reads page 1: fails on a damaged file
                _enable_wal(conn, path, busy_timeout_s)
            store._migrate(migrations)
        except BaseException:
            conn.close()
            raise
        return store

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """SQLite's exceptions as MemoryStoreErrors naming the file and what to do."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise MemoryStoreError(
                    f"{self.path} stayed locked by another process for too long ({text})",
                    hint="another kernelwright may be importing or forgetting a lot at once; try again",
                ) from exc
            if "malformed" in text or "not a database" in text:
                raise _corrupt(self.path, text) from exc
            raise MemoryStoreError(f"{self.path}: {text}") from exc
        except sqlite3.DatabaseError as exc:  # damaged pages, not a database
            raise _corrupt(self.path, str(exc)) from exc

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock, self.guard():
            return list(self._conn.execute(sql, params).fetchall())

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken up front (BEGIN IMMEDIATE: writers queue on the busy
        timeout instead of failing half-way) and committed on exit."""
        with self._lock, self.guard():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @property
    def version(self) -> int:
        row = self.query("SELECT MAX(version) AS v FROM schema_migrations")[0]
        return int(row["v"] or 0)

    def _migrate(self, migrations: Sequence[Migration]) -> None:
        known = max((m.version for m in migrations), default=0)
        with self.write() as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "schema_migrations" not in tables:
                raise MemoryStoreError(
                    f"{self.path} is a SQLite database but not kernelwright's memory "
                    f"(its tables: {', '.join(sorted(tables)[:6])}); {_KEEP}",
                    hint="point memory_db (KERNELWRIGHT_MEMORY_DB) at another file",
                )
            conn.execute(BOOTSTRAP)
            current = int(conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] or 0)
            if current > known:
                raise MemorySchemaTooNew(
                    f"{self.path} has memory schema version {current}; this kernelwright knows versions up to "
                    f"{known}; {_KEEP}",
                    hint="upgrade kernelwright, or point memory_db (KERNELWRIGHT_MEMORY_DB) at another file",
                )
            for migration in sorted(migrations, key=lambda m: m.version):
                if migration.version <= current:
                    continue
                for statement in migration.statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.description, now()),
                )
                log.debug("memory %s: applied migration %d (%s)", self.path, migration.version, migration.description)

    def meta(self, key: str) -> str | None:
        rows = self.query("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0]["value"]) if rows else None


def _enable_wal(conn: sqlite3.Connection, path: Path, timeout_s: float) -> None:
    """Switch the file to WAL (once; it persists). SQLite answers "locked" at once, without its
    busy handler, when another process switches or creates the same file at that moment (batch
    workers starting together on a new memory), so this waits and retries itself."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
                return
            mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
            if mode != "wal":
                log.warning("memory %s: SQLite kept journal mode %r (no WAL on this filesystem?)", path, mode)
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def _check_header(path: Path) -> None:
    """A non-empty file that does not start with SQLite's header is never opened (opening it in
    WAL mode could write beside it)."""
    if not path.is_file():
        return
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise MemoryStoreError(f"cannot read {path}: {exc}") from exc
    if head and head != SQLITE_HEADER:
        raise _corrupt(path, "it does not start with the SQLite header")
