"""Matching a GPU name (what a user types, or what torch reports) to a table entry.

Exact matches on the name or an alias win ("NVIDIA H100 80GB HBM3", "h100"); otherwise a partial
match is accepted only when it picks exactly one entry ("4090", "h100 pcie"). Extra words in the
query that no entry has ("H100 NVL") make it unknown rather than a wrong guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from kernelwright.hardware_specs.names import compact, tokens
from kernelwright.hardware_specs.schema import GpuSpec


@dataclass(frozen=True)
class Match:
    spec: GpuSpec
    how: Literal["name", "alias", "partial"]
    note: str | None = None


@dataclass(frozen=True)
class NoMatch:
    query: str
    candidates: tuple[str, ...]  # several partial matches (ambiguous) or none (unknown)

    @property
    def message(self) -> str:
        if self.candidates:
            return f"GPU name {self.query!r} is ambiguous: it matches {', '.join(self.candidates)}"
        return f"unknown GPU {self.query!r}"


def match(query: str, specs: Sequence[GpuSpec]) -> Match | NoMatch:
    key = compact(query)
    if not key:
        return NoMatch(query, ())
    for spec in specs:
        if compact(spec.name) == key:
            return Match(spec, "name")
    for spec in specs:
        for alias in spec.aliases:
            if compact(alias) == key:
                return Match(spec, "alias", _siblings_note(query, spec, specs))
    found = [spec for spec in specs if _partial(query, spec)]
    if len(found) == 1:
        return Match(found[0], "partial", f"{query!r} read as {found[0].name} (partial name match)")
    return NoMatch(query, tuple(s.name for s in found))


def _partial(query: str, spec: GpuSpec) -> bool:
    key, words = compact(query), set(tokens(query))
    labels = [spec.name, *spec.aliases]
    spec_words = {w for label in labels for w in tokens(label)}
    return words <= spec_words or any(key in compact(label) for label in labels)


def _siblings_note(query: str, spec: GpuSpec, specs: Sequence[GpuSpec]) -> str | None:
    """When a short alias ('h100') picks one of several variants, say which others exist."""
    others = [s.name for s in specs if s is not spec and _partial(query, s)]
    if not others:
        return None
    return f"{query!r} read as {spec.name}; also in the table: {', '.join(others)}"
