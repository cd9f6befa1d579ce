"""A run as its events tell it: rounds and steps (status, time, tokens), candidates (verdicts,
speedups, parents, digests), budgets, and where the run stands. Pure data, fed one event at a time
(`apply`), so every frontend reads the same picture: the TUI, the headless live status line, and a
finished run replayed from its trajectory.json. Times come from the events (`StepFinished`,
timestamps), never from a clock here, so a replay shows what the run showed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kernelwright.agent.events import _Event

StepStatus = Literal["running", "done", "failed", "skipped"]
RunStatus = Literal["starting", "running", "pausing", "paused", "awaiting approval", "finished", "stopped", "failed"]

STEP_LABELS = {"planner": "plan", "coder": "code", "evaluate": "evaluate", "profile": "profile", "reviewer": "review"}
VERDICT_MARKS = {
    "correct": "✓",
    "incorrect": "✗",
    "rejected": "⊘",
    "build_error": "⚠",
    "crashed": "☠",
    "timeout": "⌛",
}


def verdict_mark(verdict: str) -> str:
    """A symbol beside each verdict word: no verdict is told by colour alone."""
    return VERDICT_MARKS.get(verdict, "?")


def _ts(value: str) -> float:
    try:
        return dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        return 0.0


@dataclass(frozen=True)
class Stream:
    """A reply streaming in (from the transient TokensStreamed events): live only, never replayed."""

    role: str
    sample: int
    tokens: int
    tail: str

    @property
    def label(self) -> str:
        return f"{self.role} (sample {self.sample})" if self.sample else self.role


@dataclass
class Step:
    round: int
    step: str
    status: StepStatus = "running"
    seconds: float | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    detail: list[str] = field(default_factory=list)
    """What happened in the step, in order: the plan, tool calls, candidates, errors, the review."""
    streams: dict[int, Stream] = field(default_factory=dict)
    """The replies streaming in now, by sample (0: the only one); each leaves when it is accounted."""

    def streaming(self) -> str:
        """One line for the replies streaming in: "coder: ~1,234 tokens so far", "coder (sample 2):
        ...", or "coder (3 samples): ~4,567 tokens so far"; "" when none is."""
        streams = list(self.streams.values())
        if not streams:
            return ""
        tokens = sum(s.tokens for s in streams)
        who = streams[0].label if len(streams) == 1 else f"{streams[0].role} ({len(streams)} samples)"
        return f"{who}: ~{tokens:,} tokens so far"

    @property
    def label(self) -> str:
        return STEP_LABELS.get(self.step, self.step)


@dataclass
class Candidate:
    index: int
    round: int
    path: str = ""
    verdict: str = "pending"
    reason: str | None = None
    message: str = ""
    speedups: dict[str, dict[str, float]] = field(default_factory=dict)
    parent: int | None = None
    tags: list[str] = field(default_factory=list)
    beats_target: bool = False
    cached: bool = False
    digest: str = ""
    own_pct: float | None = None
    report: str | None = None
    profile_note: str = ""

    def speedup(self, baseline: str) -> float | None:
        found = self.speedups.get(baseline)
        return found["ratio"] if found else None

    @property
    def target_speedup(self) -> float | None:
        """The ratio against the target baseline (torch.compile; eager where compile was not timed)."""
        for name in ("compile", "eager"):
            if name in self.speedups:
                return self.speedups[name]["ratio"]
        return None

    @property
    def score(self) -> float:
        for name in ("compile", "eager"):
            if name in self.speedups:
                return self.speedups[name]["ci_low"]
        return 0.0


