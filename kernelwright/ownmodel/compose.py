"""Several candidate files in one: how `model verify` puts the winners of several regions into
one candidate the harness reads and runs as a whole.

The harness's static checks read one file (its extensions, what `ModelNew.forward` reaches), so
each region's candidate is copied in, not imported. Each copy's `ModelNew` becomes
`_KwRegion<i>`; its other top-level names (a `lib`, a `cpp_source` two candidates both define)
are renamed `_kw<i>_<name>` where they would collide with another copy's. Renaming works on
tokens, not text: a name after a dot (`self.lib`) and a keyword argument's name
(`load_inline(cpp_sources=...)`) are left alone, strings and comments are never touched, and
the code keeps its layout (the C++ in a string stays byte for byte what the candidate wrote).
Names bound by imports are not renamed (two files importing `torch` bind the same thing).
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass

from kernelwright.errors import UsageError

REGION_CLASS = "_KwRegion{}"


@dataclass(frozen=True)
class Piece:
    """One candidate file's text, renamed: its `ModelNew` is now `class_name`."""

    label: str
    source: str
    class_name: str


def _bound(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names bound at the top level by code, names bound there by imports)."""
    names: set[str] = set()
    imported: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names, imported


def rename(source: str, mapping: dict[str, str]) -> str:
    """`source` with every name in `mapping` renamed (see the module doc)."""
    edits: dict[int, list[tuple[int, int, str]]] = {}
    stack: list[str] = []  # per open bracket: "call" (keyword arguments possible) or "other"
    significant: list[tokenize.TokenInfo] = []
    tokens = [
        t
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    ]
    for i, tok in enumerate(tokens):
        prev = significant[-1] if significant else None
        if tok.type == tokenize.OP and tok.string in "([{":
            before_def = len(significant) >= 2 and significant[-2].string in ("def", "class")
            stack.append("call" if tok.string == "(" and not before_def else "other")
        elif tok.type == tokenize.OP and tok.string in ")]}":
            if stack:
                stack.pop()
        elif tok.type == tokenize.NAME and tok.string in mapping:
            after_dot = prev is not None and prev.string == "."
            following = tokens[i + 1] if i + 1 < len(tokens) else None
            keyword = (
                bool(stack)
                and stack[-1] == "call"
                and following is not None
                and following.string == "="
                and prev is not None
                and prev.string in ("(", ",")
            )
            if not after_dot and not keyword:
                edits.setdefault(tok.start[0], []).append((tok.start[1], tok.end[1], mapping[tok.string]))
        significant.append(tok)
    lines = source.splitlines(keepends=True)
    for row, changes in edits.items():
        line = lines[row - 1]
        for start, end, new in sorted(changes, reverse=True):
            line = line[:start] + new + line[end:]
        lines[row - 1] = line
    return "".join(lines)


def _without_future(source: str, tree: ast.Module) -> tuple[str, bool]:
    """`source` with its `from __future__ import ...` lines blanked (they must open a file)."""
    lines = source.splitlines(keepends=True)
    found = False
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            found = True
            for row in range(node.lineno - 1, (node.end_lineno or node.lineno)):
                lines[row] = "\n"
    return "".join(lines), found


def compose(files: list[tuple[str, str]]) -> tuple[list[Piece], bool]:
    """Each (label, source) renamed to live beside the others; and whether any had a
    `from __future__` import (the caller puts one at the top of the file)."""
    trees = []
    for label, source in files:
        try:
            trees.append(ast.parse(source))
        except SyntaxError as exc:
            raise UsageError(f"candidate {label}: syntax error on line {exc.lineno}: {exc.msg}") from exc
    bound = [_bound(tree) for tree in trees]
    for (label, _), (names, _) in zip(files, bound, strict=True):
        if "ModelNew" not in names:
            raise UsageError(f"candidate {label} defines no class ModelNew")
    counts: dict[str, int] = {}
    for names, _ in bound:
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    pieces, future = [], False
    for i, ((label, source), tree, (names, _)) in enumerate(zip(files, trees, bound, strict=True)):
        mapping = {name: f"_kw{i}_{name}" for name in names if counts[name] > 1 or name.startswith(("_kw", "_Kw"))}
        mapping["ModelNew"] = REGION_CLASS.format(i)
        text, had_future = _without_future(source, tree)
        future = future or had_future
        pieces.append(Piece(label=label, source=rename(text, mapping), class_name=REGION_CLASS.format(i)))
    return pieces, future
