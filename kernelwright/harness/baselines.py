"""What a candidate is timed against: the baseline names and the default set. A module of its own,
with no pydantic and no torch, so the CLI's flags read it at start-up for free."""

from __future__ import annotations

from kernelwright.errors import UsageError

BASELINES = ("eager", "compile", "compile-max-autotune")
DEFAULT_BASELINES = ("eager", "compile")


def parse_baselines(text: str) -> tuple[str, ...]:
    """`eager,compile` -> ("eager", "compile"); unknown names are a usage error."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in BASELINES]
    if bad:
        raise UsageError(f"unknown baseline(s) {', '.join(bad)}; choose from {', '.join(BASELINES)}")
    return names
