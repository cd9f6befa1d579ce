"""Planner: reads the problem, the machine, the best result, summaries of earlier rounds and what
memory recalls from other runs (each item with why it was retrieved), and writes a short plan
with the speedup it expects. It is also where the loop stops: budgets and
acceptance are checked here, in code, before any tokens are spent.

With `--ideas N` it writes N ideas, idea i for parent i of `parents.choose`; once the run has
correct candidates to combine, an idea may also name up to `MAX_ALSO` of them whose technique it
takes ("also"), kept only where they are correct candidates of this run other than its parent."""

from __future__ import annotations

import time
from string import Template
from typing import Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import Command
from pydantic import BaseModel, Field

from kernelwright.agent import budget, parents, remember
from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import PlanWritten
from kernelwright.agent.nodes import context
from kernelwright.agent.nodes.asking import ask_with_tools
from kernelwright.agent.nodes.common import (
    describe,
    messages,
    record_of,
    role_tools,
    started,
    stopped_by_user,
    tail,
)
from kernelwright.agent.problems import brief, problem_of
from kernelwright.agent.state import AgentState, CandidateRecord, IdeaRecord, add_usage
from kernelwright.agent.techniques import similar
from kernelwright.agent.tools import describe_tools
from kernelwright.harness.verdicts import Verdict


class Plan(BaseModel):
    plan: str = Field(description="What to change in the kernel and why, at most five sentences.")
    expected_speedup: float | None = Field(default=None, description="Expected speedup over the target baseline.")
    also: list[int] = Field(
        default_factory=list,
        description="Up to 2 other correct candidates whose technique the plan combines with its parent's "
        "(e.g. the tiling of one, the epilogue of another); [] for none.",
    )


class Ideas(BaseModel):
    """A round's distinct ideas (`--ideas N`): idea i starts from parent i of the prompt's list."""

    ideas: list[Plan] = Field(min_length=1, description="Distinct ideas, one per parent, in the parents' order.")


ONE_IDEA = (
    "Write the plan for round $round: what to change in the kernel and why, in at most five sentences,\n"
    'and the speedup over $target_baseline you expect. Answer as JSON: {"plan": "...", "expected_speedup": 1.2}'
)
N_IDEAS = (
    "Write $n distinct ideas for round $round, idea i for parent i of the list above: each what to change\n"
    "and why, in at most four sentences, with the speedup over $target_baseline you expect. Make them differ\n"
    "(another technique, another bottleneck), and do not repeat what the run already tried.\n"
    'Answer as JSON: {"ideas": [{"plan": "...", "expected_speedup": 1.2}, ...]} with $n ideas.'
)

ALSO = (
    "\nAn idea may combine its parent with up to $max_also other correct candidates (say the tiling of one\n"
    'and the epilogue of another): name them in "also": [3, 5] and say in the plan what each gives; the\n'
    "coder is shown their sources after the parent's."
)
MAX_ALSO = 2
"""Extra parents an idea may name: each costs the coder's prompt up to half a source."""


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


ABANDONED_LIKE = 0.6
"""A plan whose words overlap an abandoned plan's this much (Jaccard) is sent back once."""


