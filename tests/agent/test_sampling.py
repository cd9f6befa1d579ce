"""A coder turn's samples (#31): each request named by its (round, idea, sample, turn) key, which
the scripted model answers by (so concurrent runs are reproducible), and drawn at its temperature
from the documented schedule, which the endpoint receives and the usage events record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage

from kernelwright.agent import runner
from kernelwright.agent.events import UsageUpdated
from kernelwright.agent.nodes.asking import ask_many
from kernelwright.agent.sampling import (
    Sample,
    SampleKey,
    at_temperature,
    key_of,
    metadata_of,
    temperature_schedule,
)
from kernelwright.agent.scripted import Keyed, Reply, ScriptedSession, ScriptExhausted, keyed, slow
from kernelwright.errors import UsageError
from kernelwright.vocabulary import TemperatureSchedule
from tests.agent.helpers import FakeEvaluator, code, config, review
from tests.agent.sse_stub import TEMPERATURE_REFUSED, refusing
from tests.agent.test_llm_endpoint import Endpoint, _run, endpoint  # noqa: F401  (the stub endpoint fixture)


def test_the_spread_schedule_keeps_the_first_sample_and_spreads_the_others_up_to_the_cap() -> None:
    spread = TemperatureSchedule.SPREAD
    assert temperature_schedule(0.2, 1, spread) == [0.2]  # --width 1: what it always was
    assert temperature_schedule(0.2, 2, spread) == [0.2, 1.0]
    assert temperature_schedule(0.2, 5, spread) == [0.2, 0.4, 0.6, 0.8, 1.0]
    assert temperature_schedule(0.0, 3, spread, cap=0.8) == [0.0, 0.4, 0.8]
    assert temperature_schedule(1.3, 3, spread) == [1.3, 1.3, 1.3]  # never cooler than asked
    assert temperature_schedule(None, 3, spread) == [None, None, None]  # the model's own default stands
    with pytest.raises(ValueError):
        temperature_schedule(0.2, 0, spread)


def test_the_default_schedule_is_flat_as_the_search_benchmark_found() -> None:
    assert config().temperature_schedule is TemperatureSchedule.FLAT
    assert temperature_schedule(0.2, 4) == [0.2] * 4
    assert temperature_schedule(0.7, 3, TemperatureSchedule.FLAT) == [0.7, 0.7, 0.7]
    assert temperature_schedule(None, 2) == [None, None]
    with pytest.raises(ValueError):
        temperature_schedule(0.2, 0)


def test_a_sample_key_travels_in_metadata_and_a_temperature_only_where_one_is_set() -> None:
    key = SampleKey(3, 2, 1, turn=2)
    assert key_of(metadata_of(Sample(key, 0.5))) == key
    assert metadata_of(None) == {} and key_of({}) is None and key_of({"kernelwright_sample": "x"}) is None
    session = ScriptedSession({})
    assert at_temperature(session.model("coder", 0.2), 0.6).temperature == 0.6  # type: ignore[attr-defined]
    unset = session.model("coder")  # no temperature: the model's default is never overridden
    assert at_temperature(unset, 0.6) is unset


def _ideas(*plans: str) -> dict[str, Any]:
    return {"ideas": [{"plan": p, "expected_speedup": 1.2} for p in plans]}


KEYS = [(1, 1, 1), (1, 1, 2), (1, 2, 1), (1, 2, 2)]
MARKERS = {key: f"correct none {speed}" for key, speed in zip(KEYS, ("0.7", "0.8", "0.9", "0.95"), strict=True)}


def _keyed_run(
    order: list[tuple[int, int, int]], delays: list[float], schedule: str | None = "spread"
) -> tuple[runner.RunOutcome, ScriptedSession]:
    """A run of 2 ideas x 2 samples whose coder replies are keyed, listed in `order` and each
    taking its delay, so they finish in another order than they were asked in."""
    coder: list[Reply | Keyed] = [keyed(*k, slow(code(MARKERS[k]), d)) for k, d in zip(order, delays, strict=True)]
    session = ScriptedSession(
        {"planner": [_ideas("vectorise with float4", "a plain row loop")], "coder": coder, "reviewer": [review()]}
    )
    models = {role: session.model(role, 0.2) for role in ("planner", "coder", "reviewer")}
    flags: dict[str, Any] = {} if schedule is None else {"temperature_schedule": schedule}
    cfg = config(ideas=2, width=2, max_rounds=1, memory=False, **flags)  # the second run starts as the first did
    return runner.run(cfg, runner.RunParts(models, FakeEvaluator(), scripted=session)), session  # type: ignore[arg-type]


def test_keyed_replies_give_the_same_candidates_for_the_same_keys_whatever_order_they_finish_in() -> None:
    first, session = _keyed_run(KEYS, [0.4, 0.0, 0.25, 0.1])
    again, flat = _keyed_run(list(reversed(KEYS)), [0.3, 0.0, 0.4, 0.15], schedule=None)

    def by_key(outcome: runner.RunOutcome) -> dict[tuple[int, int, int], str]:
        marks = {}
        for candidate, key in zip(outcome.candidates, KEYS, strict=True):  # drafts in (idea, sample) order
            text = Path(candidate["path"]).read_text()
            marks[key] = text.split("# judge: ")[1].splitlines()[0]
            assert (
                candidate["parent"] is None
                and candidate["idea"] == ("vectorise with float4", "a plain row loop")[key[1] - 1]
            )
        return marks

    assert by_key(first) == by_key(again) == MARKERS  # an ordered script listed so would differ
    assert [k.as_tuple() if k else None for k, _ in session.asked["coder"]] == [(*k, 1) for k in KEYS]
    assert [t for _, t in session.asked["coder"]] == [0.2, 1.0, 0.2, 1.0]  # sample 2 of each idea drawn hotter
    usage = [e for e in first.events if isinstance(e, UsageUpdated) and e.role == "coder"]
    assert sorted((e.sample, e.temperature) for e in usage) == [(1, 0.2), (2, 1.0), (3, 0.2), (4, 1.0)]
    assert [t for _, t in flat.asked["coder"]] == [0.2] * 4  # the default: every sample at the coder's own


def test_a_repair_turn_has_its_own_key_and_an_unkeyed_request_takes_the_ordered_replies() -> None:
    session = ScriptedSession(
        {
            "planner": [{"plan": "one pass", "expected_speedup": 1.2}],
            "coder": [
                keyed(1, 1, 2, code("build_error compile_error")),
                keyed(1, 1, 1, code("correct none 1.4"), turn=2),  # the repair of the round's first drafts
                code("incorrect none"),  # ordered: the one request no keyed reply matches, (1, 1, 1) on turn 1
                keyed(1, 1, 2, code("correct none 1.2"), turn=2),
            ],
            "reviewer": [review()],
        }
    )
    cfg = config(width=2, max_rounds=1)
    outcome = runner.run(
        cfg,
        runner.RunParts(
            {r: session.model(r) for r in ("planner", "coder", "reviewer")}, FakeEvaluator(), scripted=session
        ),
    )  # type: ignore[arg-type]
    assert [c["verdict"] for c in outcome.candidates] == ["incorrect", "build_error", "correct", "correct"]
    assert [k.as_tuple() for k, _ in session.asked["coder"] if k] == [
        (1, 1, 1, 1),
        (1, 1, 2, 1),
        (1, 1, 1, 2),
        (1, 1, 2, 2),
    ]
    assert session.position == {"planner": 1, "coder": 1, "reviewer": 1}  # keyed replies are never used up
    lost = ScriptedSession({"coder": [keyed(1, 1, 1, "x")]})
    with pytest.raises(ScriptExhausted, match=r"no reply keyed \(2, 1, 1, 1\)"):
        lost.next_reply("coder", [], SampleKey(2, 1, 1))


def _prompt() -> list[BaseMessage]:
    return [HumanMessage("write a kernel")]


def test_the_endpoint_gets_each_samples_temperature_and_never_its_key(
    endpoint: tuple[Endpoint, str],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stub, url = endpoint
    cfg, deps, seen = _run(url, monkeypatch)
    spread = temperature_schedule(0.2, 3, TemperatureSchedule.SPREAD)
    samples = [Sample(SampleKey(1, 1, k + 1), t) for k, t in enumerate(spread)]
    answers = ask_many("coder", [_prompt()] * 3, cfg, deps, samples=samples)
    assert all(a.error is None for a in answers)
    assert sorted(body["temperature"] for body in stub.requests) == [0.2, 0.6, 1.0]
    assert not any("kernelwright_sample" in str(body) for body in stub.requests)  # metadata stays client-side
    assert sorted(e.temperature for e in seen if isinstance(e, UsageUpdated)) == [0.2, 0.6, 1.0]  # type: ignore[type-var]
    assert deps.models["coder"].temperature == 0.2  # type: ignore[attr-defined]  # the role keeps its own


def test_a_refused_temperature_stays_dropped_for_every_later_sample(
    endpoint: tuple[Endpoint, str],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stub, url = endpoint
    stub.answer = refusing("temperature", TEMPERATURE_REFUSED)
    cfg, deps, _ = _run(url, monkeypatch)
    samples = [Sample(SampleKey(1, 1, k + 1), t) for k, t in enumerate(temperature_schedule(0.2, 2))]
    assert [a.text for a in ask_many("coder", [_prompt()] * 2, cfg, deps, samples=samples)] == ["ok", "ok"]
    assert deps.models["coder"].temperature is None  # type: ignore[attr-defined]
    sent = len(stub.requests)
    assert [a.text for a in ask_many("coder", [_prompt()] * 2, cfg, deps, samples=samples)] == ["ok", "ok"]
    assert len(stub.requests) == sent + 2 and all("temperature" not in b for b in stub.requests[sent:])


def test_optimize_help_states_the_schedule(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.agent.helpers import run_cli

    monkeypatch.setenv("COLUMNS", "200")  # rich wraps help to the terminal's width
    assert run_cli(["optimize", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "flat (default), every sample at --temperature" in out
    assert "the first at --temperature and the others evenly up to 1.0 (width 3 at 0.2: 0.2, 0.6, 1.0)" in out
    assert "spread did not beat flat" in out


def test_a_runs_schedule_is_kept_for_its_resume(tmp_path: Path) -> None:
    from dataclasses import replace

    from kernelwright.agent import runs

    cfg = replace(config(temperature_schedule="spread", run_id="spread-run"), runs_dir=tmp_path)
    assert cfg.temperature_schedule == TemperatureSchedule.SPREAD
    runs.save_config(cfg)
    assert runs.load_config(tmp_path, "spread-run").temperature_schedule is TemperatureSchedule.SPREAD
    with pytest.raises(UsageError, match="--temperature-schedule must be one of flat, spread, not 'hot'"):
        config(temperature_schedule="hot")
    with pytest.raises(ValueError):
        temperature_schedule(0.2, 2, "hot")  # type: ignore[arg-type]
