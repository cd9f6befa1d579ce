"""What every node shares: prompt templates, calling a role's model with usage accounting, and
short renderings of candidates for prompts (digests, never transcripts, so prompts stay bounded)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from string import Template
from typing import TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from kernelwright.agent import llm
from kernelwright.agent.configuration import AgentConfig, Role
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import StepStarted, UsageUpdated
from kernelwright.agent.state import AgentState, CandidateRecord
from kernelwright.problems import Problem, resolve_problem
from kernelwright.tools.problem import problem_brief

PROMPTS = Path(__file__).parent / "prompts"
T = TypeVar("T", bound=BaseModel)


@cache
def template(name: str) -> Template:
    return Template((PROMPTS / f"{name}.md").read_text())


def messages(role: Role, **values: object) -> list[BaseMessage]:
    return [
        SystemMessage(template("system").safe_substitute(role=role)),
        HumanMessage(template(role).safe_substitute({k: str(v) for k, v in values.items()})),
    ]


@cache
def problem_of(name: str) -> Problem:
    return resolve_problem(name)


@cache
def brief(name: str, size: str) -> str:
    return problem_brief(problem_of(name), size)


def started(deps: Deps, state: AgentState, step: str) -> None:
    deps.events.round = state.get("round", 0)
    deps.events.emit(StepStarted(step=step))


def _account(reply: AIMessage | None, role: Role, config: AgentConfig, deps: Deps) -> dict[str, float]:
    usage = llm.usage_of(reply)
    cost = usage.cost(config)
    total = usage.input_tokens + usage.output_tokens
    deps.events.emit(
        UsageUpdated(
            role=role,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=total,
            cost_usd=cost,
            estimated=usage.estimated,
        )
    )
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": total,
        "cost_usd": cost,
        f"calls.{role}": 1,
    }


def ask(role: Role, prompt: list[BaseMessage], config: AgentConfig, deps: Deps) -> tuple[str, dict[str, float]]:
    reply = llm.call_llm(deps.models[role], prompt, config, role)
    return str(reply.content), _account(reply, role, config, deps)


def ask_structured(
    role: Role, prompt: list[BaseMessage], schema: type[T], config: AgentConfig, deps: Deps
) -> tuple[T | None, str, dict[str, float]]:
    parsed, raw = llm.call_structured(deps.models[role], prompt, schema, config, role)
    return parsed, str(raw.content) if raw is not None else "", _account(raw, role, config, deps)


def speedup_text(candidate: CandidateRecord) -> str:
    parts = [
        f"{s['ratio']:.2f}x vs {name} [CI {s['ci_low']:.2f}-{s['ci_high']:.2f}]"
        for name, s in candidate["speedups"].items()
    ]
    return ", ".join(parts) or "not timed"


def describe(candidate: CandidateRecord | None) -> str:
    if candidate is None:
        return "(none)"
    reason = f" ({candidate['reason']})" if candidate["reason"] else ""
    text = f"candidate {candidate['index']}: {candidate['verdict']}{reason}"
    if candidate["verdict"] == "correct":
        text += f"; {speedup_text(candidate)}"
    elif candidate["message"]:
        text += f": {candidate['message']}"
    return text


def best_source(state: AgentState, limit: int = 6000) -> str:
    best = state.get("best")
    if best is None:
        return "(none yet)"
    source = Path(best["path"]).read_text()
    return f"```python\n{source[:limit]}\n```"


def hardware_text(config: AgentConfig) -> str:
    from kernelwright.harness.environment import hardware_summary

    return json.dumps(hardware_summary(config.device))


def tail(items: list[str], count: int) -> str:
    return "\n".join(items[-count:]) if items else "(none)"
