"""A batch worker for tests/batch/test_pool.py: `serve` with a handler that answers each stub of a
task, or dies halfway through when the task says so (what a crashing worker looks like)."""

from __future__ import annotations

import os
from typing import Any

from kernelwright.batch.pool import Emit, serve
from kernelwright.batch.results import BatchRecord
from kernelwright.batch.spec import Slot


def handle(init: dict[str, Any], slot: Slot, task: dict[str, Any], emit: Emit) -> None:
    for n, stub in enumerate(task["stubs"].values()):
        if task.get("die") and n == 1:
            os._exit(3)
        record = BatchRecord.model_validate(stub).model_copy(update={"verdict": "correct", "worker": slot.label})
        emit({"type": "result", "record": record.model_dump(mode="json")})


if __name__ == "__main__":
    serve(handle)
