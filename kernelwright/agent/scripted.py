"""A scripted chat model: the LLM of the tests and of `kernelwright demo`, shipped in the package.

`ScriptedSession` holds a script per role (planner, coder, reviewer): the replies, in order.
`session.model(role)` is a LangChain `BaseChatModel` that answers with the role's next reply,
records every prompt it receives (`session.prompts[role]`), supports `bind_tools` (returns itself,
recording the tool names in `session.tools[role]`) and `with_structured_output` (a reply given as a
dict is validated into the schema), can call tools (a reply made with `tool_calls(...)` is an
AIMessage whose `tool_calls` the node runs), and reports
usage metadata with a documented estimate: tokens = ceil(characters / 4), the usual rule of thumb
for English and code with OpenAI-style tokenizers (no tokenizer can be downloaded offline).
A script that runs out raises `ScriptExhausted`, which names the role and the step.

Its async path streams: `astream` chooses the reply the moment it is called, before any await,
so requests sent together (`asyncio.gather`) get the script's replies in the order they were made,
whatever order they finish in; then it waits the reply's delay (`ScriptedSession.delay_s`, or
`slow(reply, seconds)` for one reply) and yields the reply in pieces, so concurrency and live
token counts are visible. `cut(text)` is a reply that ends at max_tokens (finish_reason "length").

A script may also key a reply to one coder sample: `keyed(round, idea, sample, reply, turn=1)` in
a role's list answers the request whose metadata names that `SampleKey` (`sampling.py`: the coder
names every request), whenever it comes, and nothing else; a request no keyed reply matches takes
the next ordered reply, so plain ordered scripts work as they always did. A keyed reply is a pure
function of its key: the same run gives each sample the same reply however its requests are
ordered or interleaved, and a resumed run that asks for a key again gets the same reply again.
(A resumed run skips as many ordered replies as its checkpoint counts requests of the role, keyed
ones included: key a role's replies all or none if its runs are resumed.)
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableMap
from pydantic import BaseModel, ConfigDict

from kernelwright.agent.sampling import SampleKey, key_of
from kernelwright.errors import ExitCode, KernelwrightError

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """The scripted model's token estimate: ceil(len(text) / 4)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class ScriptExhausted(KernelwrightError):
    """The scripted model was asked for more replies than its script has: the run diverged."""

    exit_code = ExitCode.NEEDS_ATTENTION
    title = "script ran out"


class ScriptDiverged(KernelwrightError):
    """The harness reached a verdict the script did not expect: the replies that follow would no
    longer make sense, so a scripted run stops here (its state is saved)."""

    exit_code = ExitCode.NEEDS_ATTENTION
    title = "diverged from the script"


class ScriptedFailure(Exception):
    """A reply that raises instead of answering (a scripted API error)."""


@dataclass(frozen=True)
class Slow:
    """A reply that takes `seconds` to come (after it is chosen): `slow(reply, 1.0)`."""

    reply: Any
    seconds: float


Reply = str | dict[str, Any] | AIMessage | BaseException | Callable[[list[BaseMessage]], str] | Slow
PIECE_CHARS = 40
"""The scripted model streams its reply in pieces of this many characters (about ten tokens)."""


def slow(reply: Reply, seconds: float) -> Slow:
    return Slow(reply, seconds)


@dataclass(frozen=True)
class Keyed:
    """A reply for one coder sample only (`keyed(...)`), chosen by the request's key, not its order."""

    key: SampleKey
    reply: Reply


def keyed(round_: int, idea: int, sample: int, reply: Reply, *, turn: int = 1) -> Keyed:
    """The reply to sample `sample` of idea `idea` in round `round_` (all from 1), on the round's
    coder turn `turn` (1: its first drafts; each repair or retry of the round the next)."""
    return Keyed(SampleKey(round_, idea, sample, turn), reply)


def cut(text: str) -> AIMessage:
    """A scripted reply cut at max_tokens: the text so far, finish_reason "length"."""
    return AIMessage(content=text, response_metadata={"finish_reason": "length"})


