"""The candidate tree's labels: speedups, then the candidate's niche (its technique tags, #31)."""

from __future__ import annotations

from kernelwright.agent.progress import Candidate
from kernelwright.tui.widgets.candidates import label


def test_a_label_names_the_niche_after_the_speedups_and_only_when_there_is_one() -> None:
    speed = {
        "compile": {"ratio": 2.2, "ci_low": 2.1, "ci_high": 2.3},
        "eager": {"ratio": 0.72, "ci_low": 0.7, "ci_high": 0.74},
    }
    tagged = Candidate(index=5, round=2, verdict="correct", speedups=speed, parent=3, tags=["unrolled", "vectorised"])
    assert label(tagged, best=5).startswith("★#5") and label(tagged, best=5).endswith("·unrolled+vectorised")
    plain = Candidate(index=6, round=2, verdict="rejected", reason="side_stream", tags=["triton"])
    assert label(plain, best=5).endswith("side_stream")  # triton is the backend, not a niche
