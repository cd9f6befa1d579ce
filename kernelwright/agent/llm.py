"""Chat models per role, and one way to call them: async, streamed, and mended where the endpoint
allows.

`chat_model(config, role)` builds a langchain-openai `ChatOpenAI` for any OpenAI-compatible
endpoint (OpenAI, vLLM, SGLang, Ollama, LM Studio): model, base URL, key, temperature, max tokens,
reasoning effort, request timeout. Rate limits (429) and server errors (5xx) are retried by the
OpenAI client with exponential backoff (`max_retries`).

`acall` streams one request (`astream`, chunks merged, tool-call chunks included), tells a
`Watcher` how the reply grows, and mends what can be mended, once each:
- a parameter the model refuses (400 "Unsupported parameter/value") is dropped and the request
  sent again; the model without it comes back in `Outcome.model` for the caller to keep;
- a reply cut at max_tokens (finish_reason "length") is asked again with twice the room, at most
  `MORE_ROOM_CAP` tokens; cut again, it comes back cut (`Outcome.cut`);
- a prompt longer than the model's context is compressed by the caller's `compress` and sent again.
What cannot be mended becomes one `EnvironmentProblem` line (`mending.py`, exit 5); the run
stays resumable because the checkpoint holds the state from before the call.

The graph's nodes are synchronous; `run_sync` runs a coroutine on this process's one LLM event
loop, in a thread of its own. Not `asyncio.run` per call: langchain-openai shares one async HTTP
client per endpoint across the process, and its pooled connections belong to the loop that opened
them, so a loop closed after each call would leave the next one a pool of dead connections. One
loop also works whatever the calling thread runs (a Textual app, a test's own loop).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import httpx
import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, message_chunk_to_message
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, SecretStr, ValidationError

from kernelwright.agent import mending
from kernelwright.agent.configuration import AgentConfig, Role
from kernelwright.agent.prices import Usage
from kernelwright.errors import EnvironmentProblem

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")
DEFAULT_ENDPOINT = "https://api.openai.com/v1"
MORE_ROOM_CAP = mending.MORE_ROOM_CAP
TAIL_CHARS = 80
endpoint_problem = mending.endpoint_problem  # `ask` (agent/ask/chat.py) names its failures the same way

Bind = Callable[[BaseChatModel], Runnable[Any, Any]]
Compress = Callable[[list[BaseMessage]], list[BaseMessage]]


def chat_model(config: AgentConfig, role: Role) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    spec = config.role(role)
    if not config.api_key and not config.base_url:
        raise EnvironmentProblem(
            f"no API key for the LLM endpoint {DEFAULT_ENDPOINT}",
            hint="set OPENAI_API_KEY or KERNELWRIGHT_LLM_API_KEY, point KERNELWRIGHT_LLM_BASE_URL at a local "
            "server, or try `kernelwright demo` (scripted, no key needed)",
        )
    timeout = config.timeout_for(role)
    return ChatOpenAI(
        model=spec.model,
        base_url=config.base_url,
        api_key=SecretStr(config.api_key or "not-needed"),  # local servers (vLLM, Ollama) accept any key
        temperature=spec.temperature,
        max_completion_tokens=spec.max_tokens,
        reasoning_effort=spec.reasoning_effort,
        timeout=timeout,
        stream_chunk_timeout=timeout,  # a reasoning model is silent while it thinks: the same limit
        max_retries=config.max_retries,
        stream_usage=True,
    )


def usage_of(message: AIMessage | None) -> Usage:
    if message is None or not message.usage_metadata:
        return Usage()
    meta = message.usage_metadata
    cached = (meta.get("input_token_details") or {}).get("cache_read") or 0
    reasoning = (meta.get("output_token_details") or {}).get("reasoning") or 0
    return Usage(
        input_tokens=int(meta.get("input_tokens", 0)),
        output_tokens=int(meta.get("output_tokens", 0)),
        cached_tokens=int(cached),
        reasoning_tokens=int(reasoning),
        estimated=bool(message.response_metadata.get("estimated_usage", False)),
    )


@dataclass(frozen=True)
class Reply:
    """One request's reply: the message, why it ended (finish_reason), what it used."""

    message: AIMessage
    finish_reason: str | None
    usage: Usage


@dataclass(frozen=True)
class Outcome:
    """What a call came to: the last reply, every reply received (each one billed), the requests
    sent, and the model as it now stands (a refused parameter dropped: keep it for the role)."""

    reply: Reply
    replies: tuple[Reply, ...]
    requests: int
    model: BaseChatModel

    @property
    def cut(self) -> bool:
        return self.reply.finish_reason == "length"


