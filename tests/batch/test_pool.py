"""The local worker pool with fake workers (no harness): a worker that dies mid-task leaves a
retried (not final) line for each result it owed, is replaced for the next tasks, and once a slot
has died too often the tasks left are reported rather than dropped. A worker that looks ahead is
sent the next task as it starts one; a task it held ahead when it died goes back to the queue and
is judged by its replacement, never reported.

This module is also that looking-ahead worker: `python -m tests.batch.test_pool`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kernelwright.batch.engine import Collector
from kernelwright.batch.pool import Backlog, Emit, Handler, LocalPool, serve
from kernelwright.batch.results import BatchRecord, ResultsFile, latest, read_records
from kernelwright.batch.spec import Slot

ROOT = Path(__file__).resolve().parents[2]


def _task(number: int, die: bool = False) -> dict[str, object]:
    stubs = {
        f"p{number}::{k}": BatchRecord(kind="candidate", key=f"p{number}::{k}", problem=f"p{number}").model_dump(
            mode="json"
        )
        for k in ("a", "b")
    }
    return {"id": number, "stubs": stubs, "die": die}


def test_dead_workers_are_replaced_and_what_they_owed_is_retried(tmp_path: Path) -> None:
    results = ResultsFile(tmp_path)
    events: list[object] = []
    collector = Collector(tmp_path, results, events.append, to_do=10)
    slot = Slot(index=0, label="cpu0")
    pool = LocalPool("tests.batch.fake_worker", [slot], {}, tmp_path / "logs", env={"PYTHONPATH": str(ROOT)})
    # die (restart 1), ok, die (restart 2), die (restart 3: the slot gives up), ok (never runs)
    pool.run([_task(0, die=True), _task(1), _task(2, die=True), _task(3, die=True), _task(4)], collector)
    last = latest(results.read())
    assert len(last) == 10
    assert last["p0::a"].verdict == "correct" and last["p0::a"].final
    assert (last["p0::b"].reason, last["p0::b"].final, last["p0::b"].exit_code) == ("worker_died", False, 70)
    assert "worker exited (3)" in last["p0::b"].message
    assert all(last[f"p1::{k}"].verdict == "correct" for k in "ab")
    assert not last["p4::a"].final and "no worker left" in last["p4::a"].message
    assert (tmp_path / "logs" / "worker-cpu0.log").is_file()
    assert collector.done == 10 and collector.correct == 5


def looking_ahead(backlog: Backlog) -> Handler:
    """Answers each stub of a task, saying which task it holds next; dies halfway when told."""

    def handle(init: dict[str, Any], slot: Slot, task: dict[str, Any], emit: Emit) -> None:
        upcoming = backlog.after(task["id"])
        for n, stub in enumerate(task["stubs"].values()):
            if task.get("die") and n == 1:
                os._exit(3)
            update = {"verdict": "correct", "worker": slot.label, "message": f"next: {upcoming and upcoming['id']}"}
            record = BatchRecord.model_validate(stub).model_copy(update=update)
            emit({"type": "result", "record": record.model_dump(mode="json")})

    return handle


def test_a_task_held_ahead_by_a_worker_that_dies_is_judged_by_its_replacement(tmp_path: Path) -> None:
    results = ResultsFile(tmp_path)
    collector = Collector(tmp_path, results, lambda event: None, to_do=8)
    slot = Slot(index=0, label="cpu0")
    pool = LocalPool("tests.batch.test_pool", [slot], {}, tmp_path / "logs", env={"PYTHONPATH": str(ROOT)})
    # task 0 holds 1 ahead; 1 holds 2 ahead and dies; the replacement runs 3 (holding 2), then 2
    pool.run([_task(0), _task(1, die=True), _task(2), _task(3)], collector)
    lines = read_records(results.path)
    last = latest(lines)
    assert len(last) == 8 and collector.done == 8
    assert {last[f"p0::{k}"].message for k in "ab"} == {"next: 1"}
    assert last["p1::a"].verdict == "correct"
    assert (last["p1::b"].reason, last["p1::b"].final) == ("worker_died", False)
    assert {last[f"p3::{k}"].message for k in "ab"} == {"next: 2"}
    assert {last[f"p2::{k}"].message for k in "ab"} == {"next: None"}  # the last: nothing left to hold
    assert [r.key for r in lines if r.key.startswith("p2")] == ["p2::a", "p2::b"]  # judged once, never failed


if __name__ == "__main__":
    backlog = Backlog()
    serve(looking_ahead(backlog), lookahead=backlog)


def test_a_workers_status_lines_carry_the_name_it_gave_itself(tmp_path: Path) -> None:
    """A Ray actor names its node and GPU (Ray chose the GPU); the driver's slot only numbers it:
    the status lines must name the same worker as its results do."""
    events: list[object] = []
    collector = Collector(tmp_path, ResultsFile(tmp_path), events.append, to_do=1)
    slot = Slot(index=1, label="ray1")
    collector(slot, {"type": "ready", "worker": "ray:ab12cd34:gpu0"})
    collector(slot, {"type": "status", "problem": "level1/2_gelu", "text": "drawing trials"})
    assert [getattr(e, "worker", None) for e in events] == ["ray:ab12cd34:gpu0", "ray:ab12cd34:gpu0"]
