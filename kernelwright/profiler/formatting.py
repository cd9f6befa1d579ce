"""Short text for numbers, sizes, rates and launch shapes, as the digest and diff texts print them.

Pure functions with no profiler types, so every text renderer can share them.
"""

from __future__ import annotations


def num(value: float | None, fmt: str = ".1f", suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{fmt}}{suffix}"


def size(value: float | None) -> str:
    if value is None:
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def rate(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def dims(value: tuple[int, int, int] | None) -> str:
    return "n/a" if value is None else "(" + ",".join(str(v) for v in value) + ")"
