"""Coder: turns the plan into a candidate file, or repairs its own failed draft.

On a new idea the prompt's base is the parent (the round's starting point); on a repair turn it is
the coder's own draft that failed, in full, with the harness's feedback mapped onto it
(`feedback.py`) and what the draft changed from its parent. The reply is a whole file or
SEARCH/REPLACE edits to the base (`edits.py`), checked with tree-sitter before anything is built;
a reply without usable code (no code, an edit that does not apply, a reply cut at max_tokens) goes
back to the coder with the reason, a bounded number of times. The prompt also carries the machine,
the times and the speed of light (`context.py`), the rules, and how candidates are written in the
run's backend, with one example each (CUDA, Triton, CPU C++).

An idea may name other parents to combine with its own (`IdeaRecord.also`: "the tiling of 3 with
the epilogue of 5"): their sources follow the base, each clipped to `ALSO_SOURCE_CHARS` with a
marker, on the idea's first turn (a repair's base is the draft that already combined them). With
`--width K` each of an idea's K requests is named by its `SampleKey` and drawn at its temperature
from `sampling.temperature_schedule`. Each reply with usable code is handed to the evaluator to
build as soon as it arrives, while the others are awaited (`ahead.py`)."""

from __future__ import annotations

import difflib
from functools import cache
from pathlib import Path
from typing import Literal

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, interrupt

from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import CoderRetry
from kernelwright.agent.nodes import context
from kernelwright.agent.nodes.ahead import build_ahead_hook
from kernelwright.agent.nodes.asking import ask_many
from kernelwright.agent.nodes.common import (
    PROMPTS,
    describe,
    messages,
    record_of,
    started,
    starting_point,
    stopped_by_user,
)
from kernelwright.agent.nodes.edits import read_reply
from kernelwright.agent.problems import brief, problem_of
from kernelwright.agent.sampling import Sample, SampleKey, temperature_schedule
from kernelwright.agent.state import AgentState, CandidateRecord, IdeaRecord, add_usage

_SOLUTIONS = Path(__file__).resolve().parents[2] / "problems" / "solutions"
EXAMPLES = {
    "cpp": _SOLUTIONS / "relu" / "cpp_fast.py",
    "cuda": _SOLUTIONS / "relu" / "cuda_fast.py",
    "triton": _SOLUTIONS / "adversarial" / "cuda" / "triton_correct_relu.py",
}
"""One example per backend: ReLU, each judged correct by the harness's own oracle runs."""
DIFF_CHARS = 6_000
ALSO_SOURCE_CHARS = context.SOURCE_CHARS // 2
"""Each extra parent's source in the coder's prompt, at most: two of them cost one more full source."""


@cache
def example(backend: str) -> str:
    return EXAMPLES[str(backend)].read_text()


@cache
def conventions(backend: str) -> str:
    return (PROMPTS / f"backend_{backend}.md").read_text().strip()


def extract_code(reply: str, base: str | None = None) -> tuple[str | None, str]:
    """(the candidate source, or None with the reason it is unusable)."""
    drafted = read_reply(reply, base)
    return drafted.source, drafted.why


def _diff(parent: str, draft: str, parent_index: int) -> str:
    lines = difflib.unified_diff(
        parent.splitlines(keepends=True),
        draft.splitlines(keepends=True),
        fromfile=f"candidate {parent_index} (parent)",
        tofile="your draft",
        n=2,
    )
    text = "".join(lines)
    return context.clip(text or "(no change)\n", DIFF_CHARS, what="the diff", page="the draft above is whole")


def _base(state: AgentState, parent: CandidateRecord | None, repairing: bool) -> tuple[str, str, str, str, str | None]:
    """(title, name, base shown, repair section, base source) for this coder turn."""
    repair = state.get("repair") if repairing else None
    if repair is not None:
        draft = Path(repair["path"]).read_text()
        record: CandidateRecord | None = next(
            (c for c in state.get("candidates", []) if c["index"] == repair["index"]), None
        )
        shown = (
            context.source_text(record)
            if record
            else context.clip(draft, context.SOURCE_CHARS, what="the draft", page="")
        )
        section = f"## What the harness said about your draft (candidate {repair['index']})\n{repair['feedback']}\n"
        if parent is not None:
            section += (
                f"\n## What your draft changed from its parent (candidate {parent['index']})\n"
                f"```diff\n{_diff(Path(parent['path']).read_text(), draft, parent['index'])}```\n"
            )
        title = f"Your draft (candidate {repair['index']}) failed: repair it (the base for edits)"
        return title, "draft", f"```python\n{shown}```", section, draft
    if parent is None:
        return "Starting point", "starting point", "(none yet: write the file from scratch)", "", None
    title = f"Starting point (the base for edits): {describe(parent)}"
    return title, "starting point", f"```python\n{context.source_text(parent)}```", "", Path(parent["path"]).read_text()


def round_ideas(state: AgentState) -> list[IdeaRecord]:
    """This round's ideas; a state from before `ideas` existed has one, from its start."""
    ideas = state.get("ideas")
    if ideas:
        return list(ideas)
    start = state.get("start") or starting_point(state)
    plan = state.get("plan", "")
    return [IdeaRecord(plan=plan, expected_speedup=None, parent=start["index"] if start else None, why="")]