@dataclass
class RunProgress:
    run_id: str = ""
    problem: str = ""
    device: str = ""
    backend: str = ""
    target: float = 1.0
    scripted: str | None = None
    budget: dict[str, float | None] = field(default_factory=dict)
    status: RunStatus = "starting"
    stop_reason: str = ""
    round: int = 0
    steps: list[Step] = field(default_factory=list)
    candidates: dict[int, Candidate] = field(default_factory=dict)
    best_index: int | None = None
    tokens: float = 0.0
    cost_usd: float = 0.0
    estimated_tokens: bool = False
    gpu_seconds: float = 0.0
    first_ts: float | None = None
    last_ts: float | None = None
    pending_plan: str | None = None
    now: float | None = None
    """A live frontend's clock (epoch seconds), so the wall meter moves between events; a replay
    leaves it unset and shows the recorded times."""
    notes: list[str] = field(default_factory=list)
    """Things a person should see (a failure, a stop): the TUI notifies them."""

    # -- derived ---------------------------------------------------------------------------------
    @property
    def wall_seconds(self) -> float:
        if self.first_ts is None or self.last_ts is None:
            return 0.0
        end = max(self.last_ts, self.now) if self.now is not None and self.running else self.last_ts
        return max(0.0, end - self.first_ts)

    @property
    def best(self) -> Candidate | None:
        return self.candidates.get(self.best_index) if self.best_index is not None else None

    @property
    def running(self) -> bool:
        return self.status in ("starting", "running", "pausing", "paused", "awaiting approval")

    def current_step(self) -> Step | None:
        return next((s for s in reversed(self.steps) if s.status == "running"), None)

    def ordered_candidates(self) -> list[Candidate]:
        return [self.candidates[i] for i in sorted(self.candidates)]

    def children(self, parent: int | None) -> list[Candidate]:
        return [c for c in self.ordered_candidates() if c.parent == parent and c.index != parent]

    def meters(self) -> list[tuple[str, float, float | None, str]]:
        """(name, used, limit, shown) for each budget: rounds, tokens, cost, wall time, GPU time."""
        b = self.budget
        est = "~" if self.estimated_tokens else ""
        rows: list[tuple[str, float, float | None, str]] = [
            ("round", float(self.round), b.get("rounds"), f"{self.round}/{_num(b.get('rounds'))}"),
            ("tok", self.tokens, b.get("tokens"), f"{est}{_k(self.tokens)}/{_k(b.get('tokens'))}"),
            ("cost", self.cost_usd, b.get("cost_usd"), f"${self.cost_usd:.2f}/{_money(b.get('cost_usd'))}"),
            ("wall", self.wall_seconds, b.get("wall_s"), f"{_dur(self.wall_seconds)}/{_dur(b.get('wall_s'))}"),
        ]
        if self.device == "cuda":
            rows.append(("GPU", self.gpu_seconds, b.get("gpu_s"), f"{_dur(self.gpu_seconds)}/{_dur(b.get('gpu_s'))}"))
        return rows

    # -- the reducer -----------------------------------------------------------------------------
    def _step(self, name: str) -> Step | None:
        return next((s for s in reversed(self.steps) if s.step == name and s.status == "running"), None)

    def _note(self, text: str, round_: int | None = None) -> None:
        step = self.current_step()
        if step is not None and (round_ is None or step.round == round_):
            step.detail.append(text)

    def apply(self, event: _Event) -> None:
        e: Any = event
        kind = getattr(event, "kind", "")
        ts = _ts(event.ts)
        if ts:
            self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
            self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)
        if event.round:
            self.round = max(self.round, event.round)
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(e)

    def _on_run_started(self, e: Any) -> None:
        self.run_id, self.problem, self.device, self.backend = e.run_id, e.problem, e.device, e.backend
        self.target, self.scripted, self.budget = e.target, e.scripted, dict(e.budget)
        self.status, self.stop_reason = "running", ""
        self.pending_plan = None

    def _on_step_started(self, e: Any) -> None:
        for step in self.steps:  # a step left running (a resumed run re-runs it) ends here
            if step.status == "running":
                step.status = "failed"
        self.steps.append(Step(round=e.round, step=e.step))

    def _on_step_finished(self, e: Any) -> None:
        step = self._step(e.step)
        if step is not None:
            step.status, step.seconds = "done", e.seconds
            step.streams.clear()
            if e.step == "profile" and self.device == "cuda":
                self.gpu_seconds += e.seconds  # Nsight Compute holds the GPU for the whole step

    def _on_plan_written(self, e: Any) -> None:
        hints = f"\n(hints: {'; '.join(e.hints)})" if e.hints else ""
        expect = f" (expects {e.expected_speedup:g}x)" if e.expected_speedup else ""
        self._note(f"plan{expect}: {e.plan}{hints}")

    def _on_plan_awaiting_approval(self, e: Any) -> None:
        self.pending_plan, self.status = e.plan, "awaiting approval"

    def _on_plan_decided(self, e: Any) -> None:
        self.pending_plan, self.status = None, "running"
        self.notes.append("plan edited: " + e.plan[:200] if e.edited else "plan approved")

    def _on_run_paused(self, e: Any) -> None:
        self.status = "paused"
        self.notes.append(f"paused before {', '.join(e.next_steps) or 'the end'}")

    def _on_run_resumed(self, e: Any) -> None:
        self.status = "running"

    def _on_tool_called(self, e: Any) -> None:
        args = ", ".join(f"{k}={v!r}" for k, v in e.args.items())
        self._note(f"{e.role} → {e.name}({args})\n  {e.result[:300]}{' …' if e.truncated else ''}")

    def _on_coder_retry(self, e: Any) -> None:
        self._note(f"reply unusable: {e.why}")

    def _on_build_ahead(self, e: Any) -> None:
        self._note(f"sample {e.sample}'s draft is building while the other replies come")

    def _on_candidate_written(self, e: Any) -> None:
        cand = self.candidates.setdefault(e.index, Candidate(index=e.index, round=e.round))
        cand.path = e.path
        self._note(f"candidate {e.index} written ({Path(e.path).name})")

    def _on_candidate_evaluated(self, e: Any) -> None:
        cand = self.candidates.setdefault(e.index, Candidate(index=e.index, round=e.round))
        cand.round = e.round
        cand.verdict, cand.reason, cand.message = e.verdict, e.reason, e.message
        cand.speedups, cand.parent, cand.beats_target, cand.cached = e.speedups, e.parent, e.beats_target, e.cached
        cand.tags = list(getattr(e, "tags", []) or [])
        self.gpu_seconds += e.gpu_seconds
        if e.verdict == "correct" and (self.best is None or cand.score > self.best.score):
            self.best_index = e.index
        reason = f" ({e.reason})" if e.reason else ""
        self._note(f"candidate {e.index}: {verdict_mark(e.verdict)} {e.verdict}{reason}\n{e.message}".rstrip())

    def _on_candidate_profiled(self, e: Any) -> None:
        cand = self.candidates.setdefault(e.index, Candidate(index=e.index, round=e.round))
        cand.digest, cand.own_pct, cand.report = e.digest, e.own_pct, e.report
        own = f", own kernels {e.own_pct:.0f}% of GPU time" if e.own_pct is not None else ""
        self._note(f"profiled candidate {e.index}{own}")

    def _on_profile_skipped(self, e: Any) -> None:
        if e.index is not None and e.index in self.candidates:
            self.candidates[e.index].profile_note = e.why
        else:
            for cand in self.candidates.values():
                if cand.round == self.round and not cand.digest:
                    cand.profile_note = e.why
        self._note(e.why)

    def _on_review_written(self, e: Any) -> None:
        lesson = f"\nlesson: {e.lesson}" if e.lesson else ""
        self._note(f"review: {e.decision}: {e.feedback}{lesson}")

    def _on_usage_updated(self, e: Any) -> None:
        self.tokens += e.total_tokens
        self.cost_usd += e.cost_usd
        self.estimated_tokens = self.estimated_tokens or e.estimated
        step = self.current_step()
        if step is not None:
            step.tokens += int(e.total_tokens)
            step.cost_usd += e.cost_usd
            step.streams.pop(getattr(e, "sample", 0), None)

    def _on_tokens_streamed(self, e: Any) -> None:
        step = self.current_step()
        if step is not None:
            step.streams[e.sample] = Stream(role=e.role, sample=e.sample, tokens=e.tokens_so_far, tail=e.preview_tail)

    def _on_llm_note(self, e: Any) -> None:
        who = f"{e.role} (sample {e.sample})" if e.sample else e.role
        self._note(f"{who}: {e.detail}")
        step = self.current_step()
        if step is not None and e.what == "sample_failed":
            step.streams.pop(e.sample, None)

    def _on_run_branched(self, e: Any) -> None:
        cand = self.candidates.setdefault(0, Candidate(index=0, round=0))
        cand.path, cand.verdict = e.path, e.verdict
        cand.message = f"from run {e.from_run}, candidate {e.from_index}"

    def _on_remembered_start(self, e: Any) -> None:
        cand = self.candidates.setdefault(0, Candidate(index=0, round=0))
        cand.path = e.path
        cand.message = f"remembered: run {e.from_run} candidate {e.from_index} on {e.machine} ({e.outcome_then})"

    def _on_memory_recalled(self, e: Any) -> None:
        refs = ", ".join(str(i.get("ref")) for i in e.items[:8])
        self._note(f"memory: {len(e.items)} item(s) recalled: {refs}")

    def _on_run_finished(self, e: Any) -> None:
        self.stop_reason = e.stop_reason
        if e.best_index is not None:
            self.best_index = e.best_index
        failed = e.stop_reason.startswith("interrupted")
        for step in self.steps:
            step.streams.clear()
            if step.status == "running":
                step.status = "failed" if failed else "skipped"
                if failed:
                    step.detail.append(f"the run stopped here: {e.stop_reason}")
        if e.stop_reason.startswith("interrupted"):
            self.status = "failed"
            self.notes.append(f"the run stopped: {e.stop_reason}")
        elif e.stop_reason.startswith(("paused", "left by the user")):
            self.status = "stopped"
        else:
            self.status = "finished"
            self.notes.append(f"finished: {e.stop_reason}")


def _num(value: float | None) -> str:
    return "∞" if value is None else f"{value:g}"


def _k(value: float | None) -> str:
    if value is None:
        return "∞"
    return f"{value / 1e6:.1f}M" if value >= 1e6 else f"{value / 1e3:.1f}k" if value >= 1e3 else f"{value:.0f}"


def _money(value: float | None) -> str:
    return "∞" if value is None else f"${value:.0f}"


def _dur(value: float | None) -> str:
    if value is None:
        return "∞"
    seconds = int(value)
    if seconds >= 3600:
        return f"{seconds // 3600}h" + (f"{seconds % 3600 // 60:02d}m" if seconds % 3600 else "")
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