def tool_calls(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    """A scripted reply that calls tools: `tool_calls(("gpu_specs", {"question": "l2"}), ...)`."""
    return AIMessage(
        content="",
        tool_calls=[
            {"name": name, "args": args, "id": f"call_{i}", "type": "tool_call"} for i, (name, args) in enumerate(calls)
        ],
    )


@dataclass
class ScriptedSession:
    """The script of one run: replies per role, consumed in order (or chosen by key: `keyed`), and
    every prompt received."""

    script: Mapping[str, Sequence[Reply | Keyed]]
    name: str = "scripted"
    expected_verdicts: list[str] = field(default_factory=list)
    prompts: dict[str, list[list[BaseMessage]]] = field(default_factory=dict)
    position: dict[str, int] = field(default_factory=dict)
    """Ordered replies used, per role (keyed replies are not counted: they are never used up)."""
    tools: dict[str, list[str]] = field(default_factory=dict)
    delay_s: float = 0.0
    """How long every reply takes to come on the async path (a `slow(...)` reply says its own)."""
    asked: dict[str, list[tuple[SampleKey | None, float | None]]] = field(default_factory=dict)
    """Every request per role, in the order it was made: its key (None: it named none) and the
    temperature it was drawn at (None: none set)."""

    def next_reply(
        self, role: str, messages: list[BaseMessage], key: SampleKey | None = None, temperature: float | None = None
    ) -> Reply:
        self.prompts.setdefault(role, []).append(list(messages))
        self.asked.setdefault(role, []).append((key, temperature))
        entries = self.script.get(role, [])
        if key is not None:
            match = next((e.reply for e in entries if isinstance(e, Keyed) and e.key == key), None)
            if match is not None:
                return match
        replies = [e for e in entries if not isinstance(e, Keyed)]
        step = self.position.get(role, 0)
        if step >= len(replies):
            ordered = " ordered" if len(replies) < len(entries) else ""
            keyed_note = f" and no reply keyed {key.as_tuple()}" if key is not None and ordered else ""
            raise ScriptExhausted(
                f"the {self.name} script has {len(replies)}{ordered} {role} repl{'y' if len(replies) == 1 else 'ies'}"
                f"{keyed_note}; the run asked for reply {step + 1}",
                hint="the run diverged from the script",
            )
        self.position[role] = step + 1
        return replies[step]

    def watch(self, event: Any) -> None:
        """An event-stream subscriber: stop the run at the first verdict the script did not expect."""
        if getattr(event, "kind", "") != "candidate_evaluated" or not self.expected_verdicts:
            return
        index = int(event.index)
        if index < 1:
            return  # candidate 0 came from elsewhere (memory, a branch): the script never wrote it
        expected = self.expected_verdicts[index - 1] if index <= len(self.expected_verdicts) else None
        if event.verdict != expected:
            reason = f" ({event.reason})" if event.reason else ""
            raise ScriptDiverged(
                f"candidate {index} of the {self.name} run is {event.verdict}{reason}; the script expected "
                f"{expected or 'no further candidate'}: {str(event.message).splitlines()[0][:200] if event.message else ''}".rstrip(
                    ": "
                )
            )

    def skip(self, counts: dict[str, int]) -> None:
        """Mark replies as already used (a resumed run continues the script where it stopped)."""
        for role, count in counts.items():
            self.position[role] = self.position.get(role, 0) + count

    def model(self, role: str, temperature: float | None = None) -> ScriptedChatModel:
        """The role's model; `temperature` only makes the scripted model look like a configured one
        (recorded in `asked` and in usage events), it never changes a reply."""
        return ScriptedChatModel(session=self, role=role, temperature=temperature)


def _as_message(reply: Reply, messages: list[BaseMessage]) -> AIMessage:
    if isinstance(reply, Slow):
        return _as_message(reply.reply, messages)
    if isinstance(reply, AIMessage):
        return reply.model_copy()
    return AIMessage(content=_as_text(reply, messages))


def _as_text(reply: Reply, messages: list[BaseMessage]) -> str:
    if isinstance(reply, AIMessage):
        return str(reply.content)
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, dict):
        return json.dumps(reply)
    if callable(reply):
        return reply(messages)
    assert isinstance(reply, str)
    return reply


