"""Coder: turns the plan into a complete ModelNew file. The code block is extracted and parsed
with tree-sitter before anything is built; a reply without usable code goes back to the coder
with the reason, a bounded number of times."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, interrupt

from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import CoderRetry
from kernelwright.agent.nodes.asking import ask
from kernelwright.agent.nodes.common import (
    best_source,
    messages,
    started,
    stopped_by_user,
    tail,
)
from kernelwright.agent.problems import brief, problem_of
from kernelwright.agent.state import AgentState, add_usage
from kernelwright.harness.checks.static.common import python_parser

_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
_SOLUTIONS = Path(__file__).resolve().parents[2] / "problems" / "solutions" / "relu"


@cache
def example(backend: str) -> str:
    name = "cpp_fast.py" if backend == "cpp" else "cuda_fast.py"
    return (_SOLUTIONS / name).read_text()


def extract_code(reply: str) -> tuple[str | None, str]:
    """(the candidate source, or None with the reason it is unusable)."""
    blocks = [b.strip() + "\n" for b in _BLOCK.findall(reply)]
    if not blocks:
        return None, "the reply had no ```python code block"
    source = next((b for b in reversed(blocks) if "ModelNew" in b), blocks[-1])
    tree = python_parser().parse(source.encode())
    if tree.root_node.has_error:
        line = _first_error_line(tree.root_node)
        return None, f"the code block is not valid Python (syntax error near line {line})"
    if not any(
        n.type == "class_definition"
        and (name := n.child_by_field_name("name")) is not None
        and name.text == b"ModelNew"
        for n in tree.root_node.children
    ):
        return None, "the code block defines no top-level `class ModelNew`"
    return source, ""


def _first_error_line(node) -> int:  # type: ignore[no-untyped-def]
    if node.type == "ERROR" or node.is_missing:
        return int(node.start_point[0]) + 1
    for child in node.children:
        if child.has_error:
            return _first_error_line(child)
    return int(node.start_point[0]) + 1


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
    prompt = messages(
        "coder",
        plan=plan_update.get("plan") or state.get("plan", ""),
        brief=brief(cfg.problem, cfg.size),
        reference=problem_of(cfg.problem).source,
        backend=cfg.backend,
        example=example(cfg.backend),
        best_source=best_source(state),
        previous=tail(state.get("history", []), 1),
        feedback=state.get("coder_feedback") or "(first attempt)",
    )
    sources: list[str] = []
    whys: list[str] = []
    usage: dict[str, float] = {}
    for _ in range(cfg.width):  # --width K: K samples of the same prompt, evaluated as one batch
        reply, used = ask("coder", prompt, cfg, deps)
        usage = add_usage(usage, used)
        source, why = extract_code(reply)
        if source is not None:
            sources.append(source)
        else:
            whys.append(why)
    if sources:
        return Command(
            goto="evaluate",
            update={"drafts": sources, "attempt": state.get("attempt", 0) + 1, "usage": usage, **plan_update},
        )
    why = whys[0]
    misses = state.get("no_code_replies", 0) + 1
    deps.events.emit(CoderRetry(why=why))
    if misses > cfg.no_code_retries:
        note = f"round {state.get('round', 0)}: the coder gave no usable code {misses} times ({why})"
        return Command(goto="reviewer", update={"no_code_replies": misses, "history": [note], "usage": usage})
    feedback = f"Your last reply was unusable: {why}. Reply with the complete file in one ```python block."
    return Command(goto="coder", update={"no_code_replies": misses, "coder_feedback": feedback, "usage": usage})
