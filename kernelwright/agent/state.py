"""The graph state: what every node reads and writes, checkpointed after each step.

A TypedDict with explicit reducers (LangGraph merges node updates through them). Values are plain
JSON-able data so the SQLite checkpoint stays readable and stable across versions; full
EvalResults live on disk, one file per candidate keyed by source hash (see `runs.py`).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired, TypedDict


def merge_dicts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Later keys win; used for per-candidate results keyed by source hash."""
    return {**(left or {}), **(right or {})}


def add_usage(left: dict[str, float] | None, right: dict[str, float] | None) -> dict[str, float]:
    """Token and cost counters add up across calls."""
    out = dict(left or {})
    for key, value in (right or {}).items():
        out[key] = out.get(key, 0.0) + value
    return out


class CandidateRecord(TypedDict):
    """One evaluated candidate, as the loop remembers it (the EvalResult itself is on disk)."""

    index: int
    round: int
    attempt: int
    sha256: str
    path: str
    verdict: str
    reason: str | None
    message: str
    speedups: dict[str, dict[str, float]]
    target_baseline: str | None
    beats_target: bool
    parent: int | None
    """The candidate this one's idea started from (its parent in the program database; index 0 is
    the branch origin or the remembered kernel)."""
    idea: NotRequired[str]
    """The plan of the idea it implements."""
    tags: NotRequired[list[str]]
    """Technique tags (`techniques.tags`, from its code and its idea)."""
    also: NotRequired[list[int]]
    """Other candidates its idea combined with its parent (`IdeaRecord.also`)."""


class ProfileRecord(TypedDict):
    """A candidate's Nsight Compute digest (or why there is none), keyed by its index in the state."""

    index: int
    text: str
    own_pct: float | None
    report: str | None
    digest_json: str | None
    note: str


class RepairRecord(TypedDict):
    """A failed draft the coder is asked to repair: its file and the feedback mapped onto it."""

    index: int
    path: str
    feedback: str
    idea: NotRequired[int]
    """Which of the round's ideas the draft implements."""


class IdeaRecord(TypedDict):
    """One of a round's ideas: the plan and the parent it starts from (`parents.choose`)."""

    plan: str
    expected_speedup: float | None
    parent: int | None
    why: str
    """Why that parent (the choice rule's reason)."""
    also: NotRequired[list[int]]
    """Other correct candidates whose technique the idea combines with its parent's ("the tiling
    of 3 with the epilogue of 5"), as the planner named them, checked against the run's correct
    candidates (at most `planner.MAX_ALSO`); the coder is shown their sources after the parent's.
    Absent in checkpoints from before it existed."""


class AgentState(TypedDict, total=False):
    problem: str
    round: int
    plan: str
    plan_expected_speedup: float | None
    attempt: int
    drafts: list[str]
    draft_ideas: list[int]
    """Which idea each draft implements (same order as `drafts`)."""
    ideas: list[IdeaRecord]
    """This round's ideas; `plan` is the first one's (`--ideas N`, default 1)."""
    idea_log: Annotated[list[dict[str, Any]], operator.add]
    """Every round's ideas with their parents and why each parent was chosen (the search's record)."""
    abandoned_parent: int | None
    """The parent of the direction the reviewer abandoned last round: not the next first parent."""
    coder_feedback: str
    """Why the coder's last reply was unusable, or what the other failed drafts of a round said."""
    repair: RepairRecord | None
    """The draft the next coder turn repairs (its own, failed), or None on a new idea."""
    no_code_replies: int
    last_candidate: CandidateRecord | None
    candidates: Annotated[list[CandidateRecord], operator.add]
    results: Annotated[dict[str, str], merge_dicts]
    best: CandidateRecord | None
    start: CandidateRecord | None
    """What this round's plan starts from: the best so far, else the branch origin."""
    origin: CandidateRecord | None
    """`--from-candidate`: the earlier run's candidate this run branched from (index 0 here), or
    the best kernel memory held for this problem (re-evaluated here as candidate 0)."""
    remembered: dict[str, Any] | None
    """Where candidate 0 came from when memory supplied it: the entry, its run, its results then."""
    profiles: Annotated[dict[str, ProfileRecord], merge_dicts]
    lessons: Annotated[list[str], operator.add]
    history: Annotated[list[str], operator.add]
    """One line per round (idea, outcome, why), every round of the run."""
    abandoned: Annotated[list[str], operator.add]
    """Plans the reviewer abandoned: the planner is told, and a plan too like one is asked again."""
    context: dict[str, Any] | None
    """Measured once, the first round (`nodes/context.py`): hardware block, speed of light, baselines."""
    elapsed_s: float
    """Wall time the run has used, over every session of it (`--resume` continues the count)."""
    hints: Annotated[list[str], operator.add]
    usage: Annotated[dict[str, float], add_usage]
    rounds_without_improvement: int
    profile_note: str
    stop_reason: str | None
    accepted: bool
