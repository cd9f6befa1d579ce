"""The search (#31): technique tags, the parent choice rule (explicit, seeded, recorded), several
ideas a round each from its own parent, and a round's samples in flight at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kernelwright.agent import parents, runner
from kernelwright.agent.configuration import ROLES
from kernelwright.agent.llm import chat_model
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.agent.state import CandidateRecord
from kernelwright.agent.techniques import niche, tags
from tests.agent import engineer_stub
from tests.agent.helpers import FakeEvaluator, code, config, models, review


def test_tags_come_from_the_code_and_the_plan_and_are_deterministic() -> None:
    cuda = "__global__ void k(float4* x) { __shared__ float t[256]; #pragma unroll\n for(;;){} }"
    assert tags(cuda) == ["shared_memory", "unrolled", "vectorised"]
    assert tags("wmma::mma_sync(acc, a, b, acc); cp.async.ca.shared.global", "fuse the bias") == [
        "async_copy",
        "fusion",
        "tensor_cores",
    ]
    assert tags("for (int i = 0; i < n; ++i) y[i] = x[i];") == [] and niche([]) == "plain"
    assert tags(cuda) == tags(cuda) and niche(["tiling", "triton"]) == "tiling"


def _rec(index: int, ratio: float, tag_list: list[str], idea: str, verdict: str = "correct") -> CandidateRecord:
    speed = {"compile": {"ratio": ratio, "ci_low": ratio * 0.95, "ci_high": ratio * 1.05}}
    return CandidateRecord(
        index=index,
        round=1,
        attempt=1,
        sha256=str(index),
        path=f"/x/{index}.py",
        verdict=verdict,
        reason=None,
        message="",
        speedups=speed if verdict == "correct" else {},
        target_baseline="compile" if verdict == "correct" else None,
        beats_target=False,
        parent=None,
        idea=idea,
        tags=tag_list,
    )


def test_the_parent_rule_takes_the_best_then_each_niche_then_a_seeded_slower_idea() -> None:
    pool = [
        _rec(1, 0.9, ["vectorised"], "float4 loads"),
        _rec(2, 0.8, ["vectorised"], "float4 loads with unrolled tail handling"),
        _rec(3, 0.5, [], "a plain loop over rows"),
        _rec(4, 0.5, ["vectorised"], "split into two passes to hide latency of loads"),
        _rec(5, 0.2, ["shared_memory"], "stage through shared memory"),  # its niche's best, however slow
        _rec(7, 0.3, ["vectorised"], "another idea entirely about prefetching rows"),  # below half the best
        _rec(6, 2.0, [], "x", verdict="incorrect"),
    ]
    chosen = parents.choose(pool, 4, seed=7, round_=2)
    assert [c["index"] for c in chosen[:3]] == [1, 3, 5]
    assert chosen[0]["why"] == "the best correct candidate" and chosen[1]["why"] == "the best of the plain niche"
    assert chosen[2]["why"] == "the best of the shared_memory niche"
    assert chosen[3]["index"] in (2, 4) and "slower" in chosen[3]["why"]
    assert parents.choose(pool, 4, seed=7, round_=2) == chosen  # seeded: the same choice again
    draws = {parents.choose(pool, 4, seed=s, round_=2)[3]["index"] for s in range(20)}
    assert draws == {2, 4}  # both eligible slower ideas get drawn over seeds; 7 (too slow) never
    moved = parents.choose(pool, 1, seed=7, round_=3, abandoned_parent=1)
    assert moved[0]["index"] == 2 and "abandoned" in moved[0]["why"]  # the next best, not 1
    assert (
        parents.choose([], 2, seed=0, round_=1)
        == [{"index": None, "why": "no correct candidate yet: from scratch"}] * 2
    )


def _ideas(*plans: str) -> dict[str, Any]:
    return {"ideas": [{"plan": p, "expected_speedup": 1.2} for p in plans]}


def test_a_correct_but_slower_candidate_becomes_a_parent_and_leads_to_the_winner() -> None:
    # Round 1: two ideas from scratch: a vectorised kernel (0.9x) and a slower plain one (0.6x).
    # Round 2: idea 1 from the best (0.9x) goes nowhere; idea 2 from the slower plain kernel wins.
    vec = code("correct none 0.9").replace("# judge", "# float4 loads\n# judge")
    session = ScriptedSession(
        {  # type: ignore[arg-type]
            "planner": [
                _ideas("vectorise with float4", "a plain row loop"),
                _ideas("unroll the float4 loop", "block the plain loop by rows"),
            ],
            "coder": [vec, code("correct none 0.6"), code("correct none 0.85"), code("correct none 1.8")],
            "reviewer": [review(), review()],
        }
    )
    cfg = config(ideas=2, max_rounds=2)
    outcome = runner.run(cfg, runner.RunParts(models(session), FakeEvaluator(), scripted=session))  # type: ignore[arg-type]
    assert outcome.accepted and outcome.best is not None and outcome.best["index"] == 4
    by_index = {c["index"]: c for c in outcome.candidates}
    assert by_index[1]["tags"] == ["vectorised"] and by_index[2]["tags"] == []
    assert by_index[3]["parent"] == 1 and by_index[4]["parent"] == 2  # the winner's parent was the slower one
    assert by_index[4]["idea"] == "block the plain loop by rows"
    second = str(session.prompts["planner"][1][-1].content)
    assert "1. candidate 1: correct" in second and "[the best correct candidate]" in second
    assert "2. candidate 2: correct" in second and "[the best of the plain niche]" in second
    coder_prompts = [str(p[-1].content) for p in session.prompts["coder"]]
    assert "Starting point (the base for edits): candidate 2" in coder_prompts[3]
    assert outcome.state["ideas"][1]["why"] == "the best of the plain niche"
    history = outcome.state["history"]
    assert len(history) == 4 and history[0].startswith("r1: [1] vectorise with float4 -> c1 correct 0.90x")
    assert history[1].startswith("r1: [2] a plain row loop -> c2 correct 0.60x")  # every idea is told
    reviewed = str(session.prompts["reviewer"][1][-1].content)
    assert "idea 2 (from candidate 2): block the plain loop by rows" in reviewed
    log = outcome.state["idea_log"]
    assert [entry["round"] for entry in log] == [1, 2] and log[0]["ideas"][0][
        "why"
    ] == "no correct candidate yet: from scratch"
    import json

    summary = json.loads((cfg.run_dir / "summary.json").read_text())
    assert summary["ideas"][1]["ideas"][1]["parent"] == 2


def test_width_4_has_its_4_coder_requests_in_flight_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in model that takes 1.5 s a reply: the 4 samples of a round overlap in time."""
    spans: list[tuple[float, float]] = []
    lock = threading.Lock()

    class Timed(engineer_stub.Engineer):
        def answer(self, body: dict[str, Any]):  # type: ignore[no-untyped-def]
            tools = body.get("tools")
            start = time.monotonic()
            out = super().answer(body)
            if not tools:  # a coder request
                with lock:
                    spans.append((start, time.monotonic()))
            return out

    engineer = Timed(delay_s=1.5)
    with engineer_stub.serve(engineer) as url:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        cfg = config(scripted=None, model="stub", width=4, max_rounds=1, coder_retries=0)
        evaluator = FakeEvaluator()
        chat = {role: chat_model(cfg, role) for role in ROLES}
        began = time.monotonic()
        runner.run(cfg, runner.RunParts(chat, _AnyVerdict(evaluator)))  # type: ignore[arg-type]
        took = time.monotonic() - began
    assert len(spans) == 4
    assert max(s for s, _ in spans) < min(e for _, e in spans)  # every request began before any ended
    assert evaluator.batches == [4] and took < 3 * 1.5 + 6  # planner, coder (all 4 at once), reviewer


class _AnyVerdict:
    """The engineer's kernels carry no judge marker: judged build_error by the fake evaluator."""

    def __init__(self, inner: FakeEvaluator) -> None:
        self.inner = inner

    def evaluate(self, candidates: list[Path]):  # type: ignore[no-untyped-def]
        for path in candidates:
            path.write_text(path.read_text() + "\n# judge: build_error compile_error\n")
        return self.inner.evaluate(candidates)
