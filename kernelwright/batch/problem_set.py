"""The problems of a batch: built-in levels, folders, KernelBench checkouts, list files, single
files and built-in names, filtered by level and id. A malformed problem file is reported and
left out; the rest goes on (an unknown name is a usage error up front)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelwright.errors import ProblemError, UsageError
from kernelwright.problems import BUILTIN_SUITE, Problem, load_folder, load_problem_file, resolve_problem

LIST_SUFFIXES = (".txt", ".lst")
_LEVEL_REF = re.compile(r"^level[_-]?(\d+)$", re.IGNORECASE)


@dataclass
class ProblemSet:
    problems: list[Problem] = field(default_factory=list)
    errors: list[ProblemError] = field(default_factory=list)

    def add(self, other: ProblemSet) -> None:
        self.problems += other.problems
        self.errors += other.errors


def parse_ids(text: str) -> set[int]:
    """`1-20,25` -> {1, ..., 20, 25}."""
    ids: set[int] = set()
    for part in (p.strip() for p in text.split(",") if p.strip()):
        lo, sep, hi = part.partition("-")
        try:
            ids.update(range(int(lo), int(hi) + 1) if sep else {int(lo)})
        except ValueError:
            raise UsageError(f"--ids: {part!r} is not an id or a range like 1-20") from None
    return ids


def _one(ref: str, seen_lists: set[Path]) -> ProblemSet:
    path = Path(ref)
    if path.is_dir():
        report = load_folder(path)
        return ProblemSet(report.problems, report.errors)
    if path.is_file() and path.suffix in LIST_SUFFIXES:
        return _list_file(path, seen_lists)
    if path.suffix == ".py" or path.exists():
        try:
            return ProblemSet([load_problem_file(path)])
        except ProblemError as exc:
            return ProblemSet(errors=[exc])
    if ref.lower() in ("builtin", "all"):
        report = load_folder(BUILTIN_SUITE, builtin=True)
        return ProblemSet(report.problems, report.errors)
    match = _LEVEL_REF.match(ref)
    if match:
        folder = BUILTIN_SUITE / f"level{int(match.group(1))}"
        if not folder.is_dir():
            raise UsageError(f"the built-in suite has no {ref}")
        report = load_folder(folder, builtin=True)
        return ProblemSet(report.problems, report.errors)
    return ProblemSet([resolve_problem(ref)])


def _list_file(path: Path, seen_lists: set[Path]) -> ProblemSet:
    """One reference per line (`#` starts a comment); relative paths are relative to the list file."""
    resolved = path.resolve()
    if resolved in seen_lists:
        raise UsageError(f"list file {path} includes itself")
    seen_lists.add(resolved)
    found = ProblemSet()
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        relative = path.parent / line
        found.add(_one(str(relative) if relative.exists() else line, seen_lists))
    return found


def resolve_problem_set(refs: list[str], *, level: int | None = None, ids: set[int] | None = None) -> ProblemSet:
    """Every problem named by `refs`, once each, in level and id order."""
    if not refs:
        raise UsageError("name at least one problem set", hint="e.g. level1, a folder, a KernelBench checkout")
    found = ProblemSet()
    seen_lists: set[Path] = set()
    for ref in refs:
        found.add(_one(ref, seen_lists))
    by_name: dict[str, Problem] = {}
    for problem in found.problems:
        if level is not None and problem.level != level:
            continue
        if ids is not None and problem.id not in ids:
            continue
        other = by_name.get(problem.qualified)
        if other is not None and other.path != problem.path:
            raise UsageError(
                f"two problems are both {problem.qualified}: {other.path} and {problem.path}",
                hint="a batch matches candidates by level and id, so names must be unique",
            )
        by_name[problem.qualified] = problem
    problems = sorted(by_name.values(), key=lambda p: (p.level or 0, p.id if p.id is not None else 1 << 30, p.stem))
    if not problems and not found.errors:
        raise UsageError("the problem set is empty", hint="check the folder, --level and --ids")
    return ProblemSet(problems, found.errors)
