"""Which earlier candidates the next round's ideas start from (#31): the choice rule, explicit,
seeded and recorded.

The program database is the run's candidates (state `candidates`, one record each with its
verdict, speedups, technique tags and idea; the EvalResults on disk; memory holds the same records).
For a round with N ideas the parents are, in this order, without repeats:

1. the best correct candidate (by the CI lower bound of its speedup over the target baseline),
   unless the reviewer abandoned the direction that candidate came from last round;
2. the best of each other technique niche (`techniques.niche`), best niche first;
3. correct-but-slower candidates with a different idea (another niche, or an idea less than
   `SAME_IDEA` alike to every chosen parent's), drawn with `random.Random(f"{seed}:{round}")` among those within
   `SLOWER_WITHIN` of the best: a kernel that lost today may carry the idea that wins tomorrow;
4. then the run's starting point (the branch origin, or none: write from scratch).

Each choice says why it was made; the planner writes idea i for parent i.
"""

from __future__ import annotations

import random
from typing import TypedDict

from kernelwright.agent.budget import score
from kernelwright.agent.state import CandidateRecord
from kernelwright.agent.techniques import niche, similar
from kernelwright.harness.verdicts import Verdict

SAME_IDEA = 0.6
"""Ideas this alike (`techniques.similar`) count as the same idea."""
SLOWER_WITHIN = 0.5
"""A correct-but-slower candidate may be a parent when its score is at least this fraction of the best's."""


class ParentChoice(TypedDict):
    index: int | None
    """The parent candidate, or None (no correct candidate yet: the idea starts from scratch)."""
    why: str


def choose(
    candidates: list[CandidateRecord],
    ideas: int,
    *,
    seed: int,
    round_: int,
    origin: CandidateRecord | None = None,
    abandoned_parent: int | None = None,
) -> list[ParentChoice]:
    """The parents of the round's `ideas` ideas (see the module's docstring for the rule)."""
    pool = [c for c in candidates if c["verdict"] == Verdict.CORRECT.value]
    if origin is not None and origin["verdict"] == Verdict.CORRECT.value and origin not in pool:
        pool.append(origin)
    ranked = sorted(pool, key=lambda c: (-score(c), c["index"]))
    chosen: list[ParentChoice] = []
    taken: set[int] = set()
    niches_taken: set[str] = set()

    chosen_records: list[CandidateRecord] = []

    def take(record: CandidateRecord, why: str) -> None:
        chosen.append(ParentChoice(index=record["index"], why=why))
        chosen_records.append(record)
        taken.add(record["index"])
        niches_taken.add(niche(record.get("tags") or []))

    best = next((c for c in ranked if c["index"] != abandoned_parent), None)
    if best is not None:
        why = "the best correct candidate"
        if ranked and ranked[0]["index"] == abandoned_parent:
            why += f" other than {abandoned_parent} (the reviewer abandoned that direction)"
        take(best, why)
    by_niche: dict[str, CandidateRecord] = {}
    for record in ranked:
        by_niche.setdefault(niche(record.get("tags") or []), record)
    for name, record in sorted(by_niche.items(), key=lambda kv: (-score(kv[1]), kv[1]["index"])):
        if len(chosen) >= ideas:
            break
        if name not in niches_taken and record["index"] not in taken and record["index"] != abandoned_parent:
            take(record, f"the best of the {name} niche")
    if ranked:
        floor = SLOWER_WITHIN * score(ranked[0])
        draw = random.Random(f"{seed}:{round_}")
        while len(chosen) < ideas:
            eligible = [
                c
                for c in ranked
                if c["index"] not in taken
                and c["index"] != abandoned_parent
                and score(c) >= floor
                and (niche(c.get("tags") or []) not in niches_taken or _new_idea(c, chosen_records))
            ]
            if not eligible:
                break
            take(
                eligible[draw.randrange(len(eligible))],
                "a correct but slower candidate with a different idea (seeded draw)",
            )
    while len(chosen) < ideas:
        if origin is not None and origin["index"] not in taken:
            take(origin, "the run's starting point")
        elif ranked:
            # Fewer distinct parents than ideas: the best again, with another idea.
            chosen.append(ParentChoice(index=ranked[0]["index"], why="the best correct candidate, another idea"))
        else:
            chosen.append(ParentChoice(index=None, why="no correct candidate yet: from scratch"))
    return chosen


def _new_idea(record: CandidateRecord, chosen: list[CandidateRecord]) -> bool:
    idea = record.get("idea") or ""
    return bool(idea) and all(similar(idea, c.get("idea") or "") < SAME_IDEA for c in chosen)
