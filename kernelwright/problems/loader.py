"""Find and statically check problem files: one file, a folder, a KernelBench checkout, or the
built-in suite. Nothing here runs the problem's code (see `instance.py` for that)."""

from __future__ import annotations

import ast
import difflib
import hashlib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from kernelwright.errors import ProblemError, UsageError
from kernelwright.problems.model import Problem, ProblemMeta

log = logging.getLogger(__name__)

BUILTIN_SUITE = Path(__file__).parent / "suite"
_STEM = re.compile(r"^(\d+)_(.+)$")
_LEVEL_DIR = re.compile(r"^level(\d+)$")


@dataclass
class LoadReport:
    """What a folder load found: the good problems and, per bad file, why it was skipped."""

    problems: list[Problem] = field(default_factory=list)
    errors: list[ProblemError] = field(default_factory=list)


def _top_level_names(tree: ast.Module) -> tuple[set[str], set[str], dict[str, ast.expr]]:
    classes: set[str] = set()
    functions: set[str] = set()
    assigns: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes.add(node.name)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigns[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            assigns[node.target.id] = node.value
    return classes, functions, assigns


def _level_from_path(path: Path) -> int | None:
    match = _LEVEL_DIR.match(path.parent.name)
    return int(match.group(1)) if match else None


def load_problem_file(path: Path, *, builtin: bool = False) -> Problem:
    """Parse one problem file and check its shape; raise ProblemError naming the file and fault."""
    path = Path(path)
    if not path.is_file():
        raise ProblemError(f"{path}: no such file")
    if path.suffix != ".py":
        raise ProblemError(f"{path}: a problem file must be a Python file (.py)")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{path}: cannot read: {exc}") from exc
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ProblemError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from exc

    classes, functions, assigns = _top_level_names(tree)
    if "Model" not in classes:
        raise ProblemError(f"{path}: no top-level `class Model(nn.Module)`")
    if "get_inputs" not in functions:
        raise ProblemError(f"{path}: no top-level `def get_inputs()`")
    if "ModelNew" in classes and "Model" not in classes:
        raise ProblemError(f"{path}: this looks like a solution file (ModelNew), not a problem")

    meta_dict: dict = {}
    if "PROBLEM" in assigns:
        try:
            meta_dict = ast.literal_eval(assigns["PROBLEM"])
        except ValueError as exc:
            raise ProblemError(f"{path}: PROBLEM must be a literal dict: {exc}") from exc
        if not isinstance(meta_dict, dict):
            raise ProblemError(f"{path}: PROBLEM must be a dict")
    try:
        meta = ProblemMeta(**meta_dict)
    except ValidationError as exc:
        details = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ProblemError(f"{path}: bad PROBLEM dict: {details}") from exc

    stem = path.stem
    match = _STEM.match(stem)
    pid, name = (int(match.group(1)), match.group(2)) if match else (None, stem)
    level = meta.level or _level_from_path(path)
    return Problem(
        name=name,
        stem=stem,
        id=pid,
        level=level,
        path=path.resolve(),
        source=source,
        sha256=hashlib.sha256(source.encode()).hexdigest(),
        meta=meta,
        builtin=builtin,
        has_small="get_small_inputs" in functions,
        has_variants="get_input_variants" in functions,
    )


def _problem_files(root: Path) -> list[Path]:
    """Problem files under root. A KernelBench checkout keeps them in `KernelBench/levelN/`."""
    if (root / "KernelBench").is_dir() and any(_LEVEL_DIR.match(p.name) for p in (root / "KernelBench").iterdir()):
        root = root / "KernelBench"
    files = [
        p
        for p in root.rglob("*.py")
        if not p.name.startswith("_") and not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]

    def order(p: Path) -> tuple[int, int, str]:
        level = _level_from_path(p) or 0
        match = _STEM.match(p.stem)
        return (level, int(match.group(1)) if match else 1 << 30, str(p))

    return sorted(files, key=order)


def load_folder(root: Path, *, builtin: bool = False) -> LoadReport:
    """Load every problem file under root; a bad file is reported in `errors` and skipped."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root}: not a folder")
    report = LoadReport()
    for path in _problem_files(root):
        try:
            report.problems.append(load_problem_file(path, builtin=builtin))
        except ProblemError as exc:  # the caller reports `errors` (the CLI: one line each); a warning here doubled it
            log.debug("skipping %s", exc.message)
            report.errors.append(exc)
    return report


def builtin_problems() -> list[Problem]:
    report = load_folder(BUILTIN_SUITE, builtin=True)
    if report.errors:  # the built-in suite is ours: a bad file there is a bug
        raise ProblemError(f"built-in suite: {report.errors[0].message}")
    return report.problems


def _matches(problem: Problem, ref: str) -> bool:
    ref = ref.lower()
    return ref in {problem.name.lower(), problem.stem.lower(), problem.qualified.lower()}


def resolve_problem(ref: str | Path, *, search: list[Problem] | None = None) -> Problem:
    """A problem from a path, or by name (`relu`, `1_relu`, `level1/1_relu`) in the built-in suite."""
    path = Path(ref)
    if path.suffix == ".py" or path.exists():
        return load_problem_file(path)
    pool = builtin_problems() if search is None else search
    hits = [p for p in pool if _matches(p, str(ref))]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        names = ", ".join(p.qualified for p in hits)
        raise UsageError(f"problem name {ref!r} is ambiguous: {names}")
    close = difflib.get_close_matches(str(ref), [p.name for p in pool], n=3)
    hint = f"did you mean {', '.join(close)}?" if close else "see `kernelwright problems list`"
    raise UsageError(f"unknown problem {ref!r}", hint=hint)