def also_text(also: list[CandidateRecord]) -> str:
    """The extra parents an idea combines with its base, each source clipped (`ALSO_SOURCE_CHARS`)."""
    if not also:
        return ""
    names = ", ".join(f"candidate {r['index']}" for r in also)
    parts = [
        f"# Also combine: {names}\n"
        "The plan takes something from each of these (it says what); your edits still apply to the base above."
    ]
    for record in also:
        parts.append(f"## {describe(record)}\n```python\n{context.source_text(record, ALSO_SOURCE_CHARS)}```")
    return "\n\n".join(parts) + "\n"


def prompt_for(
    state: AgentState,
    cfg: AgentConfig,
    plan: str,
    parent: CandidateRecord | None = None,
    *,
    repairing: bool = False,
    also: list[CandidateRecord] | None = None,
) -> tuple[list[BaseMessage], str | None]:
    """The coder's prompt for one idea (its plan, its parent and any extra parents it combines) or
    for the repair of a failed draft, and the base its edits apply to."""
    title, name, base, repair, base_source = _base(state, parent, repairing)
    feedback = state.get("coder_feedback") or ""
    prompt = messages(
        "coder",
        plan=plan,
        brief=brief(cfg.problem, cfg.size),
        reference=problem_of(cfg.problem).source,
        machine=context.machine_text(state),
        times=context.times_text(state, parent),
        digest=context.digest_text(state, parent),
        rules=context.rules_text(cfg),
        backend=cfg.backend,
        conventions=conventions(cfg.backend),
        example=example(cfg.backend),
        run=context.run_text(state),
        base_title=title,
        base_name=name,
        base=base,
        also="" if repairing else also_text(also or []),
        repair=repair,
        feedback=f"\n# About your last reply\n{feedback}" if feedback else "",
    )
    return prompt, base_source


def coder(state: AgentState, config: RunnableConfig) -> Command[Literal["coder", "evaluate", "reviewer", "__end__"]]:
    cfg, deps = AgentConfig.from_runnable_config(config), Deps.from_runnable_config(config)
    halt = stopped_by_user(state, deps)
    if halt is not None:
        return halt
    plan_update: dict[str, object] = {}
    wants_approval = cfg.approve_plans or (deps.control is not None and deps.control.approval)
    if wants_approval and state.get("attempt", 0) == 0 and state.get("no_code_replies", 0) == 0:
        # Resumed with Command(resume=TEXT): TEXT replaces the plan; an empty answer approves it.
        answer = interrupt({"step": "approve_plan", "round": state.get("round", 0), "plan": state.get("plan", "")})
        if isinstance(answer, str) and answer.strip():
            plan_update["plan"] = answer.strip()
    started(deps, state, "coder")
    ideas = round_ideas(state)
    if plan_update.get("plan"):
        ideas[0] = IdeaRecord(**{**ideas[0], "plan": str(plan_update["plan"])})
        plan_update["ideas"] = ideas
    repair = state.get("repair")
    # One prompt per idea (its plan, its parent as the base), or the repaired draft's idea alone.
    turns = [repair.get("idea", 0)] if repair is not None else list(range(len(ideas)))
    turn = state.get("attempt", 0) + state.get("no_code_replies", 0) + 1  # each coder turn adds one to either
    schedule = temperature_schedule(cfg.role("coder").temperature, cfg.width, cfg.temperature_schedule)
    prompts = []
    samples = []
    for number in turns:
        idea = ideas[min(number, len(ideas) - 1)]
        extra = [r for i in idea.get("also") or [] if (r := record_of(state, i)) is not None]
        prompt, base = prompt_for(
            state, cfg, idea["plan"], record_of(state, idea["parent"]), repairing=repair is not None, also=extra
        )
        for k, temperature in enumerate(schedule):  # --width K: K samples per idea
            prompts.append((number, prompt, base))
            samples.append(Sample(SampleKey(state.get("round", 0), number + 1, k + 1, turn), temperature))
    sources: list[str] = []
    draft_ideas: list[int] = []
    whys: list[str] = []
    usage: dict[str, float] = {}
    # all at once; each usable reply starts building as it arrives (`ahead.py`)
    on_answer = build_ahead_hook(cfg, deps, [base for _, _, base in prompts])
    answers = ask_many("coder", [prompt for _, prompt, _ in prompts], cfg, deps, samples=samples, on_answer=on_answer)
    for (number, _, base), answer in zip(prompts, answers, strict=True):
        usage = add_usage(usage, answer.usage)
        if answer.error is not None:  # a failed sample never holds the step: the others go on
            whys.append(f"the request failed: {answer.error}")
            continue
        source, why = extract_code(answer.text, base)
        if source is not None:
            sources.append(source)
            draft_ideas.append(number)
        elif answer.cut:
            whys.append(
                f"the reply was cut at the max_tokens limit, even after a retry with more room ({why}); "
                "write a shorter file, or edits"
            )
        else:
            whys.append(why)
    if sources:
        return Command(
            goto="evaluate",
            update={
                "drafts": sources,
                "draft_ideas": draft_ideas,
                "attempt": state.get("attempt", 0) + 1,
                "usage": usage,
                **plan_update,
            },
        )
    why = whys[0]
    misses = state.get("no_code_replies", 0) + 1
    deps.events.emit(CoderRetry(why=why))
    if misses > cfg.no_code_retries:
        note = f"the coder gave no usable code {misses} times ({why})"
        return Command(goto="reviewer", update={"no_code_replies": misses, "coder_feedback": note, "usage": usage})
    feedback = f"Your last reply was unusable: {why}. Reply with the complete file in one ```python block, or with edits that apply."
    return Command(goto="coder", update={"no_code_replies": misses, "coder_feedback": feedback, "usage": usage})
