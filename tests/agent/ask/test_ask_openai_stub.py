"""`kernelwright ask` through langchain-openai's real ChatOpenAI against a local stub of
/v1/chat/completions that streams (server-sent events): a streamed tool call, the tool's result
sent back, a streamed answer citing a value from it, usage; and a refused key (exit 5, one line).
No network, no key."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kernelwright.errors import ExitCode
from tests.agent.ask.helpers import DATA, needs_module
from tests.cli.test_ask_cmd import invoke

REPORT = DATA / "transpose_no_warpstate.ncu-rep"


def _chunk(body: dict[str, Any], delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
    doc = {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": body.get("model"),
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return f"data: {json.dumps(doc)}\n\n".encode()


class Stub:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail_with: int | None = None

    def events(self, body: dict[str, Any]) -> list[bytes]:
        """A tool call (its arguments in two pieces) for the question; then an answer in pieces that
        cites the duration exactly as the tool result printed it."""
        self.requests.append(body)
        tool_results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        out = [_chunk(body, {"role": "assistant", "content": ""})]
        if not tool_results:
            call = {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "kernel_digest", "arguments": ""},
            }
            out.append(_chunk(body, {"tool_calls": [call]}))
            for part in ('{"kern', 'el": null}'):
                out.append(_chunk(body, {"tool_calls": [{"index": 0, "function": {"arguments": part}}]}))
            out.append(_chunk(body, {}, "tool_calls"))
        else:
            citation = re.search(r"\[\[gpu__time_duration\.sum = [^\]]+\]\]", tool_results[-1])
            assert citation is not None
            for part in ("The kernel ", "runs ", citation.group(0), "."):
                out.append(_chunk(body, {"content": part}))
            out.append(_chunk(body, {}, "stop"))
        out.append(_chunk(body, None, usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}))
        return [*out, b"data: [DONE]\n\n"]


@pytest.fixture
def stub() -> Iterator[tuple[Stub, str]]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if state.fail_with is not None or not self.path.endswith("/chat/completions"):
                state.requests.append(body)
                data = json.dumps({"error": {"message": "stub says no", "type": "invalid_request_error"}}).encode()
                self.send_response(state.fail_with or 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            assert body.get("stream") is True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for event in state.events(body):
                self.wfile.write(event)
                self.wfile.flush()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@needs_module
def test_chat_openai_streams_a_tool_call_and_a_cited_answer(
    stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, url = stub
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    code, out, _ = invoke("ask", str(REPORT), "How long does it run?", "--model", "stub-model", "--json")
    doc = json.loads(out)
    assert code == ExitCode.OK and doc["ok"] is True
    assert doc["answer"].startswith("The kernel runs [[gpu__time_duration.sum = 132480 nsecond @ report:0]]")
    assert doc["citations"][0]["status"] == "ok" and doc["model"] == "stub-model"
    assert doc["tool_calls"][0]["name"] == "kernel_digest" and doc["tool_calls"][0]["args"] == {"kernel": None}
    assert doc["input_tokens"] == 200 and doc["output_tokens"] == 40
    first, second = state.requests
    assert first["model"] == "stub-model" and first["stream"] is True
    assert [t["function"]["name"] for t in first["tools"]][:3] == ["list_kernels", "kernel_digest", "metric"]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "kernel_digest"
    assert (
        second["messages"][-1]["role"] == "tool" and "metrics behind this digest" in second["messages"][-1]["content"]
    )
    # Without --json the same answer streams to stdout, then the citation check.
    code, out, _ = invoke("ask", str(REPORT), "How long?", "--model", "stub-model")
    assert code == ExitCode.OK and out.endswith(".\ncitations: 1 checked, all match the report\n")


@needs_module
def test_the_listener_gets_the_answer_piece_by_piece(stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.agent.ask import AskChat, open_reports
    from kernelwright.agent.configuration import AgentConfig, RunFlags
    from kernelwright.agent.llm import chat_model
    from kernelwright.config import load_settings
    from tests.agent.ask.test_chat import Recorder

    _, url = stub
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = AgentConfig.from_settings(load_settings(), "ask", RunFlags(base_url=url, model="stub-model"))
    seen = Recorder()
    answer = AskChat(open_reports(REPORT), chat_model(config, "reviewer")).ask("How long?", seen)
    assert seen.text[:2] == ["The kernel ", "runs "] and "".join(seen.text) == answer.answer
    assert seen.tools == [("kernel_digest", {"kernel": None})]


@needs_module
def test_a_refused_key_is_exit_5_with_one_line(stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch) -> None:
    state, url = stub
    state.fail_with = 401
    monkeypatch.setenv("OPENAI_API_KEY", "sk-bad")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    code, _, err = invoke("ask", str(REPORT), "why?", "--model", "stub-model")
    assert code == ExitCode.ENVIRONMENT and "\n" not in err and len(state.requests) == 1
    assert err.startswith(f"environment: LLM endpoint {url} refused the API key (ask, model stub-model)")
    assert "--resume" not in err
