"""How a shipped scripted session is written: one plan and one review a round, the coder's replies
in order, and the verdict the harness is expected to reach for each candidate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernelwright.agent.scripted import Keyed, Reply, ScriptedSession


def session_of(
    name: str,
    plans: Sequence[tuple[str, float]],
    coder: Sequence[Reply | Keyed],
    reviews: Sequence[dict[str, Any]],
    verdicts: Sequence[str],
) -> ScriptedSession:
    """A fresh session named `name` (labelled scripted wherever it shows): `plans` as (plan,
    expected speedup), one per round like `reviews`; `verdicts` one per coder reply that makes a
    candidate (a scripted run stops where reality leaves them)."""
    return ScriptedSession(
        name=f"{name} (scripted)",
        script={
            "planner": [{"plan": p, "expected_speedup": s} for p, s in plans],
            "coder": list(coder),
            "reviewer": list(reviews),
        },
        expected_verdicts=list(verdicts),
    )