def _text_of(message: BaseMessage) -> str:
    """What a message costs in the estimate: its text, plus the tool calls it makes."""
    calls = getattr(message, "tool_calls", None) or []
    return str(message.content) + (json.dumps([[c["name"], c["args"]] for c in calls]) if calls else "")


class ScriptedChatModel(BaseChatModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    session: Any
    role: str
    model_name: str = "scripted"
    max_tokens: int = 8192
    """Only so a reply scripted as `cut(...)` is asked again with more room, as a real model's is."""
    temperature: float | None = None
    """Recorded, never used: so a run's temperature schedule is visible in a scripted run."""

    @property
    def _llm_type(self) -> str:
        return "kernelwright-scripted"

    def _answer(self, messages: list[BaseMessage], metadata: Mapping[str, Any] | None) -> tuple[AIMessage, float]:
        """The reply of the script for this request (by the key its metadata names, else the next
        in order) as a message with usage, and how long it takes to come."""
        reply = self.session.next_reply(self.role, messages, key_of(metadata), self.temperature)
        delay = reply.seconds if isinstance(reply, Slow) else float(self.session.delay_s)
        message = _as_message(reply, messages)
        prompt_tokens = sum(estimate_tokens(_text_of(m)) for m in messages)
        out_tokens = estimate_tokens(_text_of(message))
        message.usage_metadata = {
            "input_tokens": prompt_tokens,
            "output_tokens": out_tokens,
            "total_tokens": prompt_tokens + out_tokens,
        }
        finish = message.response_metadata.get("finish_reason") or ("tool_calls" if message.tool_calls else "stop")
        message.response_metadata = {"model_name": self.model_name, "estimated_usage": True, "finish_reason": finish}
        return message, delay

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message, _ = self._answer(messages, run_manager.metadata if run_manager else None)
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # chosen before the first await: the order of the calls
        message, delay = self._answer(messages, run_manager.metadata if run_manager else None)
        if delay:
            await asyncio.sleep(delay)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def astream(  # type: ignore[override]
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[AIMessageChunk]:
        """Not a coroutine: the reply is chosen now, in the order the calls are made, and streamed
        when iterated (after its delay)."""
        messages = self._convert_input(input).to_messages()
        message, delay = self._answer(messages, (config or {}).get("metadata"))
        return _pieces(message, delay)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        self.session.tools[self.role] = [getattr(t, "name", None) or getattr(t, "__name__", str(t)) for t in tools]
        return self  # type: ignore[return-value]

    def with_structured_output(  # type: ignore[override]
        self, schema: type[BaseModel], *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[LanguageModelInput, Any]:
        """Replies are JSON (or dicts in the script) validated into `schema`. Shaped like LangChain's
        own: `RunnableMap(raw=model) | parser`, the parser giving `{"raw", "parsed", "parsing_error"}`
        with include_raw (so `llm.structured_parts` can stream the model and parse after)."""

        def parse(value: dict[str, Any]) -> Any:
            raw = value["raw"]
            parsed, error = None, None
            try:
                parsed = schema.model_validate_json(str(raw.content))
            except ValueError as exc:
                error = exc
                if not include_raw:
                    raise
            return {"raw": raw, "parsed": parsed, "parsing_error": error} if include_raw else parsed

        return RunnableMap(raw=self) | RunnableLambda(parse)


async def _pieces(message: AIMessage, delay: float) -> AsyncIterator[AIMessageChunk]:
    """A whole reply as a stream: its text in pieces, then its tool calls, usage and finish reason."""
    text = str(message.content)
    pieces = [text[i : i + PIECE_CHARS] for i in range(0, len(text), PIECE_CHARS)] or [""]
    for piece in pieces[:-1]:
        if delay:
            await asyncio.sleep(delay / len(pieces))
        yield AIMessageChunk(content=piece)
    if delay:
        await asyncio.sleep(delay / len(pieces))
    yield AIMessageChunk(
        content=pieces[-1],
        tool_call_chunks=[
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i, "type": "tool_call_chunk"}
            for i, c in enumerate(message.tool_calls)
        ],
        usage_metadata=message.usage_metadata,
        response_metadata=message.response_metadata,
    )
