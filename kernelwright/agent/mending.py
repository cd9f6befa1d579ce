"""What an OpenAI-compatible endpoint's objections mean, how a model is changed to meet them, and
the one line a person reads when one ends the run.

Three objections can be mended (`llm.acall` does it, once each): a parameter the model refuses
(the model without it: `without`), a reply cut at max_tokens (not an error: a finish_reason; the
model with more room: `with_more_room`) and a prompt longer than the model's context (the caller
compresses it). Everything else that the OpenAI client's own retries
(429, 5xx) did not cure becomes an `EnvironmentProblem` (exit 5) naming the endpoint, the caller
and the model, and, for a timeout, the figure that was exceeded, so a slow reasoning model is never
reported as an unreachable server.
"""

from __future__ import annotations

import re

import httpx
import openai
from langchain_core.language_models import BaseChatModel

from kernelwright.errors import EnvironmentProblem

# A refused parameter, in OpenAI's words (the error's `param` and `code` say it too):
#   "Unsupported parameter: 'temperature' is not supported with this model."
#   "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported."
#   "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
#   "Unrecognized request argument supplied: reasoning_effort" (older models, and proxies that copy it)
_REFUSED = re.compile(
    r"Unsupported (?:parameter|value): '([\w.]+)'|Unrecognized request argument supplied: ([\w.]+)", re.IGNORECASE
)
_REFUSED_CODES = ("unsupported_parameter", "unsupported_value")

# A prompt longer than the model's context, as each server words it (lower-cased substrings):
# - OpenAI: error code `context_length_exceeded`; "This model's maximum context length is 128000 tokens.
#   However, your messages resulted in 130000 tokens."; the Responses API: "Your input exceeds the
#   context window of this model."
# - vLLM (vllm/entrypoints/openai/serving_engine.py, `_validate_input`): "This model's maximum context
#   length is 32768 tokens. However, you requested 40000 tokens (8000 in the messages, 32000 in the
#   completion). Please reduce the length of the messages or completion."
# - SGLang (python/sglang/srt/managers/tokenizer_manager.py, `_validate_one_request`): "The input
#   (N tokens) is longer than the model's context length (M tokens)." and "Requested token count
#   exceeds the model's maximum context length of M tokens. You requested a total of ...".
# - Ollama: "prompt too long; exceeded max context length by N tokens" (its OpenAI-compatible
#   endpoint, as quoted by the clients that handle it) and "the input length exceeds the context
#   length" (its runner). By default Ollama truncates an over-long prompt silently (num_ctx /
#   OLLAMA_CONTEXT_LENGTH), so often no error comes at all.
_OVERFLOW = (
    "context_length_exceeded",
    "maximum context length",
    "exceeds the context window",
    "please reduce the length of the messages",
    "longer than the model's context length",
    "exceeded max context length",
    "exceeds the context length",
)
_OVERFLOW_STATUS = (400, 413)
MORE_ROOM_CAP = 32_768
"""A reply cut at max_tokens is asked again with twice the room, up to this many tokens: the output
limit of gpt-4.1 and of most open models served by vLLM / SGLang (a larger max_tokens set on
purpose is kept, not doubled)."""


def _said(exc: BaseException) -> str:
    """The error's own words: the body's message where there is one, else the exception's text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(message, str) and message:
            return message
    return str(getattr(exc, "message", "") or exc)


def refused_parameter(exc: BaseException) -> str | None:
    """The request parameter a 400 says the model does not take (or not with that value), else None."""
    if getattr(exc, "status_code", None) != 400:
        return None
    param = getattr(exc, "param", None)
    if getattr(exc, "code", None) in _REFUSED_CODES and isinstance(param, str) and param:
        return param
    found = _REFUSED.search(_said(exc)) or _REFUSED.search(str(exc))
    return (found.group(1) or found.group(2)) if found else None


def context_overflow(exc: BaseException) -> bool:
    """Does this error say the prompt (with the room asked for the reply) exceeds the model's context?"""
    if getattr(exc, "status_code", None) not in _OVERFLOW_STATUS:
        return False
    if getattr(exc, "code", None) == "context_length_exceeded":
        return True
    text = f"{_said(exc)} {exc}".lower()
    return any(words in text for words in _OVERFLOW)


def is_timeout(exc: BaseException) -> bool:
    """A request that took too long: the OpenAI client's timeout (checked before its parent,
    APIConnectionError, which would read as "unreachable"), httpx's mid-stream, or langchain-openai's
    gap between streamed chunks (an asyncio TimeoutError)."""
    return isinstance(exc, openai.APITimeoutError | httpx.TimeoutException | TimeoutError)


