"""Chat models per role, and one way to call them.

`chat_model(config, role)` builds a langchain-openai `ChatOpenAI` for any OpenAI-compatible
endpoint (OpenAI, vLLM, SGLang, Ollama, LM Studio): model, base URL, key, temperature, max tokens,
request timeout. Rate limits (429) and server errors (5xx) are retried by the OpenAI client with
exponential backoff (`max_retries`). `call_llm` / `call_structured` invoke a model and turn what
cannot be retried away - a refused key, an unknown model, an unreachable server, errors that
persist - into one `EnvironmentProblem` line naming the endpoint (exit 5); the run stays resumable
because the checkpoint holds the state from before the call.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, TypeVar

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel, SecretStr, ValidationError

from kernelwright.agent.configuration import AgentConfig, Role
from kernelwright.errors import EnvironmentProblem

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)
DEFAULT_ENDPOINT = "https://api.openai.com/v1"


def chat_model(config: AgentConfig, role: Role) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    spec = config.role(role)
    if not config.api_key and not config.base_url:
        raise EnvironmentProblem(
            f"no API key for the LLM endpoint {DEFAULT_ENDPOINT}",
            hint="set OPENAI_API_KEY or KERNELWRIGHT_LLM_API_KEY, point KERNELWRIGHT_LLM_BASE_URL at a local "
            "server, or try `kernelwright demo` (scripted, no key needed)",
        )
    return ChatOpenAI(
        model=spec.model,
        base_url=config.base_url,
        api_key=SecretStr(config.api_key or "not-needed"),  # local servers (vLLM, Ollama) accept any key
        temperature=spec.temperature,
        max_completion_tokens=spec.max_tokens,
        timeout=config.request_timeout_s,
        max_retries=config.max_retries,
        stream_usage=True,
    )


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False

    def cost(self, config: AgentConfig) -> float:
        return self.input_tokens / 1000 * config.price_in_per_1k + self.output_tokens / 1000 * config.price_out_per_1k


def usage_of(message: AIMessage | None) -> Usage:
    if message is None or not message.usage_metadata:
        return Usage()
    meta = message.usage_metadata
    return Usage(
        int(meta.get("input_tokens", 0)),
        int(meta.get("output_tokens", 0)),
        bool(message.response_metadata.get("estimated_usage", False)),
    )


def _endpoint(config: AgentConfig) -> str:
    return config.base_url or DEFAULT_ENDPOINT


def _api_problem(config: AgentConfig, role: Role, exc: openai.APIError) -> EnvironmentProblem:
    return endpoint_problem(
        _endpoint(config), config.role(role).model, exc, who=role, then=f"resume with --resume {config.run_id}"
    )


def endpoint_problem(
    endpoint: str, model: str, exc: openai.APIError, *, who: str, then: str | None = None
) -> EnvironmentProblem:
    """An API error that retries did not cure, as one line naming the endpoint, the caller (`who`)
    and the model, with what to check (and `then`, what to do after)."""
    said = str(getattr(exc, "message", "") or exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        what, hint = "refused the API key", "check OPENAI_API_KEY / KERNELWRIGHT_LLM_API_KEY"
    elif isinstance(exc, openai.NotFoundError):
        what, hint = f"does not know model {model!r} (or the path)", "check --model and the base URL"
    elif isinstance(exc, openai.APIConnectionError):
        what, hint = "is unreachable", "check the base URL and that the server is up"
    else:
        what, hint = "kept failing after retries", "try again later" + ("; the run is resumable" if then else "")
    return EnvironmentProblem(
        f"LLM endpoint {endpoint} {what} ({who}, model {model}): {said}",
        hint=f"{hint}; {then}" if then else hint,
    )


def call_llm(
    model: BaseChatModel | Runnable[Any, Any], messages: list[BaseMessage], config: AgentConfig, role: Role
) -> AIMessage:
    try:
        reply = model.invoke(messages)
    except openai.APIError as exc:
        raise _api_problem(config, role, exc) from exc
    assert isinstance(reply, AIMessage)
    return reply


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


def call_structured(
    model: BaseChatModel, messages: list[BaseMessage], schema: type[T], config: AgentConfig, role: Role
) -> tuple[T | None, AIMessage | None]:
    """(the parsed object or None when the reply does not fit the schema, the raw reply).

    `plain_json` asks for JSON in the text and parses it here (endpoints without function
    calling or JSON schema); the other methods are LangChain's `with_structured_output`."""
    if config.structured_method == "plain_json":
        reply = call_llm(model, messages, config, role)
        return parse_json_reply(str(reply.content), schema), reply
    runnable = model.with_structured_output(schema, method=config.structured_method, include_raw=True)
    try:
        out: Any = runnable.invoke(messages)
    except openai.APIError as exc:
        raise _api_problem(config, role, exc) from exc
    raw = out.get("raw") if isinstance(out, dict) else None
    parsed = out.get("parsed") if isinstance(out, dict) else out
    if parsed is None and raw is not None:
        parsed = parse_json_reply(str(raw.content), schema)
    return (parsed if isinstance(parsed, schema) else None), raw if isinstance(raw, AIMessage) else None
