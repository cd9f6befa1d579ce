"""The memory database file: migrations in order and atomically, a newer schema refused clearly, a
corrupt or foreign file reported and never replaced, several processes writing at once without
losing a row, and the seed lessons."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelwright.errors import ExitCode
from kernelwright.memory import KnowledgeBase, MemoryCorrupt, MemorySchemaTooNew, MemoryStore, MemoryStoreError
from kernelwright.memory.migrations import MIGRATIONS, SCHEMA_VERSION, Migration
from kernelwright.memory.seed import load_seed
from tests.memory.helpers import H100, RELU, entry

REPO = Path(__file__).resolve().parents[2]


def _siblings(path: Path) -> set[str]:
    return {p.name for p in path.parent.iterdir()}


def test_a_new_database_is_migrated_to_the_latest_schema_in_wal_mode(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "deep" / "memory.sqlite") as kb:
        assert kb.store.version == SCHEMA_VERSION
        assert kb.store.query("PRAGMA journal_mode")[0][0] == "wal"
        applied = [tuple(r) for r in kb.store.query("SELECT version, description FROM schema_migrations ORDER BY 1")]
        assert applied == [(m.version, m.description) for m in MIGRATIONS]


def test_an_older_database_is_migrated_in_order_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    with MemoryStore.open(path, migrations=MIGRATIONS[:1]) as old, old.write() as conn:  # "version 1 of the code"
        conn.execute(
            "INSERT INTO problems VALUES (?, ?, ?, ?)", (RELU.sha256, RELU.name, RELU.signature.model_dump_json(), "t")
        )
    with KnowledgeBase.open(path) as kb:
        assert kb.store.version == SCHEMA_VERSION
        assert kb.signatures()[RELU.sha256].signature == RELU.signature
        indexes = {r["name"] for r in kb.store.query("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"candidates_problem", "candidates_arch", "candidates_run"} <= indexes
    with pytest.raises(MemorySchemaTooNew, match="schema version 2; this kernelwright knows versions up to 1"):
        MemoryStore.open(path, migrations=MIGRATIONS[:1])  # the old code, after the upgrade: refused


def test_a_failing_migration_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    KnowledgeBase.open(path).close()
    broken = (*MIGRATIONS, Migration(SCHEMA_VERSION + 1, "broken", ("CREATE TABLE extra (a)", "THIS IS NOT SQL")))
    with pytest.raises(MemoryStoreError, match="syntax error"):
        MemoryStore.open(path, migrations=broken)
    with MemoryStore.open(path) as store:
        assert store.version == SCHEMA_VERSION
        assert not store.query("SELECT name FROM sqlite_master WHERE name = 'extra'")


def test_a_database_from_a_newer_kernelwright_is_refused_clearly_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    with KnowledgeBase.open(path) as kb, kb.store.write() as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (99, 'from the future', '2030-01-01')")
    before = path.read_bytes()
    with pytest.raises(MemorySchemaTooNew) as raised:
        KnowledgeBase.open(path)
    error = raised.value
    assert error.exit_code == ExitCode.ENVIRONMENT
    assert f"{path} has memory schema version 99" in error.message
    assert f"knows versions up to {SCHEMA_VERSION}" in error.message and "upgrade kernelwright" in (error.hint or "")
    assert path.read_bytes() == before


def test_a_file_that_is_not_a_database_is_reported_and_never_touched(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    path.write_text("these are my notes, not a database\n" * 50)
    before, siblings = path.read_bytes(), _siblings(path)
    with pytest.raises(MemoryCorrupt) as raised:
        KnowledgeBase.open(path)
    assert raised.value.exit_code == ExitCode.ENVIRONMENT
    assert str(path) in raised.value.message and "leaves the file as it is" in raised.value.message
    assert "move it aside" in (raised.value.hint or "")
    assert path.read_bytes() == before and _siblings(path) == siblings  # no -wal, no -shm, no replacement


def test_a_damaged_database_is_reported_and_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    with KnowledgeBase.open(path) as kb:
        kb.record(entry(RELU, H100))
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # page 1's b-tree (the schema) is garbage; the header is intact
    path.write_bytes(bytes(data))
    before = path.read_bytes()
    with pytest.raises(MemoryCorrupt, match="not a usable SQLite database"):
        KnowledgeBase.open(path)
    assert path.read_bytes() == before


def test_a_sqlite_file_that_is_not_our_memory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE checkpoints (id INTEGER)")
    conn.close()
    with pytest.raises(MemoryStoreError, match="not kernelwright's memory \\(its tables: checkpoints\\)"):
        KnowledgeBase.open(path)
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["checkpoints"]
    conn.close()


_WRITER = """
import sys, time
from pathlib import Path
from kernelwright.memory import KnowledgeBase
from tests.memory.helpers import H100, RELU, entry

path, worker, count, go = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
while not go.exists():
    time.sleep(0.005)
with KnowledgeBase.open(path) as kb:  # every worker creates/migrates/seeds the same new file at once
    for i in range(count):
        kb.record(entry(RELU, H100, run_id=f"worker-{worker}", index=i))
        kb.annotate(f"worker-{worker}", [i], lesson=f"lesson {worker}.{i}")
"""


def test_parallel_writers_lose_no_rows(tmp_path: Path) -> None:
    path, go = tmp_path / "shared" / "memory.sqlite", tmp_path / "go"
    workers, count = 4, 25
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), str(w), str(count), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    time.sleep(0.5)  # let them import, then start them together
    go.touch()
    for proc in procs:
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
    with KnowledgeBase.open(path) as kb:
        rows = kb.candidates()
        assert len(rows) == workers * count
        assert {(r.run_id, r.index) for r in rows} == {(f"worker-{w}", i) for w in range(workers) for i in range(count)}
        assert all(r.lesson == f"lesson {r.run_id.split('-')[1]}.{r.index}" for r in rows)
        assert len(kb.lessons()) == len(load_seed()[1])  # seeded once, not once per worker
        assert kb.store.version == SCHEMA_VERSION


def test_seed_lessons_are_added_once_and_a_forgotten_one_stays_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    version, seed = load_seed()
    assert seed and all(lesson.source for lesson in seed) and len({lesson.uid for lesson in seed}) == len(seed)
    with KnowledgeBase.open(path) as kb:
        assert len(kb.lessons()) == len(seed)
        assert kb.forget([kb.entry(kb.lessons()[0].label)]) == 1
        with kb.store.write() as conn:  # as if a newer package shipped more seed lessons
            conn.execute("UPDATE meta SET value = '0' WHERE key = 'seed_version'")
    with KnowledgeBase.open(path) as kb:
        assert len(kb.lessons()) == len(seed) - 1
        assert kb.store.meta("seed_version") == str(version)
