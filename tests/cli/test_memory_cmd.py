"""`kernelwright memory list|show|search|export|import|forget`: output, exit codes, the export →
import round trip, and the database's own failures (corrupt, newer) reported with exit 5."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.config import load_settings
from kernelwright.memory import KnowledgeBase, current_machine
from kernelwright.problems import resolve_problem
from tests.agent.helpers import run_cli
from tests.memory.helpers import RELU, entry, fixture_db


def _db() -> Path:
    path = load_settings().memory_db
    assert path is not None
    return path


@pytest.fixture()
def filled() -> Path:
    fixture_db(_db()).close()
    return _db()


def test_reading_commands_on_no_database_create_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["memory", "list"]) == 0
    assert "no memory database at" in capsys.readouterr().err
    assert run_cli(["memory", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert run_cli(["memory", "show", "c1"]) == 2
    assert not _db().exists()


def test_list_filters_and_json(filled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["memory", "list"]) == 0
    out = capsys.readouterr().out
    assert f"memory {filled}: 9 candidate(s), 15 lesson(s)" in out
    assert "level1/1_relu" in out and "1.80x compile" in out and "rejected (torch_fallback)" in out
    assert run_cli(["memory", "list", "--problem", "relu", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 7 and {r["problem"] for r in rows} == {"level1/1_relu"} and "source" not in rows[0]
    assert run_cli(["memory", "list", "--verdict", "rejected", "--machine", "hopper", "--json"]) == 0
    assert [r["reason"] for r in json.loads(capsys.readouterr().out)] == ["torch_fallback"] * 2
    assert run_cli(["memory", "list", "--lessons"]) == 0
    assert "seed" in capsys.readouterr().out


def test_show_a_candidate_and_a_lesson(filled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["memory", "show", "c2"]) == 0
    out = capsys.readouterr().out
    assert "plan: float4 + grid-stride" in out and "lesson: one pass with float4 is the whole game" in out
    assert "class ModelNew: pass" in out and "1.80x vs compile" in out
    assert run_cli(["memory", "show", "l1", "--json"]) == 0
    lesson = json.loads(capsys.readouterr().out)
    assert lesson["origin"] == "seed" and lesson["source"]
    assert run_cli(["memory", "show", "c999"]) == 2
    assert "no memory entry 'c999'" in capsys.readouterr().err


def test_search_by_words_and_the_planners_recall(filled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["memory", "search", "float4", "one"]) == 0
    out = capsys.readouterr().out
    assert "c2" in out and "vectorized float4 loads" not in out  # every word must appear
    assert run_cli(["memory", "search", "TF32", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["candidates"] == [] and any("TF32" in lesson["text"] for lesson in found["lessons"])
    assert run_cli(["memory", "search"]) == 2
    assert "give words to search for, or --for PROBLEM" in capsys.readouterr().err

    with KnowledgeBase.open(filled) as kb:  # the real relu problem on this very machine
        real = kb.problem_key(resolve_problem("relu"))
        here = current_machine("cpu")
        kb.record(entry(real, here, speed=1.7, backend="cpp", plan="one OpenMP pass", lesson="remember me"))
    assert run_cli(["memory", "search", "--for", "relu", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "what the planner would recall for level1/1_relu" in out and "Same problem, this machine:" in out
    assert "remember me" in out and "why: same problem (level1/1_relu) on this machine" in out
    assert "a new run would start from c10 (correct, 1.70x vs compile" in out


def test_export_then_import_round_trip(filled: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    dump = tmp_path / "team" / "memory.jsonl"
    assert run_cli(["memory", "export", str(dump)]) == 0
    assert "exported 9 candidate(s), 0 lesson(s), 3 problem signature(s)" in capsys.readouterr().err
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    assert lines[0]["kind"] == "header" and lines[0]["format"] == "kernelwright-memory"
    assert [x["kind"] for x in lines[1:]].count("candidate") == 9

    assert run_cli(["memory", "export", "--problem", "leaky_relu"]) == 0  # to stdout: JSON lines only
    only = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [x["kind"] for x in only] == ["header", "problem", "candidate"]

    monkeypatch.setenv("KERNELWRIGHT_MEMORY_DB", str(tmp_path / "colleague.sqlite"))
    assert run_cli(["memory", "import", str(dump)]) == 0
    assert "9 candidate(s) added, 0 updated, 0 already known" in capsys.readouterr().out
    assert run_cli(["memory", "import", str(dump)]) == 0  # twice: nothing counted twice
    assert "0 candidate(s) added, 0 updated, 9 already known" in capsys.readouterr().out
    with KnowledgeBase.open(filled) as mine, KnowledgeBase.open(tmp_path / "colleague.sqlite") as theirs:
        skip = {"id", "origin"}
        ours = sorted((c.model_dump(exclude=skip) for c in mine.all_candidates()), key=lambda c: c["uid"])
        got = sorted((c.model_dump(exclude=skip) for c in theirs.all_candidates()), key=lambda c: c["uid"])
        assert ours == got and {c.origin for c in theirs.all_candidates()} == {"import"}
        used = {c.problem_sha256 for c in mine.all_candidates()}  # signatures travel with their candidates
        assert theirs.signatures() == {sha: k for sha, k in mine.signatures().items() if sha in used}
        assert [i.text for i in theirs.recall(_query()).items] == [i.text for i in mine.recall(_query()).items]


def _query():  # type: ignore[no-untyped-def]
    from kernelwright.memory import RecallQuery
    from tests.memory.helpers import H100

    return RecallQuery(problem=RELU, machine=H100, backend="cuda", budget_tokens=3000)


def test_import_refuses_a_bad_file_whole(filled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "memory.jsonl"
    assert run_cli(["memory", "export", str(dump)]) == 0
    lines = dump.read_text().splitlines()
    lines[3] = lines[3][:40]  # a torn line
    lines[5] = json.dumps({**json.loads(lines[5]), "verdict": 7})
    dump.write_text("\n".join(lines) + "\n")
    with KnowledgeBase.open(filled) as kb:
        kb.forget(kb.candidates())
    capsys.readouterr()
    assert run_cli(["memory", "import", str(dump)]) == 2
    err = capsys.readouterr().err
    assert "2 malformed line(s), nothing imported: line 4:" in err and "line 6:" in err
    with KnowledgeBase.open(filled) as kb:
        assert kb.candidates() == []
    other = tmp_path / "notes.jsonl"
    other.write_text('{"hello": 1}\n')
    assert run_cli(["memory", "import", str(other)]) == 2
    assert "is not a kernelwright memory export" in capsys.readouterr().err
    assert run_cli(["memory", "import", str(tmp_path / "missing.jsonl")]) == 2


def test_forget(filled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["memory", "forget"]) == 2
    assert run_cli(["memory", "forget", "c1", "c999"]) == 2  # one unknown id: nothing forgotten
    assert run_cli(["memory", "show", "c1"]) == 0
    capsys.readouterr()
    assert run_cli(["memory", "forget", "c1"]) == 0
    assert "forgot 1 entry" in capsys.readouterr().out
    assert run_cli(["memory", "show", "c1"]) == 2
    assert run_cli(["memory", "forget", "--problem", "relu"]) == 2
    assert "that selects 6 candidate(s); add --yes" in capsys.readouterr().err
    assert run_cli(["memory", "forget", "--problem", "relu", "--yes"]) == 0
    assert "forgot 6 entries" in capsys.readouterr().out
    with KnowledgeBase.open(filled) as kb:
        assert {c.problem for c in kb.candidates()} == {"level1/6_leaky_relu", "level1/15_matmul_square"}


def test_a_corrupt_database_is_exit_5_and_left_alone(capsys: pytest.CaptureFixture[str]) -> None:
    path = _db()
    path.write_bytes(b"not sqlite at all\x00" * 100)
    before = path.read_bytes()
    for argv in (["memory", "list"], ["memory", "import", str(path)], ["memory", "forget", "c1"]):
        assert run_cli(argv) == 5, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"memory database: {path} is not a usable SQLite database") and "\n" not in err
    assert path.read_bytes() == before


def test_a_newer_database_is_exit_5_with_what_to_do(filled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with KnowledgeBase.open(filled) as kb, kb.store.write() as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (42, 'future', '2031-01-01')")
    assert run_cli(["memory", "list"]) == 5
    err = capsys.readouterr().err
    assert "has memory schema version 42" in err and "(upgrade kernelwright" in err


def test_help_texts(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["memory", "--help"]) == 0
    out = capsys.readouterr().out
    for command in ("list", "show", "search", "export", "import", "forget"):
        assert command in out
    assert run_cli(["optimize", "--help"]) == 0
    assert "--no-memory" in capsys.readouterr().out


def test_optimize_on_a_corrupt_memory_stops_before_any_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _db()
    path.write_text("garbage " * 100)
    assert run_cli(["optimize", "relu", "--device", "cpu", "--scripted", "relu-cpu", "--size", "small"]) == 5
    err = capsys.readouterr().err
    assert f"memory database: {path} is not a usable SQLite database" in err and "`--no-memory` runs without it" in err
    assert path.read_text() == "garbage " * 100
    assert not any((tmp_path / "runs").glob("*/candidates"))  # nothing was evaluated
