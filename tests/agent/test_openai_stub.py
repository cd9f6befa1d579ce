"""langchain-openai's real ChatOpenAI against a local stub of /v1/chat/completions (streamed, as
every role's calls are: `sse_stub.py`): tool calls for structured output, usage metadata, retries,
and an API error that persists (exit 5, run saved and resumable). No network, no key."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kernelwright.agent import runner
from kernelwright.agent.configuration import ROLES
from kernelwright.agent.llm import chat_model
from kernelwright.errors import EnvironmentProblem, ExitCode
from tests.agent.helpers import FakeEvaluator, code, config, plan, review, run_cli
from tests.agent.sse_stub import completion, send

ARGS = {"Plan": plan(expected=1.4), "Review": review(lesson="stubbed lesson")}


class Stub:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail_with: int | None = None
        self.tool_first: dict[str, Any] | None = None  # one helper-tool call before the first answer

    def reply(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append(body)
        if self.fail_with is not None:
            return self.fail_with, {"error": {"message": "stub says no", "type": "invalid_request_error"}}
        if body.get("tools"):
            name = next(t["function"]["name"] for t in body["tools"] if t["function"]["name"] in ARGS)
            arguments = ARGS[name]
            if self.tool_first is not None:
                name, arguments, self.tool_first = self.tool_first["name"], self.tool_first["args"], None
            call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            return 200, completion(body.get("model", ""), tool_calls=[call], finish="tool_calls")
        return 200, completion(body.get("model", ""), content=code("correct none 2.0"))


@pytest.fixture
def stub() -> Iterator[tuple[Stub, str]]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, doc = state.reply(body) if self.path.endswith("/chat/completions") else (404, {})
            send(self, status, doc, stream=bool(body.get("stream")))

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


def test_chat_openai_against_the_stub_drives_the_graph(stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch) -> None:
    state, url = stub
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    cfg = config(scripted=None, model="stub-model", price_in_per_1k=0.01, price_out_per_1k=0.03)
    models = {role: chat_model(cfg, role) for role in ROLES}
    outcome = runner.run(cfg, runner.RunParts(models, FakeEvaluator()))  # type: ignore[arg-type]
    assert outcome.accepted
    assert [bool(r.get("tools")) for r in state.requests] == [True, False, True]  # planner, coder, reviewer
    assert {r["model"] for r in state.requests} == {"stub-model"}
    names = [t["function"]["name"] for t in state.requests[0]["tools"]]
    assert names == ["gpu_specs", "read_candidate", "profile_digest", "digest_diff", "Plan"]
    usage = outcome.state["usage"]
    assert usage["input_tokens"] == 300 and usage["output_tokens"] == 60
    assert usage["cost_usd"] == pytest.approx(3 * (0.1 * 0.01 + 0.02 * 0.03))
    assert outcome.state["lessons"] == ["stubbed lesson"]


def test_a_tool_call_round_trips_through_chat_openai(stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch) -> None:
    state, url = stub
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    state.tool_first = {"name": "gpu_specs", "args": {"question": "l2", "gpu": "h100"}}
    cfg = config(scripted=None, model="stub-model")
    outcome = runner.run(cfg, runner.RunParts({role: chat_model(cfg, role) for role in ROLES}, FakeEvaluator()))  # type: ignore[arg-type]
    assert outcome.accepted and len(state.requests) == 4  # planner twice (tool call, then Plan), coder, reviewer
    follow_up = state.requests[1]["messages"]
    assert follow_up[-2]["role"] == "assistant" and follow_up[-2]["tool_calls"][0]["function"]["name"] == "gpu_specs"
    assert follow_up[-1]["role"] == "tool" and follow_up[-1]["tool_call_id"] == "call_1"
    assert "cache.l2_mb: 50.0 MB" in follow_up[-1]["content"]
    assert outcome.state["usage"]["calls.planner"] == 2


@pytest.mark.parametrize(("status", "words"), [(401, "refused the API key"), (500, "kept failing after retries")])
def test_a_persisting_api_error_is_exit_5_and_the_run_resumes(
    stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch, status: int, words: str
) -> None:
    state, url = stub
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    cfg = config(scripted=None, model="stub-model", max_retries=1)
    state.fail_with = status
    models = {role: chat_model(cfg, role) for role in ROLES}
    with pytest.raises(EnvironmentProblem) as caught:
        runner.run(cfg, runner.RunParts(models, FakeEvaluator()))  # type: ignore[arg-type]
    line = caught.value.one_line()
    assert caught.value.exit_code == ExitCode.ENVIRONMENT and "\n" not in line
    assert url in line and words in line and f"--resume {cfg.run_id}" in line
    assert len(state.requests) == (1 if status == 401 else 2)  # 5xx retried once, 401 not at all
    assert json.loads((cfg.run_dir / "summary.json").read_text())["stop_reason"].startswith("interrupted")
    state.fail_with = None
    outcome = runner.run(cfg, runner.RunParts(models, FakeEvaluator()), runner.RunSteering(resume=True))  # type: ignore[arg-type]
    assert outcome.accepted


def test_optimize_with_a_refused_key_exits_5_with_one_line(
    stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state, url = stub
    state.fail_with = 401
    monkeypatch.setenv("OPENAI_API_KEY", "sk-bad")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    code = run_cli(["optimize", "relu", "--device", "cpu", "--size", "small", "--rounds", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 5
    assert len(err) == 1 and err[0].startswith("environment: LLM endpoint") and url in err[0]
    [run_dir] = list((tmp_path / "runs").iterdir())
    assert (run_dir / "config.json").exists() and (run_dir / "checkpoints.sqlite").exists()