class Watcher(Protocol):
    """Who hears about one call as it goes: the reply growing (every chunk; throttling is the
    watcher's), and each mending (`what`: parameter_dropped, more_room, still_cut, prompt_compressed)."""

    def streamed(self, chars: int, tail: str) -> None: ...

    def noted(self, what: str, detail: str) -> None: ...


# -- the LLM event loop ----------------------------------------------------------------------------
_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _llm_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="kernelwright-llm", daemon=True).start()
        return _loop


def run_sync(coroutine: Coroutine[Any, Any, R]) -> R:
    """Run an LLM coroutine to its end from synchronous code, in any thread but the LLM loop's own
    (there, await it). Interrupted while waiting (Ctrl-C), the coroutine is cancelled."""
    loop = _llm_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coroutine.close()
        raise RuntimeError("run_sync was called on the LLM loop itself: await the coroutine instead")
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


# -- one request, streamed -------------------------------------------------------------------------
def _piece_text(piece: AIMessageChunk) -> str:
    """What a chunk adds that a person would see growing: its text and any tool-call arguments."""
    args = "".join(str(c.get("args") or "") for c in piece.tool_call_chunks)
    return piece.text + args


async def _stream(
    runnable: Runnable[Any, Any],
    prompt: list[BaseMessage],
    watch: Watcher | None,
    metadata: dict[str, Any] | None = None,
) -> Reply:
    merged: AIMessageChunk | None = None
    whole: AIMessage | None = None
    finish: str | None = None
    chars, tail = 0, ""
    config = RunnableConfig(metadata=metadata) if metadata else None
    async for piece in runnable.astream(prompt, config):
        if isinstance(piece, AIMessageChunk):
            merged = piece if merged is None else merged + piece
            finish = piece.response_metadata.get("finish_reason") or finish
            added = _piece_text(piece)
            if added:
                chars, tail = chars + len(added), (tail + added)[-TAIL_CHARS:]
                if watch is not None:
                    watch.streamed(chars, tail)
        elif isinstance(piece, AIMessage):  # a model that does not stream answers whole
            whole = piece
        else:
            raise TypeError(f"a chat model streamed {type(piece).__name__}, not message chunks")
    message = message_chunk_to_message(merged) if merged is not None else whole or AIMessage(content="")
    assert isinstance(message, AIMessage)
    finish = finish or message.response_metadata.get("finish_reason")
    return Reply(message, finish, usage_of(message))


# -- the call --------------------------------------------------------------------------------------
def _size(messages: list[BaseMessage]) -> int:
    return sum(len(str(m.content)) for m in messages)


def _name(model: BaseChatModel) -> str:
    return str(getattr(model, "model_name", "") or getattr(model, "model", "") or type(model).__name__)


async def acall(
    model: BaseChatModel,
    messages: list[BaseMessage],
    config: AgentConfig,
    role: Role,
    *,
    bind: Bind | None = None,
    compress: Compress | None = None,
    watch: Watcher | None = None,
    metadata: dict[str, Any] | None = None,
) -> Outcome:
    """One call of `role`'s model, streamed and mended (see the module's docstring). `bind` makes
    the runnable from the model (tools, structured output), again after each mending; `compress`
    shortens a prompt the model's context cannot hold (None: such a prompt ends the call);
    `metadata` goes in the RunnableConfig of every request (callbacks and the scripted model read
    it; the endpoint never sees it: `sampling.py`)."""
    endpoint, then = config.base_url or DEFAULT_ENDPOINT, f"resume with --resume {config.run_id}"
    base, prompt = model, list(messages)
    roomier: BaseChatModel | None = None
    replies: list[Reply] = []
    dropped: set[str] = set()
    compressed = False
    requests = 0

    def note(what: str, detail: str) -> None:
        log.info("%s: %s", role, detail)  # the watcher's event is what a person sees
        if watch is not None:
            watch.noted(what, detail)

    while True:
        current = roomier or base
        requests += 1
        try:
            reply = await _stream(bind(current) if bind else current, prompt, watch, metadata)
        except (openai.APIError, httpx.TransportError, TimeoutError) as exc:
            param = mending.refused_parameter(exc)
            lighter = mending.without(base, param) if param and param not in dropped else None
            if param and lighter is not None:
                dropped.add(param)
                note("parameter_dropped", f"model {_name(base)} refused {param!r}: left out for the rest of the run")
                base, roomier = lighter, (mending.with_more_room(lighter) if roomier is not None else None)
                continue
            if roomier is not None and replies:  # the retry with more room failed: the cut reply stands
                note("still_cut", f"the retry with more room failed ({type(exc).__name__}); the reply stays cut")
                return Outcome(replies[-1], tuple(replies), requests, base)
            if mending.context_overflow(exc):
                shorter = compress(prompt) if compress is not None and not compressed else prompt
                if _size(shorter) < _size(prompt):
                    compressed = True
                    note(
                        "prompt_compressed",
                        f"the prompt was over the model's context: {_size(prompt) - _size(shorter):,} characters left out",
                    )
                    prompt = shorter
                    continue
                raise mending.context_problem(endpoint, _name(base), exc, who=role) from exc
            raise mending.endpoint_problem(
                endpoint, _name(base), exc, who=role, then=then, timeout_s=config.timeout_for(role)
            ) from exc
        replies.append(reply)
        if reply.finish_reason == "length" and roomier is None:
            roomier = mending.with_more_room(base)
            if roomier is not None:
                note(
                    "more_room",
                    f"the reply was cut at {mending.max_tokens(base)} tokens: asked again with {mending.max_tokens(roomier)}",
                )
                continue
        if reply.finish_reason == "length":
            note("still_cut", f"the reply was cut at max_tokens ({mending.max_tokens(roomier or base)})")
        return Outcome(reply, tuple(replies), requests, base)


