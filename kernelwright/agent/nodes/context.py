"""What the planner and the coder are told about this machine and this problem's room to improve.

Worked out once per run (the first round) and kept in the state, so a resumed run neither
re-measures nor changes what its prompts said:
- the hardware block (`hardware_specs.brief`): what matters for writing a fast kernel here;
- the speed of light (`profiler.speed_of_light`): the roofline's floor for this problem on this
  device, each ceiling said to come from the spec table or to be measured;
- the reference's absolute times under eager and torch.compile: the medians the evaluator timed in
  the reference's own process (the same figures every candidate is compared with), when the
  evaluator can give them before any candidate (`baseline_ms`).

Each round adds the parent's time, its profile digest and how far it is from the speed of light.
Also here: the policy in force and the registry's rejection reasons, one short block, and how
sources are shown in full up to a documented budget with a marker for what is left out.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Deps
from kernelwright.agent.problems import problem_of
from kernelwright.agent.state import AgentState, CandidateRecord
from kernelwright.harness.reasons import POLICIES, REASONS
from kernelwright.harness.verdicts import Verdict

log = logging.getLogger(__name__)

SOURCE_CHARS = 24_000
"""A source is shown whole in a prompt up to this many characters (about 6k tokens); beyond it, its
head and tail with a marker naming what was left out and the tool that pages it."""
DIGEST_CHARS = 2_500
"""The parent's profile digest in the coder's prompt, at most (a marker says when it is cut)."""


def clip(text: str, limit: int, *, what: str, page: str) -> str:
    """`text` whole if it fits in `limit` characters, else its head and tail with a marker naming
    the characters and lines left out and how to read them (`page`)."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-(limit // 3) :]
    head = head[: head.rfind("\n") + 1] or head
    tail = tail[tail.find("\n") + 1 :] if "\n" in tail else tail
    first = head.count("\n") + 1
    last = text.count("\n") + 1 - tail.count("\n")
    left = len(text) - len(head) - len(tail)
    return f"{head}[... {left} characters of {what} left out here (lines {first}-{last}): {page} ...]\n{tail}"


def source_text(record: CandidateRecord, limit: int = SOURCE_CHARS) -> str:
    source = Path(record["path"]).read_text()
    return clip(
        source,
        limit,
        what=f"candidate {record['index']}",
        page=f"read_candidate({record['index']}, offset=N) pages it",
    )


def measure(cfg: AgentConfig, deps: Deps) -> dict[str, Any]:
    """The run's context, measured once: hardware block, speed of light, the baselines' medians."""
    from kernelwright.hardware_specs.brief import hardware_brief
    from kernelwright.harness.workers import live
    from kernelwright.profiler.speed_of_light import speed_of_light

    context: dict[str, Any] = {"hardware": "", "speed_of_light": "", "sol_s": None, "baseline_ms": {}, "notes": []}
    timed = getattr(deps.evaluator, "baseline_ms", None)
    if callable(timed) and cfg.timing:  # first: it waits for the reference and its timed baselines
        try:
            context["baseline_ms"] = {str(k): float(v) for k, v in timed().items()}
        except Exception as exc:
            log.debug("baseline times failed", exc_info=True)
            context["notes"].append(f"the reference's times are unavailable before the first candidate: {exc}")
    # A CPU's ceilings are measured here: the session's workers (the spare warming up) are paused
    # meanwhile, as for a timing phase, or they would be read low. Nothing is timed now.
    quiet = live.quiet(keep=None) if str(cfg.device) == "cpu" else contextlib.nullcontext()
    with quiet:
        try:
            context["hardware"] = hardware_brief(str(cfg.device))
        except Exception as exc:  # a machine we cannot read is no reason to stop the run
            log.debug("hardware brief failed", exc_info=True)
            context["notes"].append(f"hardware block unavailable: {exc}")
        try:
            sol = speed_of_light(problem_of(cfg.problem), str(cfg.size), str(cfg.device))
            context["speed_of_light"], context["sol_s"] = sol.text(), sol.time_s
        except Exception as exc:
            log.debug("speed of light failed", exc_info=True)
            context["notes"].append(f"speed of light unavailable: {exc}")
    return context


def _ms(value: float) -> str:
    return f"{value * 1e3:.1f} µs" if value < 1 else f"{value:.3f} ms"


def times_text(state: AgentState, parent: CandidateRecord | None) -> str:
    """Absolute times: the reference under eager and torch.compile, the parent, the speed of light."""
    context = state.get("context") or {}
    baselines: dict[str, float] = dict(context.get("baseline_ms") or {})
    lines = []
    if baselines:
        shown = ", ".join(f"{name} {_ms(ms)}" for name, ms in baselines.items())
        lines.append(f"Reference on this machine (medians, timed once at the start of the run): {shown}.")
    else:
        lines.append("Reference times: not measured before the first candidate (they come with its result).")
    sol_s = context.get("sol_s")
    if parent is not None and parent["verdict"] == Verdict.CORRECT.value:
        medians = [float(m) for s in parent["speedups"].values() if (m := s.get("candidate_median_ms"))]
        if medians:
            ms = medians[0]
            text = f"Parent (candidate {parent['index']}): {_ms(ms)}"
            ratios = ", ".join(f"{s['ratio']:.2f}x vs {name}" for name, s in parent["speedups"].items())
            text += f" ({ratios})" if ratios else ""
            if sol_s:
                text += f"; {ms / 1e3 / sol_s:.1f}x the speed of light"
            lines.append(text + ".")
    if sol_s and baselines:
        room = min(baselines.values()) / 1e3 / sol_s
        if room < 1.0:  # nothing runs faster than the speed of light: a ceiling was read low
            lines.append(
                f"The faster baseline runs at {room:.2f}x the speed of light, faster than it: a ceiling above was "
                "measured low (a busy machine?), so do not trust the speed of light as a bound here."
            )
        else:
            lines.append(f"The faster baseline is at {room:.1f}x the speed of light: that is the room.")
    return "\n".join(lines)