def _plan(state: AgentState, cfg: AgentConfig, deps: Deps, round_: int, hints: list[str]) -> Command[Any]:
    started(deps, {**state, "round": round_}, "planner")
    measured: dict[str, Any] = {}
    if state.get("context") is None:  # once per run, kept in the state (a resume does not re-measure)
        measured["context"] = context.measure(cfg, deps)
        state = {**state, **measured}  # type: ignore[typeddict-item]
    choices = parents.choose(
        list(state.get("candidates", [])),
        cfg.ideas,
        seed=cfg.seed,
        round_=round_,
        origin=state.get("origin"),
        abandoned_parent=state.get("abandoned_parent"),
    )
    records = [record_of(state, c["index"]) for c in choices]
    start = records[0]
    tools = role_tools(state, cfg)
    combinable = _correct(state)
    answer = Template(
        (ONE_IDEA if cfg.ideas == 1 else N_IDEAS) + (ALSO if len(combinable) > 1 else "")
    ).safe_substitute(
        round=round_,
        n=cfg.ideas,
        target_baseline="torch.compile (eager where compile is unavailable)",
        max_also=MAX_ALSO,
    )
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
        start=_parents_text(state, choices, records),
        answer=answer,
        memory=remember.recall_text(cfg, deps),
        tools=describe_tools(tools),
        tool_rounds=cfg.tool_rounds,
        history=context.run_text(state, best=False),
        lessons=tail(state.get("lessons", []), 6),
        hints=tail(state.get("hints", []) + hints, 4),
        round=round_,
    )
    plans, usage = _ask(prompt, tools, cfg, deps)
    abandoned = state.get("abandoned") or []
    like = next((a for p in plans for a in abandoned if similar(a, p.plan) >= ABANDONED_LIKE), None)
    if like is not None:
        again = [
            *prompt,
            HumanMessage(
                f"That answer is too like a direction the reviewer abandoned ({like[:200]!r}). "
                "Propose different directions, as JSON."
            ),
        ]
        retried, more = _ask(again, [], cfg, deps)
        usage = add_usage(usage, more)
        plans = retried if any(p.plan for p in retried) else plans
    while len(plans) < cfg.ideas:  # fewer ideas than asked: the first again, for another parent
        plans.append(plans[0])
    ideas = []
    for p, c in zip(plans, choices, strict=False):
        idea = IdeaRecord(plan=p.plan, expected_speedup=p.expected_speedup, parent=c["index"], why=c["why"])
        also = checked_also(p.also, c["index"], combinable)
        if also:
            idea["also"] = also
        ideas.append(idea)
    text, expected = ideas[0]["plan"], ideas[0]["expected_speedup"]
    shown = (
        text + (f" (with {_also_names(ideas[0])})" if ideas[0].get("also") else "")
        if len(ideas) == 1
        else "\n".join(f"idea {i + 1} (from {_parent_name(d)}): {d['plan']}" for i, d in enumerate(ideas))
    )
    deps.events.emit(PlanWritten(plan=shown, expected_speedup=expected, hints=hints, round=round_))
    return Command(
        goto="coder",
        update={
            "round": round_,
            "plan": text,
            "plan_expected_speedup": expected,
            "ideas": ideas,
            "idea_log": [{"round": round_, "ideas": list(ideas)}],
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


def _ask(
    prompt: list[BaseMessage], tools: list[BaseTool], cfg: AgentConfig, deps: Deps
) -> tuple[list[Plan], dict[str, float]]:
    """The round's ideas (one for `--ideas 1`), never empty: an unparsable reply is the plan's text."""
    if cfg.ideas == 1:
        plan, raw, usage = ask_with_tools("planner", prompt, Plan, tools, cfg, deps)
        return [plan if plan is not None else Plan(plan=raw.strip()[:1500])], usage
    ideas, raw, usage = ask_with_tools("planner", prompt, Ideas, tools, cfg, deps)
    if ideas is None:
        return [Plan(plan=raw.strip()[:1500])], usage
    return list(ideas.ideas[: cfg.ideas]), usage


def _correct(state: AgentState) -> set[int]:
    """The run's correct candidates (the branch origin or remembered kernel too): what an idea may combine."""
    pool = [*state.get("candidates", []), *([origin] if (origin := state.get("origin")) else [])]
    return {c["index"] for c in pool if c["verdict"] == Verdict.CORRECT.value}


def checked_also(named: list[int], parent: int | None, correct: set[int]) -> list[int]:
    """The extra parents an idea named that it may have: correct candidates of this run other than
    its own parent, each once, in the order named, at most MAX_ALSO (the rest are dropped)."""
    kept: list[int] = []
    for index in named:
        if index in correct and index != parent and index not in kept:
            kept.append(index)
    return kept[:MAX_ALSO]


def _also_names(idea: IdeaRecord) -> str:
    return ", ".join(f"candidate {i}" for i in idea.get("also") or [])


def _parent_name(idea: IdeaRecord) -> str:
    name = "scratch" if idea["parent"] is None else f"candidate {idea['parent']}"
    return name + (f" with {_also_names(idea)}" if idea.get("also") else "")


def _parents_text(state: AgentState, choices: list[parents.ParentChoice], records: list[CandidateRecord | None]) -> str:
    """The round's parents for the planner, each with why it was chosen."""
    lines = []
    for number, (choice, record) in enumerate(zip(choices, records, strict=True), 1):
        note = ""
        if record is not None and record["index"] == 0:
            note = (
                " (remembered from an earlier run, re-evaluated here as candidate 0)"
                if state.get("remembered")
                else " (the candidate this run branched from)"
            )
        text = describe(record) + note + f" [{choice['why']}]"
        lines.append(text if len(choices) == 1 else f"{number}. {text}")
    return lines[0] if len(lines) == 1 else "\n" + "\n".join(lines)
