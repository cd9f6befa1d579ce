"""Calling a role's model from a node: one sample or several at once, plain and structured
replies, the planner's and reviewer's bounded tool-calling loop, and the accounting of every
request (an event and the state's counters, per role). What the endpoint does (streaming,
refused parameters, cut replies, prompts too long) is `agent/llm.py`'s; this module decides what
a node gets back and what the run's frontends are shown while it waits."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from kernelwright.agent import llm, sampling
from kernelwright.agent.configuration import AgentConfig, Role
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import LlmNote, TokensStreamed, ToolCalled, UsageUpdated
from kernelwright.agent.sampling import Sample
from kernelwright.agent.state import add_usage
from kernelwright.agent.tools import run_tool_calls
from kernelwright.errors import EnvironmentProblem

T = TypeVar("T", bound=BaseModel)
OnAnswer = Callable[[int, str], None]
"""Told of each reply as it arrives (its prompt's position, its text), while the others are still
awaited: the coder hands a usable draft to the evaluator to build ahead (`nodes/ahead.py`)."""
STREAM_EVENT_INTERVAL_S = 0.25
"""At most four TokensStreamed events a second per request: a live line, not a token log."""
LEFT_OUT = "characters left out here so that the prompt fits the model's context"


@dataclass(frozen=True)
class Answer:
    """One sample's reply, as a node uses it."""

    text: str
    """The reply's text ("" when `error`)."""
    usage: dict[str, float]
    """The state's usage counters for this sample (every request it took)."""
    cut: bool = False
    """finish_reason was "length" even after the one retry with more room: report "cut at
    max_tokens", never "no code block"."""
    error: str | None = None
    """This sample failed (one line); the step's other samples went on."""


class _Watch:
    """One request's watcher: throttled TokensStreamed events, and an LlmNote per mending."""

    def __init__(self, deps: Deps, role: Role, sample: int) -> None:
        self.deps, self.role, self.sample = deps, role, sample
        self.last = time.monotonic()

    def streamed(self, chars: int, tail: str) -> None:
        now = time.monotonic()
        if now - self.last < STREAM_EVENT_INTERVAL_S:
            return
        self.last = now
        self.deps.events.emit(
            TokensStreamed(
                role=self.role,
                sample=self.sample,
                chars=chars,
                tokens_so_far=math.ceil(chars / 4),
                preview_tail=tail,
            )
        )

    def noted(self, what: str, detail: str) -> None:
        self.deps.events.emit(LlmNote(role=self.role, sample=self.sample, what=what, detail=detail))  # type: ignore[arg-type]


def shorten_longest(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The default `compress`: the middle half of the longest human message left out (at line
    breaks where there are some), with a marker saying how much; the other messages as they were.
    Unchanged when no human message is long enough to matter."""
    sizes = [
        (len(m.content), i)
        for i, m in enumerate(messages)
        if isinstance(m, HumanMessage) and isinstance(m.content, str)
    ]
    if not sizes or max(sizes)[0] < 400:
        return messages
    length, index = max(sizes)
    text = str(messages[index].content)
    quarter, eighth = length // 4, length // 8
    head_end = text.rfind("\n", eighth, quarter)
    head_end = head_end if head_end >= 0 else quarter
    tail_start = text.find("\n", length - quarter, length - eighth)
    tail_start = tail_start + 1 if tail_start >= 0 else length - quarter
    left_out = tail_start - head_end
    shorter = f"{text[:head_end]}\n[... {left_out:,} {LEFT_OUT} ...]\n{text[tail_start:]}"
    out = list(messages)
    out[index] = messages[index].model_copy(update={"content": shorter})
    return out


def _account(
    outcome: llm.Outcome,
    role: Role,
    config: AgentConfig,
    deps: Deps,
    sample: int = 0,
    base: BaseChatModel | None = None,
) -> dict[str, float]:
    """An event per reply received (with the temperature it was drawn at) and the state's counters
    for all of them (a reply cut and asked again was billed too); `calls.<role>` counts the requests
    sent. `base`: the role's model the call's own was made from (a sample at its scheduled
    temperature), which the role keeps, less any parameter the endpoint refused."""
    price = config.price_for(role)
    temperature = getattr(outcome.model, "temperature", None)
    usage: dict[str, float] = {}
    for reply in outcome.replies:
        used = reply.usage
        cost = used.cost(price)
        deps.events.emit(
            UsageUpdated(
                role=role,
                input_tokens=used.input_tokens,
                output_tokens=used.output_tokens,
                total_tokens=used.total_tokens,
                cost_usd=cost,
                estimated=used.estimated,
                cached_tokens=used.cached_tokens,
                reasoning_tokens=used.reasoning_tokens,
                sample=sample,
                temperature=temperature if isinstance(temperature, int | float) else None,
            )
        )
        usage = add_usage(usage, used.counters(role, price))
    usage[f"calls.{role}"] = float(outcome.requests)
    # A parameter the model refused stays left out for the rest of the run.
    deps.models[role] = sampling.as_role_model(outcome.model, base) if base is not None else outcome.model
    return usage


async def _ask_all(
    role: Role,
    prompts: list[list[BaseMessage]],
    samples: Sequence[Sample | None],
    config: AgentConfig,
    deps: Deps,
    compress: llm.Compress,
    on_answer: OnAnswer | None = None,
) -> list[llm.Outcome | BaseException]:
    model = deps.models[role]
    numbered = len(prompts) > 1

    async def told(index: int, call: Awaitable[llm.Outcome]) -> llm.Outcome:
        outcome = await call
        if on_answer is not None:
            on_answer(index, outcome.reply.message.text)
        return outcome

    calls = [
        llm.acall(
            sampling.at_temperature(model, sample.temperature) if sample is not None else model,
            prompt,
            config,
            role,
            compress=compress,
            watch=_Watch(deps, role, i + 1 if numbered else 0),
            metadata=sampling.metadata_of(sample),
        )
        for i, (prompt, sample) in enumerate(zip(prompts, samples, strict=True))
    ]
    return await asyncio.gather(*(told(i, call) for i, call in enumerate(calls)), return_exceptions=True)


def ask_many(
    role: Role,
    prompts: list[list[BaseMessage]],
    config: AgentConfig,
    deps: Deps,
    *,
    compress: llm.Compress | None = None,
    samples: Sequence[Sample] | None = None,
    on_answer: OnAnswer | None = None,
) -> list[Answer]:
    """One reply per prompt, all requests in flight at once, in the prompts' order. A sample that
    fails (an API error after retries, a timeout, a prompt too long) is an `Answer` with `error`
    and the others go on; when every sample fails, the first one's EnvironmentProblem ends the step.
    Anything else raised (a bug, a scripted run leaving its script) is raised as it is.

    `samples` (one per prompt) names each request (its key goes in the request's metadata, which
    only callbacks and the scripted model read) and the temperature it is drawn at (`sampling.py`).
    `on_answer(i, text)` hears of prompt i's reply as soon as it arrives, on the LLM loop's thread,
    while the other requests go on: it must not block (nor raise: what it raises is that sample's
    failure, a bug raised here)."""
    if samples is not None and len(samples) != len(prompts):
        raise ValueError(f"{len(samples)} samples for {len(prompts)} prompts")
    base = deps.models[role]
    named: Sequence[Sample | None] = samples if samples is not None else [None] * len(prompts)
    results = llm.run_sync(_ask_all(role, prompts, named, config, deps, compress or shorten_longest, on_answer))
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, EnvironmentProblem):
            raise result
    problems = [r for r in results if isinstance(r, EnvironmentProblem)]
    if problems and len(problems) == len(results):
        raise problems[0]
    answers = []
    for sample, result in enumerate(results, start=1 if len(results) > 1 else 0):
        if isinstance(result, llm.Outcome):
            usage = _account(result, role, config, deps, sample, base)
            answers.append(Answer(result.reply.message.text, usage, cut=result.cut))
        else:
            line = result.message if isinstance(result, EnvironmentProblem) else str(result)  # the run goes on: no hint
            deps.events.emit(LlmNote(role=role, sample=sample, what="sample_failed", detail=line))
            answers.append(Answer("", {f"calls.{role}": 1.0}, error=line))
    return answers


def ask(
    role: Role, prompt: list[BaseMessage], config: AgentConfig, deps: Deps, *, compress: llm.Compress | None = None
) -> Answer:
    """One reply (its failure raised: `error` is always None here)."""
    [answer] = ask_many(role, [prompt], config, deps, compress=compress)
    return answer


def ask_structured(
    role: Role,
    prompt: list[BaseMessage],
    schema: type[T],
    config: AgentConfig,
    deps: Deps,
    *,
    compress: llm.Compress | None = None,
) -> tuple[T | None, str, dict[str, float]]:
    parsed, outcome = llm.run_sync(
        llm.acall_structured(
            deps.models[role],
            prompt,
            schema,
            config,
            role,
            compress=compress or shorten_longest,
            watch=_Watch(deps, role, 0),
        )
    )
    return parsed, outcome.reply.message.text, _account(outcome, role, config, deps)


def ask_with_tools(
    role: Role,
    prompt: list[BaseMessage],
    schema: type[T],
    tools: list[BaseTool],
    config: AgentConfig,
    deps: Deps,
    *,
    compress: llm.Compress | None = None,
) -> tuple[T | None, str, dict[str, float]]:
    """A structured answer, after at most `config.tool_rounds` rounds of tool calls.

    With function calling the answer schema is offered beside the tools, so a model that needs no
    tool answers in one call; otherwise a reply without tool calls is parsed as JSON. When the
    model keeps calling tools, or answers in prose, one last structured call (without tools) asks
    for the answer. Each call is accounted and streamed; each tool call is an event."""
    if not tools:
        return ask_structured(role, prompt, schema, config, deps, compress=compress)
    offered: list[BaseTool | type[BaseModel]] = (
        [*tools, schema] if config.structured_method == "function_calling" else [*tools]
    )
    history = list(prompt)
    usage: dict[str, float] = {}
    for _ in range(config.tool_rounds):
        outcome = llm.call(
            deps.models[role],
            history,
            config,
            role,
            bind=lambda m: m.bind_tools(offered),
            compress=compress or shorten_longest,
            watch=_Watch(deps, role, 0),
        )
        usage = add_usage(usage, _account(outcome, role, config, deps))
        reply = outcome.reply.message
        answer = next((c for c in reply.tool_calls if c["name"] == schema.__name__), None)
        if answer is not None:
            try:
                return schema.model_validate(answer["args"]), json.dumps(answer["args"]), usage
            except ValidationError:
                break  # the forced structured call below gets it right or says why
        if not reply.tool_calls:
            parsed = llm.parse_json_reply(reply.text, schema)
            if parsed is not None:
                return parsed, reply.text, usage
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
    parsed, raw, used = ask_structured(role, history, schema, config, deps, compress=compress)
    return parsed, raw, add_usage(usage, used)
