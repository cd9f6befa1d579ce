"""Values and tree-sitter helpers shared by the static-analysis modules.

`Finding` and `Extension` are re-exported by `kernelwright.harness.checks.static.analysis`, which is
the module callers import.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Literal

import tree_sitter_cuda
import tree_sitter_python
from tree_sitter import Language, Node, Parser

Backend = Literal["cuda", "cpp", "triton", "python"]
Severity = Literal["reject", "flag"]


@dataclass(frozen=True)
class Finding:
    """One piece of evidence about a candidate; `code` is a `verdicts.Reason` value."""

    code: str
    message: str
    line: int | None
    severity: Severity


@dataclass(frozen=True)
class Extension:
    """One `load_inline` / `load` call of the candidate, with its sources resolved where possible."""

    name: str | None
    cpp_sources: str
    cuda_sources: str
    functions: tuple[str, ...]
    line: int
    resolved: bool


@cache
def python_parser() -> Parser:
    return Parser(Language(tree_sitter_python.language()))


@cache
def cuda_parser() -> Parser:
    # The CUDA grammar is a superset of C++, so it parses cpp_sources as well.
    return Parser(Language(tree_sitter_cuda.language()))


def text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


def line_of(node: Node) -> int:
    return node.start_point.row + 1


def walk(node: Node) -> Iterator[Node]:
    """Pre-order walk of `node` and all its descendants."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


class FindingSink:
    """Collects findings, dropping exact duplicates while keeping first-seen order."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str, int | None, str], Finding] = {}

    def add(self, code: str, message: str, line: int | None, severity: Severity) -> None:
        key = (code, message, line, severity)
        if key not in self._items:
            self._items[key] = Finding(code, message, line, severity)

    def extend(self, findings: tuple[Finding, ...] | list[Finding]) -> None:
        for f in findings:
            self.add(f.code, f.message, f.line, f.severity)

    def items(self) -> tuple[Finding, ...]:
        return tuple(self._items.values())
