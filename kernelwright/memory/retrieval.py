"""What the planner is shown from memory, ranked and trimmed to a token budget; every item says
why it was retrieved.

Tiers, best first:
1. the same problem (same reference source) on the same machine: the best kernels known, what
   failed and how often, and the lessons learnt;
2. the same problem on another GPU of the same architecture, and similar problems (same
   operators or fusion pattern, `signature.py`) on this machine or its architecture; then the
   same problem on other architectures, weighted lower;
3. general lessons (the seed file, imports) whose device, architecture and operators fit.
Within a tier, items are ordered by a score (a kernel's speedup, a failure's frequency, a
lesson's recency or its operator overlap). Items are added in rank order until the budget is
spent; the count left out is reported. `Recall.best` is the best kernel known for this problem on
this machine and backend, which a new run starts from.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from kernelwright.memory.records import CandidateEntry, LessonEntry, Machine
from kernelwright.memory.signature import ProblemKey

CHARS_PER_TOKEN = 4  # the usual estimate for English and code with OpenAI-style tokenizers
SIMILAR = 0.5
SCAN_LIMIT = 5000
_FRAME_TOKENS = 40  # tier titles and the closing count line
_TIER_TITLES = {
    1: "Same problem, this machine",
    2: "Same problem elsewhere, and similar problems",
    3: "General lessons",
}


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class RecallQuery:
    problem: ProblemKey
    machine: Machine
    backend: str
    exclude_run: str | None = None
    """The asking run: its own candidates are in its history already."""
    budget_tokens: int = 1500


@dataclass(frozen=True)
class RecallItem:
    tier: int
    kind: Literal["kernel", "failures", "lesson"]
    ref: str
    text: str
    why: str
    score: float

    def render(self) -> str:
        return f"- [{self.ref}] {self.text}\n  why: {self.why}"

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.render())


@dataclass(frozen=True)
class Recall:
    items: tuple[RecallItem, ...] = ()
    left_out: int = 0
    best: CandidateEntry | None = None
    budget_tokens: int = 0
    considered: int = field(default=0)

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text())

    def text(self) -> str:
        """The prompt's memory section."""
        if not self.items:
            if self.left_out:
                return f"({self.left_out} item(s) remembered; none fits the {self.budget_tokens}-token budget)"
            return "(nothing relevant remembered yet)"
        lines = []
        for tier in sorted({i.tier for i in self.items}):
            lines.append(f"{_TIER_TITLES[tier]}:")
            lines += [i.render() for i in self.items if i.tier == tier]
        cut = f"; {self.left_out} more left out for the {self.budget_tokens}-token budget" if self.left_out else ""
        lines.append(f"({len(self.items)} item(s) retrieved, ranked{cut})")
        return "\n".join(lines)


def stale_kernels(entries: Iterable[CandidateEntry]) -> set[tuple[str, str]]:
    """(source hash, machine) of kernels whose latest evaluation there is not correct: judged again
    under a stricter harness or other library versions, they are offered no more."""
    latest: dict[tuple[str, str], CandidateEntry] = {}
    for e in sorted(entries, key=lambda e: (e.created_at, e.id or 0)):
        latest[(e.source_sha256, e.machine)] = e
    return {key for key, e in latest.items() if e.verdict != "correct"}


def current_best(entries: Iterable[CandidateEntry], stale: set[tuple[str, str]] | None = None) -> list[CandidateEntry]:
    """Correct kernels, best first, one per source, leaving out stale ones (`stale_kernels`; by
    default computed from `entries` themselves)."""
    entries = list(entries)
    stale = stale_kernels(entries) if stale is None else stale
    best_of: dict[str, CandidateEntry] = {}
    for e in entries:
        if e.verdict != "correct" or (e.source_sha256, e.machine) in stale:
            continue
        if e.source_sha256 not in best_of or e.score() > best_of[e.source_sha256].score():
            best_of[e.source_sha256] = e
    return sorted(best_of.values(), key=lambda e: e.score(), reverse=True)


