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

from tests.agent import sse_stub

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


@contextmanager
def serve(engineer: Engineer) -> Iterator[str]:
    """The engineer at a local URL (`http://127.0.0.1:PORT/v1`) for the `with` block."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not self.path.endswith("/chat/completions"):
                sse_stub.send(self, 404, {}, stream=False)
                return
            status, error, content, call = engineer.answer(body)
            if error is not None:
                sse_stub.send(self, status, error, stream=False)
                return
            calls = [{"id": "call_1", "type": "function", "function": call}] if call else None
            doc = sse_stub.completion(
                str(body.get("model")),
                content=content or None,
                tool_calls=calls,
                finish="tool_calls" if call else "stop",
                usage={"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200},
            )
            sse_stub.send(self, 200, doc, stream=bool(body.get("stream")))

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
