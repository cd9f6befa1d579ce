"""Candidates on disk, matched to the problems of a batch by KernelBench level and id, or by name.

Accepted layouts (paths relative to `--candidates DIR`, case-insensitive; `_` or `-` may stand
between a word and its number, or nothing):

| layout | example | matched by |
|---|---|---|
| KernelBench generations | `level_1/problem_19/sample_0.py` (also `level1/problem_19/0.py`) | level, id; sample K |
| KernelBench run folder (flat) | `level_1_problem_19_sample_0_kernel.py` (`_kernel` optional) | level, id; sample K |
| problem folders, no level | `problem_19/sample_0.py` (level from an enclosing `levelN/` if any) | id; sample K |
| one file per problem | `19_ReLU.py`, `relu.py`, `19.py`, optionally under `levelN/` | stem, name or id |

A file that fits none of them, or names a problem that is not in the set (or more than one), is
reported as unmatched and skipped. Files and folders starting with `_` or `.` are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelwright.errors import UsageError
from kernelwright.problems import Problem

_GENERATIONS = re.compile(r"(?:^|/)level[_-]?(\d+)/problem[_-]?(\d+)/(?:sample[_-]?)?(\d+)\.py$", re.IGNORECASE)
_FLAT_RUN = re.compile(r"(?:^|/)level[_-]?(\d+)_problem[_-]?(\d+)_sample[_-]?(\d+)(?:_kernel)?\.py$", re.IGNORECASE)
_NO_LEVEL = re.compile(r"(?:^|/)problem[_-]?(\d+)/(?:sample[_-]?)?(\d+)\.py$", re.IGNORECASE)
_LEVEL_DIR = re.compile(r"(?:^|/)level[_-]?(\d+)/", re.IGNORECASE)


@dataclass(frozen=True)
class CandidateFile:
    path: Path
    rel: str
    level: int | None = None
    problem_id: int | None = None
    stem: str | None = None  # one file per problem: the file's stem
    sample: int | None = None

    def describe(self) -> str:
        if self.problem_id is not None:
            where = f"level {self.level} " if self.level is not None else ""
            return f"{where}problem id {self.problem_id}"
        return f"problem {self.stem!r}" + (f" in level {self.level}" if self.level is not None else "")


@dataclass
class Matched:
    """Candidates per problem (by qualified name, in sample order) and what matched nothing."""

    by_problem: dict[str, list[CandidateFile]] = field(default_factory=dict)
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (relative path, why)

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.by_problem.values())


def parse_candidate(path: Path, root: Path) -> CandidateFile | None:
    rel = path.relative_to(root).as_posix()
    for pattern in (_GENERATIONS, _FLAT_RUN):
        m = pattern.search(rel)
        if m:
            return CandidateFile(path, rel, int(m.group(1)), int(m.group(2)), sample=int(m.group(3)))
    level_dir = _LEVEL_DIR.search(rel)
    level = int(level_dir.group(1)) if level_dir else None
    m = _NO_LEVEL.search(rel)
    if m:
        return CandidateFile(path, rel, level, int(m.group(1)), sample=int(m.group(2)))
    if "/" in rel and level_dir is None:
        return None  # a file in some other folder structure: not guessed at
    return CandidateFile(path, rel, level, stem=path.stem)


def find_candidates(root: Path) -> tuple[list[CandidateFile], list[tuple[str, str]]]:
    if not root.is_dir():
        raise UsageError(f"--candidates {root}: not a folder")
    found: list[CandidateFile] = []
    unknown: list[tuple[str, str]] = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(part.startswith(("_", ".")) for part in parts):
            continue
        parsed = parse_candidate(path, root)
        if parsed is None:
            unknown.append((path.relative_to(root).as_posix(), "fits no known layout"))
        else:
            found.append(parsed)
    return found, unknown


def _hits(candidate: CandidateFile, problems: list[Problem]) -> list[Problem]:
    pool = [p for p in problems if candidate.level is None or p.level == candidate.level]
    if candidate.problem_id is not None:
        return [p for p in pool if p.id == candidate.problem_id]
    stem = (candidate.stem or "").lower()
    for rule in (
        lambda p: p.stem.lower() == stem,
        lambda p: p.name.lower() == stem,
        lambda p: stem.isdigit() and p.id == int(stem),
    ):
        hits = [p for p in pool if rule(p)]
        if hits:
            return hits
    return []


def match_candidates(problems: list[Problem], root: Path) -> Matched:
    files, unknown = find_candidates(root)
    matched = Matched(unmatched=unknown)
    for candidate in files:
        hits = _hits(candidate, problems)
        if len(hits) == 1:
            matched.by_problem.setdefault(hits[0].qualified, []).append(candidate)
        elif not hits:
            matched.unmatched.append((candidate.rel, f"no {candidate.describe()} in the problem set"))
        else:
            names = ", ".join(p.qualified for p in hits)
            matched.unmatched.append((candidate.rel, f"{candidate.describe()} is ambiguous: {names}"))
    for files_of in matched.by_problem.values():
        files_of.sort(key=lambda c: (c.sample if c.sample is not None else -1, c.rel))
    return matched