class _Collector:
    def __init__(self, stale: set[tuple[str, str]]) -> None:
        self.items: list[RecallItem] = []
        self.lessons_seen: set[str] = set()
        self.stale = stale

    def _lesson_new(self, lesson: str) -> bool:
        key = " ".join(lesson.lower().split())
        if not key or key in self.lessons_seen:
            return False
        self.lessons_seen.add(key)
        return True

    def kernels(self, entries: list[CandidateEntry], tier: int, why: str, weight: float, count: int) -> None:
        for e in current_best(entries, self.stale)[:count]:
            text = f"{e.problem} kernel ({e.backend}, run {e.run_id} #{e.index}, {e.machine}): {e.outcome()}"
            if e.plan:
                text += f"; plan: {_cut(e.plan, 240)}"
            if e.lesson and self._lesson_new(e.lesson):
                text += f"; lesson: {_cut(e.lesson, 200)}"
            self.items.append(RecallItem(tier, "kernel", e.label, text, why, weight * (3.0 + min(e.score(), 10) / 10)))

    def failures(self, entries: list[CandidateEntry], tier: int, why: str, weight: float) -> None:
        groups: dict[str, list[CandidateEntry]] = defaultdict(list)
        for e in entries:
            if e.error_class:
                groups[e.error_class].append(e)
        ranked = sorted(groups.items(), key=lambda kv: len(kv[1]), reverse=True)[:3]
        for error, group in ranked:
            last = max(group, key=lambda e: (e.created_at, e.id or 0))
            text = f"{len(group)} candidate(s) of {last.problem} ended {last.verdict} ({error}); latest: "
            text += _cut(last.message.splitlines()[0] if last.message else "(no message)", 160)
            if last.lesson and self._lesson_new(last.lesson):
                text += f"; lesson: {_cut(last.lesson, 200)}"
            self.items.append(
                RecallItem(tier, "failures", last.label, text, why, weight * (2.0 + min(len(group), 10) / 10))
            )

    def lessons(self, entries: list[CandidateEntry], tier: int, why: str, weight: float, count: int = 4) -> None:
        newest = sorted(entries, key=lambda e: (e.created_at, e.id or 0), reverse=True)
        added = 0
        for rank, e in enumerate(newest):
            if added >= count:
                break
            if e.lesson and self._lesson_new(e.lesson):
                text = f"{_cut(e.lesson, 240)} (after a {e.verdict} {e.problem} candidate, run {e.run_id})"
                self.items.append(RecallItem(tier, "lesson", e.label, text, why, weight * (1.0 + 1.0 / (rank + 2))))
                added += 1

    def general(self, lessons: list[LessonEntry], query: RecallQuery) -> None:
        terms = query.problem.signature.terms()
        for lesson in lessons:
            if lesson.device and lesson.device != query.machine.device:
                continue
            if lesson.arch and lesson.arch.lower() != query.machine.arch.lower():
                continue
            overlap = sorted(set(lesson.ops) & terms)
            if lesson.ops and not overlap:
                continue
            scope = f"for {lesson.device or 'any device'}" + (f" ({lesson.arch})" if lesson.arch else "")
            why = f"general lesson {scope}" + (f", about {', '.join(overlap)} like this problem" if overlap else "")
            text = f"{lesson.text} (source: {_cut(lesson.source, 140)})"
            self.items.append(
                RecallItem(3, "lesson", lesson.label, text, why, (1.0 + len(overlap)) if overlap else 0.5)
            )


def rank(
    entries: list[CandidateEntry], signatures: dict[str, ProblemKey], lessons: list[LessonEntry], query: RecallQuery
) -> Recall:
    """The ranked, budgeted memory for one planner prompt, from the candidates measured on this
    kind of device, the known problems' signatures and the general lessons (`KnowledgeBase.recall`
    reads them). The asking run's own candidates are not shown (its history has them), but they
    count when deciding that a remembered kernel has gone stale."""
    q, here = query.problem, query.machine
    stale = stale_kernels(entries)
    by_problem: dict[str, list[CandidateEntry]] = defaultdict(list)
    for e in entries:
        if e.run_id != query.exclude_run:
            by_problem[e.problem_sha256].append(e)
    got = _Collector(stale)

    mine = by_problem.pop(q.sha256, [])
    local = [e for e in mine if e.machine == here.name]
    why = f"same problem ({q.name}) on this machine ({here.describe()})"
    got.kernels(local, 1, why, 1.0, 2)
    got.failures(local, 1, why, 1.0)
    got.lessons(local, 1, why, 1.0)
    best = next((e for e in current_best(local, stale) if e.backend == query.backend), None)

    by_machine: dict[str, list[CandidateEntry]] = defaultdict(list)
    for e in mine:
        if e.machine != here.name:
            by_machine[e.machine].append(e)
    for name, group in by_machine.items():
        same_arch = group[0].arch == here.arch
        why = f"same problem on {name}" + (
            f", the same architecture ({here.arch})" if same_arch else f" ({group[0].arch}: another architecture)"
        )
        weight = 0.9 if same_arch else 0.4
        got.kernels(group, 2, why, weight, 1)
        got.lessons(group, 2, why, weight, 2)

    for sha, group in by_problem.items():
        other = signatures.get(sha)
        if other is None:
            continue
        similarity = q.signature.similarity(other.signature)
        if similarity < SIMILAR:
            continue
        near = [e for e in group if e.machine == here.name or e.arch == here.arch]
        if not near:
            continue
        where = "this machine" if any(e.machine == here.name for e in near) else f"the same architecture ({here.arch})"
        if other.name == q.name:  # the same name, another reference source: an edited or re-packaged problem
            why = f"another version of {q.name} (its reference source differs) on {where}"
        else:
            why = f"similar problem {other.name} ({q.signature.why_similar(other.signature)}) on {where}"
        got.kernels(near, 2, why, 0.8 * similarity, 1)
        got.failures(near, 2, why, 0.6 * similarity)
        got.lessons(near, 2, why, 0.8 * similarity, 2)

    got.general(lessons, query)
    ranked = sorted(got.items, key=lambda i: (i.tier, -i.score))
    chosen: list[RecallItem] = []
    used = _FRAME_TOKENS
    for item in ranked:  # a strict prefix of the ranking: nothing lower-ranked jumps a gap
        if used + item.tokens > query.budget_tokens:
            break
        chosen.append(item)
        used += item.tokens
    return Recall(
        items=tuple(chosen),
        left_out=len(ranked) - len(chosen),
        best=best,
        budget_tokens=query.budget_tokens,
        considered=len(entries),
    )
