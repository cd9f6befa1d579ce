"""What every node shares: prompt templates, calling a role's model with usage accounting (and,
for the planner and reviewer, a bounded tool-calling loop), and short renderings of candidates for
prompts (digests, never transcripts, so prompts stay bounded)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from string import Template
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command
from pydantic import BaseModel, ValidationError

from kernelwright.agent import llm
from kernelwright.agent.configuration import AgentConfig, Role
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import StepStarted, ToolCalled, UsageUpdated
from kernelwright.agent.state import AgentState, CandidateRecord, add_usage
from kernelwright.agent.tools import make_tools, run_tool_calls

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


def stopped_by_user(state: AgentState, deps: Deps) -> Command[Any] | None:
    """Every node's first check: a person asked the run to stop (the TUI's "stop, keep the best").
    The best candidate so far stays; it counts as accepted only if it beats the target (in code)."""
    if deps.control is None or not deps.control.stop_requested:
        return None
    best = state.get("best")
    accepted = bool(best and best["beats_target"])
    kept = f"candidate {best['index']} is the best so far" if best else "no correct candidate yet"
    return Command(goto="__end__", update={"stop_reason": f"stopped by the user ({kept})", "accepted": accepted})


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


def role_tools(state: AgentState, config: AgentConfig) -> list[BaseTool]:
    """The planner's and reviewer's tools; none where replies are plain JSON (an endpoint without
    function calling) or tool rounds are off."""
    if config.structured_method == "plain_json" or config.tool_rounds == 0:
        return []
    return make_tools(state, config)


def ask_with_tools(
    role: Role, prompt: list[BaseMessage], schema: type[T], tools: list[BaseTool], config: AgentConfig, deps: Deps
) -> tuple[T | None, str, dict[str, float]]:
    """A structured answer, after at most `config.tool_rounds` rounds of tool calls.

    With function calling the answer schema is offered beside the tools, so a model that needs no
    tool answers in one call; otherwise a reply without tool calls is parsed as JSON. When the
    model keeps calling tools, or answers in prose, one last structured call (without tools) asks
    for the answer. Each call is accounted; each tool call is an event."""
    if not tools:
        return ask_structured(role, prompt, schema, config, deps)
    answer_tool = config.structured_method == "function_calling"
    bound = deps.models[role].bind_tools([*tools, schema] if answer_tool else tools)
    history = list(prompt)
    usage: dict[str, float] = {}
    for _ in range(config.tool_rounds):
        reply = llm.call_llm(bound, history, config, role)
        usage = add_usage(usage, _account(reply, role, config, deps))
        answer = next((c for c in reply.tool_calls if c["name"] == schema.__name__), None)
        if answer is not None:
            try:
                return schema.model_validate(answer["args"]), json.dumps(answer["args"]), usage
            except ValidationError:
                break  # the forced structured call below gets it right or says why
        if not reply.tool_calls:
            parsed = llm.parse_json_reply(str(reply.content), schema)
            if parsed is not None:
                return parsed, str(reply.content), usage
            history.append(reply)
            break
        history.append(reply)
        for message, args, cut in run_tool_calls(reply, tools, config.tool_result_chars):
            history.append(message)
            deps.events.emit(
                ToolCalled(
                    role=role, name=str(message.name), args=args, result=str(message.content)[:300], truncated=cut
                )
            )
    else:
        history.append(HumanMessage("You have used your tool calls for this step: answer now, as JSON."))
    parsed, raw, used = ask_structured(role, history, schema, config, deps)
    return parsed, raw, add_usage(usage, used)


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


def starting_point(state: AgentState) -> CandidateRecord | None:
    """What a round starts from: the best correct candidate so far, else the branch origin."""
    return state.get("best") or state.get("origin")


def best_source(state: AgentState, limit: int = 6000) -> str:
    start = state.get("start") or starting_point(state)
    if start is None:
        return "(none yet)"
    source = Path(start["path"]).read_text()
    return f"{describe(start)}\n```python\n{source[:limit]}\n```"


def hardware_text(config: AgentConfig) -> str:
    from kernelwright.harness.environment import hardware_summary

    return json.dumps(hardware_summary(config.device))


def tail(items: list[str], count: int) -> str:
    return "\n".join(items[-count:]) if items else "(none)"
