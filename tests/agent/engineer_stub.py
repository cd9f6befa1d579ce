"""A stand-in OpenAI-compatible model that behaves like an engineer repairing a build (#30).

Served over HTTP (`/v1/chat/completions`, plain or streamed as server-sent events) so the real
langchain-openai client talks to it. Its coder writes a CPU ReLU kernel with a mistake (an
undeclared `zero`), and serves the fix, as a SEARCH/REPLACE edit to that draft, only when the
prompt shows what a real model needs to make it: its own failing draft (the broken line) and the
compiler's diagnostic placed on that draft ("line N of your file ... zero"). Shown anything less,
it writes the same design again, mistake included, as a model that cannot see its code would.
Replies may take `delay_s` seconds, and every `fail_every`-th request answers 500 (the client's
retries take it). The planner and reviewer answer through their structured-output tools.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BROKEN_LINE = "for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : zero;"
DRAFT = (
    '''import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>

extern "C" int relu(const float* x, float* y, int64_t n) {
    #pragma omp parallel for schedule(static) if (n > (1 << 18))
    '''
    + BROKEN_LINE
    + '''
    return 0;
}
"""

lib = load_kernels("kw_engineer_relu", SOURCE, {"relu": "ptr, ptr, i64"}, lang="cpp")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        return y
'''
)
FIX = (
    "`zero` is undeclared on the line the compiler names; I declare it before the loop.\n"
    "<<<<<<< SEARCH\n    #pragma omp parallel for schedule(static) if (n > (1 << 18))\n=======\n"
    "    const float zero = 0.f;\n    #pragma omp parallel for schedule(static) if (n > (1 << 18))\n>>>>>>> REPLACE\n"
)
_PLACED = re.compile(r"line \d+ of your file[^\n]*zero")


def sees_its_draft(prompt: str) -> bool:
    """What the fix needs: the failing draft itself and the diagnostic placed on it."""
    return BROKEN_LINE in prompt and bool(_PLACED.search(prompt))


def coder_reply(prompt: str) -> str:
    if sees_its_draft(prompt):
        return FIX
    return f"A one-pass kernel, OpenMP for large tensors.\n```python\n{DRAFT}```\n"


class Engineer:
    def __init__(self, delay_s: float = 0.0, fail_every: int = 0) -> None:
        self.delay_s, self.fail_every = delay_s, fail_every
        self.requests: list[dict[str, Any]] = []
        self.coder_prompts: list[str] = []
        self._lock = threading.Lock()

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any] | None, str, dict[str, Any] | None]:
        """(status, error body, content, tool call) for one request."""
        with self._lock:
            self.requests.append(body)
            count = len(self.requests)
        time.sleep(self.delay_s)
        if self.fail_every and count % self.fail_every == 0:
            return 500, {"error": {"message": "engineer stub: a bad moment", "type": "server_error"}}, "", None
        names = [t["function"]["name"] for t in body.get("tools") or []]
        for schema, args in (
            ("Plan", {"plan": "One pass over the data, OpenMP for large tensors.", "expected_speedup": 1.2}),
            ("Review", {"decision": "iterate", "feedback": "correct", "lesson": "declare what you use"}),
        ):
            if schema in names:
                return 200, None, "", {"name": schema, "arguments": json.dumps(args)}
        prompt = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
        with self._lock:
            self.coder_prompts.append(prompt)
        return 200, None, coder_reply(prompt), None


def _completion(body: dict[str, Any], content: str, call: dict[str, Any] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if call is not None:
        message["tool_calls"] = [{"id": "call_1", "type": "function", "function": call}]
    return {
        "id": "chatcmpl-engineer",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200},
    }


def _chunks(body: dict[str, Any], content: str, call: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    base = {"id": "chatcmpl-engineer", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}
    if call is not None:
        delta: dict[str, Any] = {
            "role": "assistant",
            "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": call}],
        }
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    else:
        for start in range(0, len(content), 200):
            yield {
                **base,
                "choices": [{"index": 0, "delta": {"content": content[start : start + 200]}, "finish_reason": None}],
            }
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if call else "stop"}]}
    yield {**base, "choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}}


@contextmanager
def serve(engineer: Engineer) -> Iterator[str]:
    """The engineer at a local URL (`http://127.0.0.1:PORT/v1`) for the `with` block."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not self.path.endswith("/chat/completions"):
                self._json(404, {})
                return
            status, error, content, call = engineer.answer(body)
            if error is not None:
                self._json(status, error)
            elif body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in _chunks(body, content, call):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
            else:
                self._json(200, _completion(body, content, call))

        def _json(self, status: int, doc: dict[str, Any]) -> None:
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
