"""Planner: reads the problem, the machine, the best result, summaries of earlier rounds and what
memory recalls from other runs (each item with why it was retrieved), and writes a short plan
with the speedup it expects. It is also where the loop stops: budgets and
acceptance are checked here, in code, before any tokens are spent."""

from __future__ import annotations

import re
import time
from typing import Any, Literal

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from pydantic import BaseModel, Field

from kernelwright.agent import budget, remember
from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import PlanWritten
from kernelwright.agent.nodes import context
from kernelwright.agent.nodes.asking import ask_with_tools
from kernelwright.agent.nodes.common import (
    describe,
    messages,
    role_tools,
    started,
    starting_point,
    stopped_by_user,
    tail,
)
from kernelwright.agent.problems import brief, problem_of
from kernelwright.agent.state import AgentState, add_usage
from kernelwright.agent.tools import describe_tools


class Plan(BaseModel):
    plan: str = Field(description="What to change in the kernel and why, at most five sentences.")
    expected_speedup: float | None = Field(default=None, description="Expected speedup over the target baseline.")


def planner(state: AgentState, config: RunnableConfig) -> Command[Literal["coder", "__end__"]]:
    cfg, deps = AgentConfig.from_runnable_config(config), Deps.from_runnable_config(config)
    halt = stopped_by_user(state, deps)
    if halt is not None:
        return halt
    stop = budget.stop_reason(state, cfg, deps.started)
    if stop is not None:
        # A starting point that already beats the target (a remembered or branched-from kernel,
        # re-evaluated here) is accepted before any tokens are spent.
        return Command(goto="__end__", update={"stop_reason": stop, "accepted": stop.startswith("accepted")})
    round_ = state.get("round", 0) + 1
    hints: list[str] = []
    while deps.hints:  # popleft: a hint typed while the planner reads them is kept for the next round
        hints.append(deps.hints.popleft())
    try:
        return _plan(state, cfg, deps, round_, hints)
    except BaseException:
        deps.hints.extendleft(reversed(hints))  # not in the state yet: a resumed run must still see them
        raise


def similar(a: str, b: str) -> float:
    """How alike two plans are: the Jaccard index of their word sets (words of 3+ letters)."""
    words_a, words_b = (set(re.findall(r"[a-z0-9_]{3,}", t.lower())) for t in (a, b))
    return len(words_a & words_b) / len(words_a | words_b) if words_a and words_b else 0.0


ABANDONED_LIKE = 0.6
"""A plan whose words overlap an abandoned plan's this much (Jaccard) is sent back once."""


def _plan(state: AgentState, cfg: AgentConfig, deps: Deps, round_: int, hints: list[str]) -> Command[Any]:
    started(deps, {**state, "round": round_}, "planner")
    measured: dict[str, Any] = {}
    if state.get("context") is None:  # once per run, kept in the state (a resume does not re-measure)
        measured["context"] = context.measure(cfg, deps)
        state = {**state, **measured}  # type: ignore[typeddict-item]
    start = starting_point(state)
    start_note = ""
    if start is not None and start["index"] == 0:
        start_note = (
            " (remembered from an earlier run, re-evaluated here as candidate 0)"
            if state.get("remembered")
            else " (the candidate this run branched from)"
        )
    tools = role_tools(state, cfg)
    prompt = messages(
        "planner",
        brief=brief(cfg.problem, cfg.size),
        reference=problem_of(cfg.problem).source,
        hardware=context.machine_text(state),
        times=context.times_text(state, start),
        backend=cfg.backend,
        target_baseline="torch.compile (eager where compile is unavailable)",
        target=f"{cfg.target:g}",
        best=describe(state.get("best")),
        start=describe(start) + start_note,
        memory=remember.recall_text(cfg, deps),
        tools=describe_tools(tools),
        tool_rounds=cfg.tool_rounds,
        history=context.run_text(state, best=False),
        lessons=tail(state.get("lessons", []), 6),
        hints=tail(state.get("hints", []) + hints, 4),
        round=round_,
    )
    plan, raw, usage = ask_with_tools("planner", prompt, Plan, tools, cfg, deps)
    text = plan.plan if plan is not None else raw.strip()[:1500]
    like = max(state.get("abandoned") or [], key=lambda a: similar(a, text), default=None)
    if like is not None and similar(like, text) >= ABANDONED_LIKE:
        again = [
            *prompt,
            HumanMessage(
                f"That plan is too like a direction the reviewer abandoned ({like[:200]!r}). "
                "Propose a different direction, as JSON."
            ),
        ]
        retried, raw, more = ask_with_tools("planner", again, Plan, [], cfg, deps)
        usage = add_usage(usage, more)
        plan = retried or plan
        text = plan.plan if plan is not None else raw.strip()[:1500]
    expected = plan.expected_speedup if plan is not None else None
    deps.events.emit(PlanWritten(plan=text, expected_speedup=expected, hints=hints, round=round_))
    return Command(
        goto="coder",
        update={
            "round": round_,
            "plan": text,
            "plan_expected_speedup": expected,
            "attempt": 0,
            "coder_feedback": "",
            "repair": None,
            "no_code_replies": 0,
            "elapsed_s": time.monotonic() - deps.started,
            **measured,
            "last_candidate": None,
            "start": start,
            "profile_note": "",
            "hints": hints,
            "usage": usage,
        },
    )
