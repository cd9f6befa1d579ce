"""Calling a role's model from a node: usage accounting (an event and the state's counters per
call), plain and structured replies, and the planner's and reviewer's bounded tool-calling loop.
What the endpoint does (retries, streaming, refused parameters) is `agent/llm.py`'s."""

from __future__ import annotations

import json
from typing import TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from kernelwright.agent import llm
from kernelwright.agent.configuration import AgentConfig, Role
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import ToolCalled, UsageUpdated
from kernelwright.agent.state import add_usage
from kernelwright.agent.tools import run_tool_calls

T = TypeVar("T", bound=BaseModel)


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
