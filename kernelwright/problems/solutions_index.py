"""The bundled oracle solutions: known-correct and known-wrong candidates with expected verdicts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

SOLUTIONS = Path(__file__).parent / "solutions"


@dataclass(frozen=True)
class BundledSolution:
    problem: str
    path: Path
    backend: str
    expected: str
    reason: str | None
    note: str


def all_solutions() -> list[BundledSolution]:
    manifest = SOLUTIONS / "manifest.json"
    if not manifest.is_file():
        return []
    entries = json.loads(manifest.read_text())
    return [
        BundledSolution(
            e["problem"], SOLUTIONS / e["file"], e["backend"], e["expected"], e.get("reason"), e.get("note", "")
        )
        for e in entries
    ]


def bundled_solutions(problem_name: str) -> list[BundledSolution]:
    return [s for s in all_solutions() if s.problem.lower() == problem_name.lower()]