def timeout_problem(
    endpoint: str, model: str, timeout_s: float | None, *, who: str, then: str | None = None
) -> EnvironmentProblem:
    after = f" after {timeout_s:g} s" if timeout_s is not None else ""
    hint = "raise --llm-timeout (the llm_timeout_s setting): a reasoning model may think for minutes"
    return EnvironmentProblem(
        f"LLM endpoint {endpoint} timed out{after} ({who}, model {model})",
        hint=f"{hint}; {then}" if then else hint,
    )


def context_problem(endpoint: str, model: str, exc: BaseException, *, who: str) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"the prompt is longer than model {model}'s context even after compressing it ({who}, LLM endpoint "
        f"{endpoint}): {_first_line(_said(exc))}",
        hint="use a model with a longer context, or lower --max-output-tokens (servers count the reply's room too)",
    )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else ""


def endpoint_problem(
    endpoint: str,
    model: str,
    exc: BaseException,
    *,
    who: str,
    then: str | None = None,
    timeout_s: float | None = None,
) -> EnvironmentProblem:
    """An API error that retries did not cure, as one line naming the endpoint, the caller (`who`)
    and the model, with what to check (and `then`, what to do after)."""
    if is_timeout(exc):
        return timeout_problem(endpoint, model, timeout_s, who=who, then=then)
    said = _first_line(str(getattr(exc, "message", "") or exc)) or type(exc).__name__
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        what, hint = "refused the API key", "check OPENAI_API_KEY / KERNELWRIGHT_LLM_API_KEY"
    elif isinstance(exc, openai.NotFoundError):
        what, hint = f"does not know model {model!r} (or the path)", "check --model and the base URL"
    elif isinstance(exc, openai.APIConnectionError):
        what, hint = "is unreachable", "check the base URL and that the server is up"
    elif isinstance(exc, httpx.TransportError):
        what, hint = "dropped the connection mid-reply", "try again" + ("; the run is resumable" if then else "")
    else:
        what, hint = "kept failing after retries", "try again later" + ("; the run is resumable" if then else "")
    return EnvironmentProblem(
        f"LLM endpoint {endpoint} {what} ({who}, model {model}): {said}",
        hint=f"{hint}; {then}" if then else hint,
    )


def _fields(model: BaseChatModel) -> set[str]:
    return set(type(model).model_fields)


def max_tokens(model: BaseChatModel) -> int | None:
    extra = getattr(model, "extra_body", None) or {}
    value = extra.get("max_tokens", getattr(model, "max_tokens", None))
    return value if isinstance(value, int) else None


def with_more_room(model: BaseChatModel) -> BaseChatModel | None:
    """The model with twice its max tokens (at most MORE_ROOM_CAP); None when it cannot have more."""
    now = max_tokens(model)
    if now is None or min(2 * now, MORE_ROOM_CAP) <= now:
        return None
    more = min(2 * now, MORE_ROOM_CAP)
    extra = getattr(model, "extra_body", None) or {}
    if "max_tokens" in extra:
        return model.model_copy(update={"extra_body": {**extra, "max_tokens": more}})
    return model.model_copy(update={"max_tokens": more})


def without(model: BaseChatModel, param: str) -> BaseChatModel | None:
    """The model without a request parameter it refused; None when this model cannot leave it out.

    `max_completion_tokens` refused (older servers know only `max_tokens`): the limit moves to
    `max_tokens` in the request body; `max_tokens` refused while it is there: it moves back."""
    fields = _fields(model)
    extra = dict(getattr(model, "extra_body", None) or {})
    limit = getattr(model, "max_tokens", None)
    if param == "max_completion_tokens" and limit is not None and "extra_body" in fields:
        return model.model_copy(update={"max_tokens": None, "extra_body": {**extra, "max_tokens": limit}})
    if param == "max_tokens" and "max_tokens" in extra:
        moved = extra.pop("max_tokens")
        return model.model_copy(update={"max_tokens": moved, "extra_body": extra or None})
    if param in extra:
        extra.pop(param)
        return model.model_copy(update={"extra_body": extra or None})
    kwargs = dict(getattr(model, "model_kwargs", None) or {})
    if param in kwargs:
        kwargs.pop(param)
        return model.model_copy(update={"model_kwargs": kwargs})
    if param == "stream_options" and getattr(model, "stream_usage", None):
        return model.model_copy(update={"stream_usage": False})
    if param in fields and getattr(model, param, None) is not None:
        return model.model_copy(update={param: None})
    disabled = dict(getattr(model, "disabled_params", None) or {})
    if "disabled_params" in fields and param not in disabled:  # a parameter bound by tools / structured output
        return model.model_copy(update={"disabled_params": {**disabled, param: None}})
    return None
