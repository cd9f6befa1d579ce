"""The general lessons that ship with kernelwright (`seed_lessons.json`), added to every memory
database so a first run on a new machine already knows the basics. Each lesson is written for
this project and names the source of its facts; the file's `version` goes up when lessons are
added, so an existing database picks the new ones up on its next open."""

from __future__ import annotations

import functools
import json
from importlib import resources

from pydantic import ValidationError

from kernelwright.errors import InternalError
from kernelwright.memory.records import LessonEntry

SEED_FILE = "seed_lessons.json"


@functools.cache
def load_seed() -> tuple[int, tuple[LessonEntry, ...]]:
    """(the seed file's version, its lessons). A broken packaged file is a bug: InternalError."""
    text = resources.files("kernelwright.memory").joinpath(SEED_FILE).read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
        lessons = tuple(
            LessonEntry.model_validate({**item, "origin": "seed", "created_at": doc["date"]}) for item in doc["lessons"]
        )
        return int(doc["version"]), lessons
    except (KeyError, TypeError, ValueError, ValidationError) as exc:
        raise InternalError(f"the packaged {SEED_FILE} is invalid: {exc}") from exc
