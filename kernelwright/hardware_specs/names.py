"""Normalising GPU names so that "NVIDIA GeForce RTX 4090", "rtx-4090" and "RTX 4090" compare equal.

Pure string functions, kept apart so that both the table schema (which checks that names are
unique) and the matcher (which looks names up) can use them without importing each other.
"""

from __future__ import annotations

import re

_NOISE = {"nvidia", "geforce", "amd", "tesla"}


def tokens(label: str) -> list[str]:
    """Lower-case alphanumeric words of a name, vendor words dropped."""
    return [t for t in re.findall(r"[a-z0-9]+", label.lower()) if t not in _NOISE]


def compact(label: str) -> str:
    """Lower-case alphanumerics without vendor words: 'NVIDIA GeForce RTX 4090' -> 'rtx4090'."""
    return "".join(tokens(label))