def machine_text(state: AgentState) -> str:
    context = state.get("context") or {}
    parts = [context.get("hardware") or "(no hardware block)", context.get("speed_of_light") or ""]
    parts += [f"({note})" for note in context.get("notes") or []]
    return "\n".join(p for p in parts if p)


def _short(text: str, limit: int = 100) -> str:
    first = text.split(". ")[0].split(": ")[0]
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def rules_text(cfg: AgentConfig) -> str:
    """The policy in force and the registry's rejection reasons, one short block."""
    rejected = [
        f"- {info.code.value}: {_short(info.why)}"
        for info in REASONS.values()
        if info.verdict == Verdict.REJECTED and cfg.policy in info.policies and info.decides == "always"
    ]
    return (
        f"Policy in force: {cfg.policy} ({POLICIES[cfg.policy]}).\n"
        "The harness rejects, and never accepts, a candidate that does any of these "
        "(`kernelwright eval --explain CODE` says more):\n" + "\n".join(rejected)
    )


def digest_text(state: AgentState, record: CandidateRecord | None) -> str:
    if record is None:
        return "(no parent yet)"
    profile = (state.get("profiles") or {}).get(str(record["index"]))
    if profile is None or not profile.get("text"):
        note = profile.get("note") if profile else ""
        return f"(candidate {record['index']} has no profile{': ' + note if note else ''})"
    return clip(
        profile["text"],
        DIGEST_CHARS,
        what="the digest",
        page=f"profile_digest({record['index']}) shows it whole",
    )


ROUND_LINE_CHARS = 130
"""One round in the run's memory, at most (idea, outcome, why): every round is kept, so the
prompts' run section grows by one short line a round (the bounded-context benchmark holds it)."""
RECENT_ROUNDS = 5
"""The last rounds shown at full length; older ones are shown shorter (`OLD_ROUND_CHARS`)."""
OLD_ROUND_CHARS = 56


def round_line(round_: int, plan: str, outcome: str, decision: str, why: str) -> str:
    """One round, compressed: `rN: idea -> outcome | decision: why`, at most ROUND_LINE_CHARS."""
    idea = " ".join(plan.split())
    idea = idea.split(". ")[0]
    head = f"r{round_}: {_cut(idea, 60)} -> {_cut(outcome, 40)}"
    tail = f" | {decision}: {' '.join(why.split())}" if why or decision else ""
    return _cut(head + tail, ROUND_LINE_CHARS)


def _older(line: str) -> str:
    """An older round's line, shorter: the idea cut harder, the outcome kept (an abandoned
    direction is listed apart)."""
    head, _, tail = line.partition(" -> ")
    if not tail:
        return _cut(line, OLD_ROUND_CHARS)
    outcome = tail.partition(" | ")[0]
    return _cut(f"{_cut(head, 30)} -> {outcome}", OLD_ROUND_CHARS)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def outcome_short(record: CandidateRecord | None) -> str:
    """A candidate's outcome in a few words: `c4 correct 1.84x` (against the run's target
    baseline), `c5 rejected (side_stream)`."""
    if record is None:
        return "no usable code"
    if record["verdict"] == Verdict.CORRECT.value:
        baseline = record["target_baseline"]
        if baseline and baseline in record["speedups"]:
            return f"c{record['index']} correct {record['speedups'][baseline]['ratio']:.2f}x"
        return f"c{record['index']} correct (not timed)"
    reason = f" ({record['reason']})" if record["reason"] else ""
    return f"c{record['index']} {record['verdict']}{reason}"


def run_text(state: AgentState, *, best: bool = True) -> str:
    """The run so far: every round on one line, the directions abandoned, and (`best`; the
    planner's prompt has its own) the best candidates, whose sources `read_candidate` returns."""
    history = list(state.get("history") or [])
    older = len(history) - RECENT_ROUNDS
    lines = [_older(line) if i < older else line for i, line in enumerate(history)]
    if lines:
        lines.insert(0, "(a line a round: idea -> candidate verdict, speedup vs target baseline | review)")
    else:
        lines = ["(this is the first round)"]
    abandoned = state.get("abandoned") or []
    if abandoned:
        lines.append("Abandoned directions (do not propose them again): " + "; ".join(_cut(a, 90) for a in abandoned))
    correct = sorted(
        (c for c in state.get("candidates", []) if c["verdict"] == Verdict.CORRECT.value),
        key=lambda c: -(c["speedups"][c["target_baseline"]]["ci_low"] if c["target_baseline"] else 0.0),
    )[:3]
    if correct and best:
        shown = ", ".join(outcome_short(c).replace(" correct", "") for c in correct)
        lines.append(f"Best correct: {shown} (read_candidate(index) gives a source)")
    return "\n".join(lines)
