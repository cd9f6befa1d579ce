"""Reviewer: a structured verdict on the round (iterate with feedback, or abandon the direction:
the plan is then recorded as abandoned, shown to the planner, and a plan too like it is sent back),
a one-line lesson (written to memory beside the round's candidates), and a plain explanation of
any hack the harness rejected. It decides nothing about acceptance: whether the run stops is
computed here in code, from the EvalResults."""

from __future__ import annotations

import time
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from pydantic import BaseModel, Field

from kernelwright.agent import budget, remember
from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import ReviewWritten
from kernelwright.agent.nodes import context
from kernelwright.agent.nodes.asking import ask_with_tools
from kernelwright.agent.nodes.common import describe, messages, role_tools, started, stopped_by_user
from kernelwright.agent.state import AgentState
from kernelwright.agent.tools import describe_tools


class Review(BaseModel):
    decision: Literal["iterate", "abandon"] = Field(description="Keep this direction, or try another.")
    feedback: str = Field(default="", description="What the next round should change, or why the hack failed.")
    lesson: str = Field(default="", description="One line worth remembering on similar problems.")


def outcome_text(state: AgentState) -> str:
    last = state.get("last_candidate")
    if last is None:
        why = state.get("coder_feedback") or "the coder gave no usable code"
        return f"No candidate was evaluated this round: {why}."
    text = describe(last)
    if last["verdict"] == "rejected":
        text += "\nThe harness REJECTED it as a reward hack or rule violation; it can never be accepted."
    others = [
        c for c in state.get("candidates", []) if c["round"] == state.get("round") and c["index"] != last["index"]
    ]
    if others:
        text += "\nOther attempts this round: " + "; ".join(describe(c) for c in others)
    return text


def reviewer(state: AgentState, config: RunnableConfig) -> Command[Literal["planner", "__end__"]]:
    cfg, deps = AgentConfig.from_runnable_config(config), Deps.from_runnable_config(config)
    halt = stopped_by_user(state, deps)
    if halt is not None:
        return halt
    started(deps, state, "reviewer")
    round_ = state.get("round", 0)
    outcome = outcome_text(state)
    tools = role_tools(state, cfg)
    ideas = state.get("ideas") or []
    plan_text = state.get("plan", "")
    if len(ideas) > 1:
        plan_text = "\n".join(
            f"idea {i} (from {'scratch' if d['parent'] is None else 'candidate ' + str(d['parent'])}): {d['plan']}"
            for i, d in enumerate(ideas, 1)
        )
    prompt = messages(
        "reviewer",
        round=round_,
        plan=plan_text,
        outcome=outcome,
        profile=state.get("profile_note") or "(no profile)",
        best=describe(state.get("best")),
        tools=describe_tools(tools),
        tool_rounds=cfg.tool_rounds,
    )
    review, raw, usage = ask_with_tools("reviewer", prompt, Review, tools, cfg, deps)
    if review is None:
        review = Review(decision="iterate", feedback=raw.strip()[:500], lesson="")
    deps.events.emit(ReviewWritten(decision=review.decision, lesson=review.lesson, feedback=review.feedback))
    this_round = [c["index"] for c in state.get("candidates", []) if c["round"] == round_]
    remember.annotate(cfg, deps, this_round, lesson=review.lesson)
    best = state.get("best")
    improved = best is not None and best["round"] == round_
    summary = _round_lines(state, round_, review)
    update = {
        "lessons": [review.lesson] if review.lesson else [],
        "history": summary,
        "elapsed_s": time.monotonic() - deps.started,
        "abandoned": [state.get("plan", "")] if review.decision == "abandon" and state.get("plan") else [],
        "abandoned_parent": _first_parent(state) if review.decision == "abandon" else None,
        "usage": usage,
        "rounds_without_improvement": 0 if improved else state.get("rounds_without_improvement", 0) + 1,
    }
    after: AgentState = {**state, **update, "usage": {**state.get("usage", {})}}  # type: ignore[typeddict-item]
    for key, value in usage.items():
        after["usage"][key] = after["usage"].get(key, 0.0) + value
    stop = budget.stop_reason(after, cfg, deps.started)
    if stop is not None:
        return Command(goto="__end__", update={**update, "stop_reason": stop, "accepted": stop.startswith("accepted")})
    return Command(goto="planner", update=update)


def _first_parent(state: AgentState) -> int | None:
    """The parent of the round's first idea: the direction an `abandon` leaves."""
    ideas = state.get("ideas") or []
    if ideas:
        return ideas[0]["parent"]
    start = state.get("start")
    return start["index"] if start else None


def _round_lines(state: AgentState, round_: int, review: Review) -> list[str]:
    """The round in the run's memory: one line, or with several ideas one line per idea (its
    plan and its best candidate), so the planner is told what every idea tried."""
    ideas = state.get("ideas") or []
    if len(ideas) <= 1:
        outcome = context.outcome_short(state.get("last_candidate"))
        return [context.round_line(round_, state.get("plan", ""), outcome, review.decision, review.feedback)]
    mine = [c for c in state.get("candidates", []) if c["round"] == round_]
    lines = []
    for number, idea in enumerate(ideas, 1):
        own = [c for c in mine if c.get("idea") == idea["plan"] and c["parent"] == idea["parent"]]
        correct = [c for c in own if c["verdict"] == "correct"]
        shown = max(correct, key=budget.score) if correct else (own[-1] if own else None)
        outcome = context.outcome_short(shown) if shown is not None else "no candidate"
        decision = review.decision if number == 1 else ""
        lines.append(
            context.round_line(
                round_, f"[{number}] {idea['plan']}", outcome, decision, review.feedback if number == 1 else ""
            )
        )
    return lines