def call(
    model: BaseChatModel,
    messages: list[BaseMessage],
    config: AgentConfig,
    role: Role,
    *,
    bind: Bind | None = None,
    compress: Compress | None = None,
    watch: Watcher | None = None,
) -> Outcome:
    """`acall` from synchronous code (a graph node)."""
    return run_sync(acall(model, messages, config, role, bind=bind, compress=compress, watch=watch))


# -- structured replies ----------------------------------------------------------------------------
_JSON_BLOCK = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def parse_json_reply(text: str, schema: type[T]) -> T | None:
    """A pydantic object from a plain-JSON reply (bare, or in a ```json block); None if it is not one."""
    candidates = [m.group(1) for m in _JSON_BLOCK.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        candidates.append(text[start : end + 1])
    for chunk in candidates:
        try:
            return schema.model_validate(json.loads(chunk))
        except (json.JSONDecodeError, ValidationError):
            continue
    return None


def structured_parts(
    model: BaseChatModel, schema: type[T], method: str
) -> tuple[Runnable[Any, Any], Runnable[Any, Any]]:
    """(the model bound for `schema`, the parser of its raw reply), taken apart from LangChain's
    `with_structured_output(include_raw=True)`, which is `RunnableMap(raw=bound) | parser`: the bound
    model is streamed like any other and its merged reply parsed after. Streaming the whole runnable
    would not stream: its parser step gathers every chunk before it starts."""
    runnable = model.with_structured_output(schema, method=method, include_raw=True)  # type: ignore[arg-type]
    first, last = getattr(runnable, "first", None), getattr(runnable, "last", None)
    bound = getattr(first, "steps__", {}).get("raw") if first is not None else None
    if bound is None or last is None:
        raise TypeError(f"{type(model).__name__}.with_structured_output is not `RunnableMap(raw=...) | parser`")
    return bound, last


async def acall_structured(
    model: BaseChatModel,
    messages: list[BaseMessage],
    schema: type[T],
    config: AgentConfig,
    role: Role,
    *,
    compress: Compress | None = None,
    watch: Watcher | None = None,
) -> tuple[T | None, Outcome]:
    """(the parsed object or None when the reply does not fit the schema, the outcome).

    `plain_json` asks for JSON in the text and parses it here (endpoints without function calling
    or JSON schema); the other methods bind the model as LangChain's `with_structured_output` does."""
    method = str(config.structured_method)
    if method == "plain_json":
        outcome = await acall(model, messages, config, role, compress=compress, watch=watch)
        return parse_json_reply(outcome.reply.message.text, schema), outcome
    outcome = await acall(
        model,
        messages,
        config,
        role,
        bind=lambda m: structured_parts(m, schema, method)[0],
        compress=compress,
        watch=watch,
    )
    raw = outcome.reply.message
    out: Any = await structured_parts(outcome.model, schema, method)[1].ainvoke({"raw": raw})
    parsed = out.get("parsed") if isinstance(out, dict) else out
    if parsed is None:
        parsed = parse_json_reply(raw.text, schema)
    return (parsed if isinstance(parsed, schema) else None), outcome
