"""What the coder's reply becomes: a whole file, or edits to the file its prompt named as the base.

A reply gives either the complete candidate in one ```python block, or SEARCH/REPLACE blocks
(edits as diffs, the way AlphaEvolve asks for them) against the base: the failing draft on a
repair turn, the parent on a new idea::

    <<<<<<< SEARCH
    lines copied from the base
    =======
    the lines that replace them
    >>>>>>> REPLACE

Blocks apply in order, each to the result of the ones before. A block applies where its SEARCH
text occurs exactly once; failing that, where it occurs once after trailing whitespace is ignored
on every line. A block that does not apply (not found, or found more than once) makes the whole
reply unusable, and why goes back to the coder: a half-applied edit is never judged.

The result is checked with tree-sitter either way: valid Python with a top-level `ModelNew`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernelwright.harness.checks.static.common import python_parser

_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
_EDIT = re.compile(
    r"^<{5,9} ?SEARCH[ \t]*\n(?P<search>.*?)^={5,9}[ \t]*\n(?P<replace>.*?)^>{5,9} ?REPLACE[ \t]*$",
    re.DOTALL | re.MULTILINE,
)


@dataclass(frozen=True)
class Drafted:
    """A reply read: the candidate source, or None with why the reply is unusable."""

    source: str | None
    why: str = ""
    form: str = ""
    """"file" (a whole file) or "edits" (N blocks applied to the base)."""


def read_reply(reply: str, base: str | None) -> Drafted:
    """The candidate a reply gives: its whole file if it has one, else its edits applied to `base`."""
    edits = [(m.group("search"), m.group("replace")) for m in _EDIT.finditer(reply)]
    blocks = [b.strip() + "\n" for b in _BLOCK.findall(reply) if "ModelNew" in b and not _EDIT.search(b)]
    if blocks:
        return _checked(blocks[-1], "file")
    if edits:
        if base is None:
            return Drafted(None, "the reply has SEARCH/REPLACE edits but there is no base file to apply them to")
        edited, why = apply_edits(base, edits)
        if edited is None:
            return Drafted(None, why)
        return _checked(edited, f"edits ({len(edits)} block{'s' if len(edits) != 1 else ''})")
    others = _BLOCK.findall(reply)
    if others:
        return _checked(others[-1].strip() + "\n", "file")
    return Drafted(None, "the reply had no ```python code block and no SEARCH/REPLACE edits")


def apply_edits(base: str, edits: list[tuple[str, str]]) -> tuple[str | None, str]:
    """(the edited text, "") or (None, which block did not apply and why)."""
    text = base
    for number, (search, replace) in enumerate(edits, 1):
        if not search.strip():
            return None, f"edit block {number} has an empty SEARCH part (copy the lines to replace from the base)"
        count = text.count(search)
        if count == 1:
            text = text.replace(search, replace, 1)
            continue
        if count > 1:
            return None, f"edit block {number}: its SEARCH text occurs {count} times in the base; include more lines"
        located = _loose_find(text, search)
        if located is None:
            first = next((line for line in search.splitlines() if line.strip()), "")
            return None, (
                f"edit block {number}: its SEARCH text is not in the base file (first line: {first.strip()[:80]!r}); "
                "copy the lines exactly, or reply with the complete file"
            )
        start, end = located
        text = text[:start] + replace + text[end:]
    return text, ""


def _loose_find(text: str, search: str) -> tuple[int, int] | None:
    """Where `search` occurs once in `text` when trailing whitespace of every line is ignored."""
    lines = text.splitlines(keepends=True)
    wanted = [line.rstrip() for line in search.splitlines()]
    stripped = [line.rstrip() for line in lines]
    hits = [i for i in range(len(lines) - len(wanted) + 1) if stripped[i : i + len(wanted)] == wanted]
    if len(hits) != 1:
        return None
    start = sum(len(line) for line in lines[: hits[0]])
    end = start + sum(len(line) for line in lines[hits[0] : hits[0] + len(wanted)])
    return start, end


def _checked(source: str, form: str) -> Drafted:
    tree = python_parser().parse(source.encode())
    if tree.root_node.has_error:
        line = _first_error_line(tree.root_node)
        return Drafted(None, f"the {_what(form)} is not valid Python (syntax error near line {line})")
    if not any(
        n.type == "class_definition"
        and (name := n.child_by_field_name("name")) is not None
        and name.text == b"ModelNew"
        for n in tree.root_node.children
    ):
        return Drafted(None, f"the {_what(form)} defines no top-level `class ModelNew`")
    return Drafted(source, "", form)


def _what(form: str) -> str:
    return "code block" if form == "file" else "file after your edits"


def _first_error_line(node) -> int:  # type: ignore[no-untyped-def]
    if node.type == "ERROR" or node.is_missing:
        return int(node.start_point[0]) + 1
    for child in node.children:
        if child.has_error:
            return _first_error_line(child)
    return int(node.start_point[0]) + 1
