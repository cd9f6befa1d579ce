"""The LLM plumbing (`agent/llm.py`, `agent/nodes/asking.py`) through langchain-openai's real
ChatOpenAI against a local stub of /v1/chat/completions that streams (`sse_stub.py`): a streamed
reply and its live events, a reply cut at max_tokens, a prompt over the context length (in the
words of OpenAI, vLLM, SGLang and Ollama), a refused parameter, a timeout named as one, samples in
flight at once (and one failing while the others go on), reasoning efforts, cached and reasoning
tokens and per-role prices. No network, no key; the scripted model's async path too."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from kernelwright.agent.configuration import ROLES, AgentConfig
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import EventStream, TrajectoryWriter, _Event
from kernelwright.agent.llm import chat_model
from kernelwright.agent.nodes.asking import LEFT_OUT, ask, ask_many, ask_structured
from kernelwright.agent.scripted import ScriptedSession, cut, slow
from kernelwright.errors import EnvironmentProblem, ExitCode
from tests.agent.helpers import FakeEvaluator, config
from tests.agent.sse_stub import TEMPERATURE_REFUSED, completion, refusing, send

Handler = Callable[[dict[str, Any], int], tuple[int, dict[str, Any]]]


@dataclass
class Endpoint:
    """The stub's state: what each request gets (`answer(body, n)`, n counting from 0), how long
    it waits before answering and between chunks, and every request with its start and end."""

    answer: Handler | None = None
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    spans: list[tuple[float, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            n = len(self.requests)
            self.requests.append(body)
        if self.answer is not None:
            return self.answer(body, n)
        return 200, completion(body["model"], content="plain reply " * 10)


@pytest.fixture
def endpoint() -> Iterator[tuple[Endpoint, str]]:
    state = Endpoint()

    class Stub(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            began = time.monotonic()
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(state.delay_s)
            status, doc = state.reply(body)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (the timeout test)
                send(self, status, doc, stream=bool(body.get("stream")), chunk_delay_s=state.chunk_delay_s)
            with state.lock:
                state.spans.append((began, time.monotonic()))

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _run(url: str, monkeypatch: pytest.MonkeyPatch, **flags: Any) -> tuple[AgentConfig, Deps, list[_Event]]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = config(scripted=None, model="stub-model", base_url=url, max_retries=0, **flags)
    seen: list[_Event] = []
    events = EventStream(cfg.run_id)
    events.subscribe(seen.append)
    deps = Deps(models={r: chat_model(cfg, r) for r in ROLES}, evaluator=FakeEvaluator(), events=events)  # type: ignore[arg-type]
    return cfg, deps, seen


def _prompt(text: str = "Write the kernel.") -> list[BaseMessage]:
    return [SystemMessage("You write kernels."), HumanMessage(text)]


def _kinds(seen: list[_Event], kind: str) -> list[Any]:
    return [e for e in seen if getattr(e, "kind", "") == kind]


def test_a_streamed_reply_is_assembled_and_shown_live_but_never_persisted(
    endpoint: tuple[Endpoint, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stub, url = endpoint
    stub.chunk_delay_s = 0.15  # 7 chunks over ~1 s: the 4-a-second throttle lets a few through
    text = "".join(f"line {i} of the kernel\n" for i in range(40))
    stub.answer = lambda body, n: (200, completion(body["model"], content=text))
    cfg, deps, seen = _run(url, monkeypatch)
    trajectory = TrajectoryWriter(tmp_path / "trajectory.json", {"run_id": cfg.run_id})
    deps.events.subscribe(trajectory)
    answer = ask("coder", _prompt(), cfg, deps)
    assert answer.text == text and not answer.cut and answer.error is None
    assert stub.requests[0]["stream"] is True and stub.requests[0]["stream_options"] == {"include_usage": True}
    streamed = _kinds(seen, "tokens_streamed")
    assert 1 <= len(streamed) <= 6
    assert all(e.role == "coder" and e.sample == 0 for e in streamed)
    chars = [e.chars for e in streamed]
    assert chars == sorted(set(chars)) and chars[0] > 0 and chars[-1] <= len(text)  # the reply growing
    assert streamed[-1].tokens_so_far == -(-streamed[-1].chars // 4) and streamed[-1].preview_tail in text
    assert (
        answer.usage["input_tokens"] == 100 and answer.usage["output_tokens"] == 20 and answer.usage["calls.coder"] == 1
    )
    persisted = json.loads((tmp_path / "trajectory.json").read_text())["events"]
    assert [e["kind"] for e in persisted] == ["usage_updated"]
    assert persisted[0]["seq"] == 1  # transient events take no number


def test_a_reply_cut_at_max_tokens_is_asked_again_with_twice_the_room(
    endpoint: tuple[Endpoint, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stub, url = endpoint

    def answer(body: dict[str, Any], n: int) -> tuple[int, dict[str, Any]]:
        return 200, completion(body["model"], content=f"reply {n}", finish="length" if n == 0 else "stop")

    stub.answer = answer
    cfg, deps, seen = _run(url, monkeypatch, max_output_tokens=1000)
    got = ask("coder", _prompt(), cfg, deps)
    assert [r["max_completion_tokens"] for r in stub.requests] == [1000, 2000]
    assert got.text == "reply 1" and not got.cut
    assert got.usage["output_tokens"] == 40 and got.usage["calls.coder"] == 2  # the cut reply was billed too
    assert [e.what for e in _kinds(seen, "llm_note")] == ["more_room"]
    again = ask("coder", _prompt(), cfg, deps)  # the extra room was for that reply only
    assert stub.requests[2]["max_completion_tokens"] == 1000 and again.text == "reply 2"


def test_a_reply_cut_twice_comes_back_cut(endpoint: tuple[Endpoint, str], monkeypatch: pytest.MonkeyPatch) -> None:
    stub, url = endpoint
    stub.answer = lambda body, n: (200, completion(body["model"], content="```python\nclass Mo", finish="length"))
    cfg, deps, seen = _run(url, monkeypatch, max_output_tokens=30_000)
    got = ask("coder", _prompt(), cfg, deps)
    assert got.cut and got.error is None and got.text.startswith("```python")
    assert [r["max_completion_tokens"] for r in stub.requests] == [30_000, 32_768]  # doubled, capped
    assert [e.what for e in _kinds(seen, "llm_note")] == ["more_room", "still_cut"]


OVERFLOWS = {
    "openai": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
        "130000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    },
    "vllm": {
        "message": "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens "
        "(8000 in the messages, 32000 in the completion). Please reduce the length of the messages or completion.",
        "type": "BadRequestError",
        "code": 400,
    },
    "sglang": {
        "message": "The input (40000 tokens) is longer than the model's context length (32768 tokens).",
        "code": 400,
    },
    "ollama": {"message": "prompt too long; exceeded max context length by 4021 tokens", "type": "api_error"},
}


@pytest.mark.parametrize("server", sorted(OVERFLOWS))
def test_a_prompt_over_the_context_is_compressed_and_sent_again(
    endpoint: tuple[Endpoint, str], monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    stub, url = endpoint
    stub.answer = lambda body, n: (
        (400, {"error": OVERFLOWS[server]}) if n == 0 else (200, completion(body["model"], content="fits"))
    )
    cfg, deps, seen = _run(url, monkeypatch)
    long = "\n".join(f"{i:05d} a line of the reference source" for i in range(2000))
    got = ask("coder", _prompt(long), cfg, deps)
    first, second = (json.dumps(r["messages"]) for r in stub.requests)
    assert got.text == "fits" and len(second) < len(first) * 0.6
    assert LEFT_OUT in second and LEFT_OUT not in first
    assert "00000 a line" in second and "01999 a line" in second  # the head and the tail are kept
    assert [e.what for e in _kinds(seen, "llm_note")] == ["prompt_compressed"]


def test_a_prompt_still_too_long_after_compressing_ends_with_one_line(
    endpoint: tuple[Endpoint, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stub, url = endpoint
    stub.answer = lambda body, n: (400, {"error": OVERFLOWS["vllm"]})
    cfg, deps, _ = _run(url, monkeypatch)
    with pytest.raises(EnvironmentProblem) as caught:
        ask("coder", _prompt("x" * 5000), cfg, deps)
    assert len(stub.requests) == 2
    line = caught.value.one_line()
    assert "longer than model stub-model's context even after compressing it (coder" in line and "\n" not in line


def test_a_refused_temperature_is_dropped_for_the_rest_of_the_run(
    endpoint: tuple[Endpoint, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stub, url = endpoint
    stub.answer = refusing("temperature", TEMPERATURE_REFUSED)
    cfg, deps, seen = _run(url, monkeypatch)
    assert ask("coder", _prompt(), cfg, deps).text == "ok"
    assert stub.requests[0]["temperature"] == 0.2 and "temperature" not in stub.requests[1]
    [note] = _kinds(seen, "llm_note")
    assert note.what == "parameter_dropped" and "'temperature'" in note.detail
    assert ask("coder", _prompt(), cfg, deps).text == "ok" and len(stub.requests) == 3  # remembered: one request
    assert stub.requests[2].get("temperature") is None
    ask("planner", _prompt(), cfg, deps)  # another role keeps its own parameters until it is refused
    assert stub.requests[3]["temperature"] == 0.2


def test_a_refused_max_completion_tokens_becomes_max_tokens(
    endpoint: tuple[Endpoint, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stub, url = endpoint
    refusal = {"message": "Unsupported parameter: 'max_completion_tokens' is not supported with this model."}
    stub.answer = lambda body, n: (
        (400, {"error": refusal}) if "max_completion_tokens" in body else (200, completion(body["model"], content="ok"))
    )
    cfg, deps, _ = _run(url, monkeypatch, max_output_tokens=777)
    assert ask("coder", _prompt(), cfg, deps).text == "ok"
    assert stub.requests[1]["max_tokens"] == 777 and "max_completion_tokens" not in stub.requests[1]


def test_a_timeout_is_named_as_one_with_its_figure(
    endpoint: tuple[Endpoint, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stub, url = endpoint
    stub.delay_s = 2.0
    cfg, deps, _ = _run(url, monkeypatch, request_timeout_s=1.0)
    with pytest.raises(EnvironmentProblem) as caught:
        ask("coder", _prompt(), cfg, deps)
    line = caught.value.one_line()
    assert caught.value.exit_code == ExitCode.ENVIRONMENT
    assert line.startswith(f"environment: LLM endpoint {url} timed out after 1 s (coder, model stub-model)")
    assert "--llm-timeout" in line and "unreachable" not in line and "\n" not in line


def test_four_samples_are_in_flight_at_once(endpoint: tuple[Endpoint, str], monkeypatch: pytest.MonkeyPatch) -> None:
    stub, url = endpoint
    stub.delay_s = 1.0
    stub.answer = lambda body, n: (200, completion(body["model"], content=body["messages"][-1]["content"].upper()))
    cfg, deps, seen = _run(url, monkeypatch)
    answers = ask_many("coder", [_prompt(f"sample {i}") for i in range(4)], cfg, deps)
    assert [a.text for a in answers] == [f"SAMPLE {i}" for i in range(4)]  # in the prompts' order
    assert len(stub.spans) == 4
    assert max(start for start, _ in stub.spans) < min(end for _, end in stub.spans)  # all began before any ended
    assert sorted(e.sample for e in _kinds(seen, "usage_updated")) == [1, 2, 3, 4]


def test_a_failed_sample_is_an_answer_with_its_error_and_the_others_go_on(
    endpoint: tuple[Endpoint, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stub, url = endpoint

    def answer(body: dict[str, Any], n: int) -> tuple[int, dict[str, Any]]:
        if "sample 1" in body["messages"][-1]["content"]:
            return 500, {"error": {"message": "the GPU fell over"}}
        return 200, completion(body["model"], content="fine")

    stub.answer = answer
    cfg, deps, seen = _run(url, monkeypatch)
    answers = ask_many("coder", [_prompt(f"sample {i}") for i in range(3)], cfg, deps)
    assert [a.text for a in answers] == ["fine", "", "fine"]
    assert answers[1].error is not None and "kept failing after retries (coder, model stub-model)" in answers[1].error
    assert [(e.what, e.sample) for e in _kinds(seen, "llm_note")] == [("sample_failed", 2)]
    stub.answer = lambda body, n: (500, {"error": {"message": "all down"}})
    with pytest.raises(EnvironmentProblem, match="kept failing after retries"):
        ask_many("coder", [_prompt(f"sample {i}") for i in range(3)], cfg, deps)


def test_reasoning_effort_cached_and_reasoning_tokens_and_a_roles_own_prices(
    endpoint: tuple[Endpoint, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stub, url = endpoint
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 500,
        "total_tokens": 1500,
        "prompt_tokens_details": {"cached_tokens": 800},
        "completion_tokens_details": {"reasoning_tokens": 300},
    }
    stub.answer = lambda body, n: (200, completion(body["model"], content="done", usage=usage))
    monkeypatch.setenv(
        "KERNELWRIGHT_LLM_ROLE_PRICES", json.dumps({"coder": {"in_per_1k": 0.01, "cached_in_per_1k": 0.001}})
    )
    cfg, deps, seen = _run(url, monkeypatch, reasoning_effort="high", price_out_per_1k=0.04)
    assert cfg.timeout_for("coder") == 600.0 and cfg.role("planner").reasoning_effort == "high"
    got = ask("coder", _prompt(), cfg, deps)
    assert stub.requests[0]["reasoning_effort"] == "high"
    cost = 0.2 * 0.01 + 0.8 * 0.001 + 0.5 * 0.04
    assert got.usage["cached_tokens"] == 800 and got.usage["reasoning_tokens"] == 300
    assert got.usage["cost_usd"] == pytest.approx(cost) and got.usage["cost_usd.coder"] == pytest.approx(cost)
    [event] = _kinds(seen, "usage_updated")
    assert (event.cached_tokens, event.reasoning_tokens, event.input_tokens) == (800, 300, 1000)
    ask("planner", _prompt(), cfg, deps)  # the run's prices: no prompt price set
    assert deps.events.seq and seen[-1].cost_usd == pytest.approx(0.5 * 0.04)  # type: ignore[attr-defined]


@pytest.mark.parametrize("method", ["function_calling", "json_schema", "json_mode", "plain_json"])
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")  # the openai client's json_schema stream
def test_structured_replies_stream_by_every_method(
    endpoint: tuple[Endpoint, str], monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    from pydantic import BaseModel

    class Plan(BaseModel):
        plan: str

    stub, url = endpoint

    def answer(body: dict[str, Any], n: int) -> tuple[int, dict[str, Any]]:
        if body.get("tools"):
            arguments = json.dumps({"plan": "as a tool call"})
            call = {"id": "call_1", "type": "function", "function": {"name": "Plan", "arguments": arguments}}
            return 200, completion(body["model"], tool_calls=[call], finish="tool_calls")
        return 200, completion(body["model"], content=json.dumps({"plan": "as text"}))

    stub.answer = answer
    cfg, deps, _ = _run(url, monkeypatch, structured_method=method)
    parsed, _raw, usage = ask_structured("reviewer", _prompt(), Plan, cfg, deps)
    assert parsed == Plan(plan="as a tool call" if method == "function_calling" else "as text")
    assert stub.requests[0]["stream"] is True and usage["input_tokens"] == 100  # usage counted once


def test_the_scripted_model_answers_samples_in_the_order_asked_and_streams_structured_replies() -> None:
    session = ScriptedSession(
        {
            "coder": [slow("first", 0.6), "second", cut("third, cut"), "third, whole", "fourth"],
            "planner": [{"plan": "p"}],
        },
        delay_s=0.2,
    )
    cfg = config()
    seen: list[_Event] = []
    events = EventStream(cfg.run_id)
    events.subscribe(seen.append)
    deps = Deps(models={r: session.model(r) for r in ROLES}, evaluator=FakeEvaluator(), events=events)  # type: ignore[arg-type]
    began = time.monotonic()
    answers = ask_many("coder", [_prompt(f"sample {i}") for i in range(3)], cfg, deps)
    took = time.monotonic() - began
    assert [a.text for a in answers] == ["first", "second", "third, whole"] and not answers[2].cut
    assert [str(p[-1].content) for p in session.prompts["coder"]][:3] == ["sample 0", "sample 1", "sample 2"]
    assert took < 1.0  # 0.6 s, 0.2 s and 0.2 + 0.2 s in flight together, not 1.2 s one after another
    assert answers[2].usage["calls.coder"] == 2

    from pydantic import BaseModel

    class Plan(BaseModel):
        plan: str

    parsed, raw, usage = ask_structured("planner", _prompt(), Plan, cfg, deps)
    assert parsed == Plan(plan="p") and json.loads(raw) == {"plan": "p"} and usage["calls.planner"] == 1


def test_the_live_status_line_shows_the_tokens_streaming_in_and_drops_them_when_accounted() -> None:
    from kernelwright.agent.events import LlmNote, StepStarted, TokensStreamed, UsageUpdated
    from kernelwright.agent.progress import RunProgress
    from kernelwright.tui.status import status_text
    from kernelwright.tui.widgets.detail import step_text

    progress = RunProgress(status="running")
    progress.apply(StepStarted(step="coder", round=1))
    progress.apply(
        TokensStreamed(role="coder", sample=2, chars=4936, tokens_so_far=1234, preview_tail="__global__ void k(")
    )
    assert "code · coder (sample 2): ~1,234 tokens so far" in status_text(progress, False, False).plain
    progress.apply(TokensStreamed(role="coder", sample=1, chars=400, tokens_so_far=100, preview_tail="x"))
    assert "coder (2 samples): ~1,334 tokens so far" in status_text(progress, False, False).plain
    step = progress.current_step()
    assert step is not None and "coder (sample 2): ~1,234 tokens so far … __global__ void k(" in step_text(step).plain
    progress.apply(
        UsageUpdated(role="coder", input_tokens=10, output_tokens=1300, total_tokens=1310, cost_usd=0, sample=2)
    )
    progress.apply(LlmNote(role="coder", sample=1, what="sample_failed", detail="LLM endpoint timed out"))
    assert "tokens so far" not in status_text(progress, False, False).plain
    assert "coder (sample 1): LLM endpoint timed out" in step.detail


def test_the_sync_entry_works_inside_a_running_event_loop_too() -> None:
    import asyncio

    session = ScriptedSession({"coder": ["from inside a loop"]})
    cfg = config()
    deps = Deps(models={r: session.model(r) for r in ROLES}, evaluator=FakeEvaluator())  # type: ignore[arg-type]

    async def a_frontend() -> str:  # a node called from code that runs its own loop (a Textual app, a test)
        return ask("coder", _prompt(), cfg, deps).text

    assert asyncio.run(a_frontend()) == "from inside a loop"
