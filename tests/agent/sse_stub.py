"""The wire format of a local /v1/chat/completions stub: a whole `chat.completion` document, sent
as JSON or (for a request with `stream: true`) as server-sent events the way OpenAI streams it:
`data: {chat.completion.chunk}` lines carrying the text in pieces and the tool calls, a chunk with
the finish reason, a last chunk with the usage and no choices (`stream_options.include_usage`),
then `data: [DONE]`. Shared by the stub tests so each states only what its endpoint answers."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any


def completion(
    model: str,
    *,
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str = "stop",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `chat.completion` document with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def chunks_of(doc: dict[str, Any], pieces: int = 4) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` documents that stream `doc`."""
    head = {"id": doc["id"], "object": "chat.completion.chunk", "created": doc["created"], "model": doc["model"]}
    choice = doc["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    text = message.get("content") or ""
    size = max(1, -(-len(text) // pieces))
    out += [chunk({"content": text[i : i + size]}) for i in range(0, len(text), size)]
    for i, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": i, **call}]}))
    out.append(chunk({}, choice["finish_reason"]))
    out.append({**head, "choices": [], "usage": doc["usage"]})
    return out


def send(
    handler: BaseHTTPRequestHandler, status: int, doc: dict[str, Any], *, stream: bool, chunk_delay_s: float = 0.0
) -> None:
    """Answer the request: an error or a non-streamed reply as JSON, a streamed one as events."""
    if status != 200 or not stream:
        data = json.dumps(doc).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
        return
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()  # HTTP/1.0: the stream ends when the connection closes
    for piece in chunks_of(doc):
        handler.wfile.write(f"data: {json.dumps(piece)}\n\n".encode())
        handler.wfile.flush()
        if chunk_delay_s:
            time.sleep(chunk_delay_s)
    handler.wfile.write(b"data: [DONE]\n\n")
    handler.wfile.flush()


TEMPERATURE_REFUSED = {
    "message": "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) "
    "value is supported.",
    "type": "invalid_request_error",
    "param": "temperature",
    "code": "unsupported_value",
}
"""OpenAI's 400 error body for a reasoning model given a temperature (its wording, 2025)."""


def refusing(param: str, error: dict[str, Any]) -> Any:
    """A stub answer: a 400 with `error` for a request that sends `param`, else "ok"."""
    return lambda body, n: (400, {"error": error}) if param in body else (200, completion(body["model"], content="ok"))
