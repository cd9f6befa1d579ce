"""The memory database's schema, as an ordered list of migrations.

A database records every migration applied to it (`schema_migrations`); opening it applies the
missing ones, in order, in one transaction. A database whose newest migration is beyond this
list was written by a newer kernelwright and is refused, never "downgraded". To change the
schema, append a migration; never edit one that has shipped.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


BOOTSTRAP = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "problems, candidates, lessons, forgotten uids, meta",
        (
            "CREATE TABLE problems ("
            " sha256 TEXT PRIMARY KEY, name TEXT NOT NULL, signature TEXT NOT NULL, updated_at TEXT NOT NULL)",
            "CREATE TABLE candidates ("
            " id INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE,"
            " run_id TEXT NOT NULL, cand_index INTEGER NOT NULL, round INTEGER NOT NULL,"
            " problem TEXT NOT NULL, problem_sha256 TEXT NOT NULL,"
            " backend TEXT NOT NULL, device TEXT NOT NULL, machine TEXT NOT NULL, arch TEXT NOT NULL,"
            " source TEXT NOT NULL, source_sha256 TEXT NOT NULL,"
            " verdict TEXT NOT NULL, reason TEXT, error_class TEXT, message TEXT NOT NULL,"
            " eager_ratio REAL, eager_ci_low REAL, eager_ci_high REAL,"
            " compile_ratio REAL, compile_ci_low REAL, compile_ci_high REAL,"
            " score REAL NOT NULL DEFAULT 0,"
            " digest TEXT NOT NULL DEFAULT '', plan TEXT NOT NULL DEFAULT '', lesson TEXT NOT NULL DEFAULT '',"
            " scripted TEXT, origin TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
            "CREATE TABLE lessons ("
            " id INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE, text TEXT NOT NULL, source TEXT NOT NULL,"
            " url TEXT, device TEXT, arch TEXT, ops TEXT NOT NULL, origin TEXT NOT NULL, created_at TEXT NOT NULL)",
            "CREATE TABLE forgotten (uid TEXT PRIMARY KEY, forgotten_at TEXT NOT NULL)",
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ),
    ),
    Migration(
        2,
        "indexes for retrieval (problem, machine, architecture) and for a run's candidates",
        (
            "CREATE INDEX candidates_problem ON candidates (problem_sha256, machine)",
            "CREATE INDEX candidates_arch ON candidates (device, arch)",
            "CREATE INDEX candidates_run ON candidates (run_id, cand_index)",
        ),
    ),
)

SCHEMA_VERSION = MIGRATIONS[-1].version
