"""The local worker pool with a fake worker (no harness): a worker that dies mid-task leaves a
retried (not final) line for each result it owed, is replaced for the next tasks, and once a slot
has died too often the tasks left are reported rather than dropped."""

from __future__ import annotations

from pathlib import Path

from kernelwright.tools.batch.engine import Collector
from kernelwright.tools.batch.pool import LocalPool
from kernelwright.tools.batch.results import BatchRecord, ResultsFile, latest
from kernelwright.tools.batch.spec import Slot

ROOT = Path(__file__).resolve().parent.parent


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
    pool = LocalPool("tests.batch_fake_worker", [slot], {}, tmp_path / "logs", env={"PYTHONPATH": str(ROOT)})
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
