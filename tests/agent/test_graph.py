"""The agent's graph driven by the scripted chat model and a fake evaluator: routing, retries,
acceptance computed in code, budgets, and what each prompt carries."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernelwright.agent import runner
from kernelwright.agent.scripted import ScriptedSession, ScriptExhausted
from tests.agent.helpers import FakeEvaluator, code, config, models, plan, review


def _run(script: dict[str, list[object]], evaluator: FakeEvaluator | None = None, **flags: object):
    session = ScriptedSession(script)  # type: ignore[arg-type]
    cfg = config(**flags)
    outcome = runner.run(cfg, runner.RunParts(models(session), evaluator or FakeEvaluator(), scripted=session))  # type: ignore[arg-type]
    return outcome, session


@pytest.mark.parametrize("method", ["function_calling", "plain_json"])
def test_success_path_accepts_a_candidate_that_beats_the_target(method: str) -> None:
    outcome, _ = _run(
        {"planner": [plan()], "coder": [code("correct none 2.0")], "reviewer": [review(lesson="one pass wins")]},
        structured_method=method,
    )
    assert outcome.accepted and outcome.exit_code == 0
    assert outcome.stop_reason.startswith("accepted: candidate 1 beats compile")
    run_dir = outcome.config.run_dir
    assert (run_dir / "best.py").read_text() == (run_dir / "candidates" / "001.py").read_text()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["schema_version"] == 1 and summary["accepted"] and summary["lessons"] == ["one pass wins"]
    trajectory = json.loads((run_dir / "trajectory.json").read_text())
    kinds = [e["kind"] for e in trajectory["events"]]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished" and "candidate_evaluated" in kinds
    assert summary["usage"]["total_tokens"] > 0  # the scripted model's documented estimate
    assert (run_dir / "checkpoints.sqlite").exists()


def test_build_error_goes_back_to_the_coder_with_the_error_then_fixed() -> None:
    outcome, session = _run(
        {
            "planner": [plan()],
            "coder": [code("build_error compile_error"), code("correct none 1.8")],
            "reviewer": [review()],
        }
    )
    assert [c["verdict"] for c in outcome.candidates] == ["build_error", "correct"]
    assert outcome.accepted
    retry_prompt = session.prompts["coder"][1][-1].content
    assert "build_error (compile_error)" in retry_prompt and "was not declared" in retry_prompt


def test_rejected_hack_is_never_accepted_and_its_reason_reaches_the_next_prompts() -> None:
    outcome, session = _run(
        {
            "planner": [plan("call torch.relu"), plan("write our own loop")],
            "coder": [code("rejected torch_fallback 50.0"), code("correct none 1.3")],
            "reviewer": [review(feedback="torch.relu did the work: a fallback"), review()],
        },
        max_rounds=2,
        coder_retries=0,  # no repair turn: the rejection goes straight to the reviewer
    )
    first = outcome.candidates[0]
    assert first["verdict"] == "rejected" and not first["beats_target"]
    assert outcome.best is not None and outcome.best["index"] == 2
    assert "torch_fallback" in session.prompts["reviewer"][0][-1].content
    assert "torch_fallback" in session.prompts["planner"][1][-1].content
    assert "a fallback" in session.prompts["coder"][1][-1].content


def test_a_rejected_draft_comes_back_for_repair_with_the_registry_entry_not_the_detector() -> None:
    outcome, session = _run(
        {
            "planner": [plan("call torch.relu")],
            "coder": [code("rejected torch_fallback 50.0"), code("correct none 1.3")],
            "reviewer": [review()],
        },
    )
    assert [c["verdict"] for c in outcome.candidates] == ["rejected", "correct"] and outcome.accepted
    repair = session.prompts["coder"][1][-1].content
    assert "Your draft (candidate 1) failed: repair it" in repair
    assert "# judge: rejected torch_fallback 50.0" in repair  # its own draft, in full
    assert "What `torch_fallback` means and why it does not count: PyTorch did the main computation" in repair


def test_budget_exhaustion_keeps_the_best_correct_candidate() -> None:
    outcome, _ = _run(
        {
            "planner": [plan(), plan(), plan()],
            "coder": [code("correct none 0.8"), code("correct none 0.9"), code("incorrect output_mismatch")],
            "reviewer": [review(decision="iterate"), review(), review()],
        },
        max_rounds=3,
        coder_retries=0,
    )
    assert not outcome.accepted and outcome.exit_code == 1
    assert outcome.stop_reason == "budget: 3 round(s) done"
    assert outcome.best is not None and outcome.best["index"] == 2
    assert "# judge: correct none 0.9" in (outcome.config.run_dir / "best.py").read_text()


def test_no_improvement_budget_stops_early() -> None:
    outcome, _ = _run(
        {
            "planner": [plan()] * 3,
            "coder": [code("correct none 0.5"), code("correct none 0.4"), code("correct none 0.3")],
            "reviewer": [review()] * 3,
        },
        no_improvement_rounds=2,
    )
    assert outcome.stop_reason == "budget: no improvement for 2 round(s)" and outcome.state["round"] == 3


def test_reviewer_cannot_accept_a_slow_candidate() -> None:
    outcome, _ = _run(
        {"planner": [plan()], "coder": [code("correct none 0.9")], "reviewer": [review(feedback="ACCEPT! ship it")]},
        max_rounds=1,
    )
    assert not outcome.accepted and outcome.stop_reason.startswith("budget")


def test_a_reply_with_no_code_goes_back_to_the_coder() -> None:
    outcome, session = _run(
        {
            "planner": [plan()],
            "coder": ["I would write a kernel.", "```python\ndef broken(:\n```", code("correct none 2.0")],
            "reviewer": [review()],
        }
    )
    assert outcome.accepted and len(outcome.candidates) == 1
    assert "no ```python code block" in session.prompts["coder"][1][-1].content
    assert "not valid Python" in session.prompts["coder"][2][-1].content


def test_bounded_no_code_replies_end_the_round() -> None:
    outcome, _ = _run(
        {"planner": [plan()], "coder": ["no code"] * 3, "reviewer": [review()]}, max_rounds=1, no_code_retries=2
    )
    assert outcome.candidates == [] and outcome.stop_reason == "budget: 1 round(s) done"


def test_script_running_out_is_a_clear_error_and_the_run_is_saved() -> None:
    session = ScriptedSession({"planner": [plan()], "coder": [code("correct none 0.5")], "reviewer": []})
    cfg = config()
    with pytest.raises(ScriptExhausted, match="0 reviewer replies; the run asked for reply 1"):
        runner.run(cfg, runner.RunParts(models(session), FakeEvaluator(), scripted=session))  # type: ignore[arg-type]
    summary = json.loads((cfg.run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("interrupted") and len(summary["candidates"]) == 1


def test_a_run_killed_mid_round_resumes_without_re_evaluating() -> None:
    script = {
        "planner": [plan(), plan()],
        "coder": [code("correct none 0.9"), code("correct none 1.6")],
        "reviewer": [review(), review()],
    }
    evaluator = FakeEvaluator()
    cfg = config(max_rounds=3)

    class Kill(Exception):
        pass

    def kill_after_first_result(event: object) -> None:
        if getattr(event, "kind", "") == "candidate_evaluated":
            raise Kill  # dies inside the evaluate node, after the result was stored

    first = ScriptedSession(script)  # type: ignore[arg-type]
    with pytest.raises(Kill):
        runner.run(
            cfg,
            runner.RunParts(models(first), evaluator, scripted=first),
            runner.RunSteering(subscribers=(kill_after_first_result,)),
        )  # type: ignore[arg-type]
    assert len(evaluator.calls) == 1
    again = ScriptedSession(script)  # type: ignore[arg-type]
    outcome = runner.run(
        cfg, runner.RunParts(models(again), evaluator, scripted=again), runner.RunSteering(resume=True)
    )  # type: ignore[arg-type]
    assert len(evaluator.calls) == 2  # candidate 1 read back by source hash, candidate 2 evaluated
    assert outcome.accepted and [c["index"] for c in outcome.candidates] == [1, 2]
    cached = [e for e in outcome.events if getattr(e, "kind", "") == "candidate_evaluated"]
    assert [e.cached for e in cached] == [True, False]


def test_a_queued_hint_reaches_the_next_planner_prompt() -> None:
    session = ScriptedSession({"planner": [plan()], "coder": [code("correct none 2.0")], "reviewer": [review()]})
    cfg = config()
    runner.run(
        cfg,
        runner.RunParts(models(session), FakeEvaluator(), scripted=session),
        runner.RunSteering(hints=("try AVX-512 intrinsics",)),
    )  # type: ignore[arg-type]
    assert "try AVX-512 intrinsics" in session.prompts["planner"][0][-1].content


def test_prompts_stay_bounded_over_twenty_rounds() -> None:
    """Context is digests, not transcripts: the coder's prompt in round 20 is at most 1.5x round 1's."""
    rounds = 20
    script = {
        "planner": [plan(f"idea number {i}: " + "tile and unroll " * 10) for i in range(rounds)],
        "coder": [code(f"correct none {0.5 + i * 0.01:.2f}") for i in range(rounds)],
        "reviewer": [review(lesson=f"lesson {i}: " + "memory traffic matters " * 5) for i in range(rounds)],
    }
    outcome, session = _run(script, max_rounds=rounds, no_improvement_rounds=rounds)
    assert outcome.state["round"] == rounds
    sizes = [sum(len(str(m.content)) for m in prompt) for prompt in session.prompts["coder"]]
    assert sizes[-1] <= 1.5 * sizes[0], sizes
    planner_sizes = [sum(len(str(m.content)) for m in prompt) for prompt in session.prompts["planner"]]
    assert planner_sizes[-1] <= 1.5 * planner_sizes[0], planner_sizes  # every round kept, one short line each
    last = session.prompts["planner"][-1][-1].content
    assert "r1: idea number 0" in last and "r19: idea number 18" in last  # the whole run, not the last 4 rounds


def test_width_3_samples_three_candidates_and_evaluates_them_as_one_batch() -> None:
    evaluator = FakeEvaluator()
    outcome, session = _run(
        {
            "planner": [plan()],
            "coder": [code("build_error compile_error"), code("correct none 0.9"), code("correct none 1.5")],
            "reviewer": [review()],
        },
        evaluator,
        width=3,
    )
    assert evaluator.batches == [3] and len(session.prompts["coder"]) == 3
    assert [c["verdict"] for c in outcome.candidates] == ["build_error", "correct", "correct"]
    assert outcome.accepted and outcome.best is not None and outcome.best["index"] == 3
    assert "candidate 3: correct" in session.prompts["reviewer"][0][-1].content


def test_pause_before_the_coder_lets_a_person_edit_the_plan() -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from kernelwright.agent.deps import Deps
    from kernelwright.agent.graph import build_graph

    script = {"planner": [plan("the model's plan")], "coder": [code("correct none 2.0")], "reviewer": [review()]}
    session = ScriptedSession(script)  # type: ignore[arg-type]
    cfg = config(approve_plans=True)
    deps = Deps(models=models(session), evaluator=FakeEvaluator())  # type: ignore[arg-type]
    graph = build_graph(InMemorySaver())
    thread: Any = {"configurable": {"thread_id": "t", "agent_config": cfg, "deps": deps}}
    paused = graph.invoke(runner.initial_state(cfg), thread)
    assert paused["__interrupt__"][0].value["plan"] == "the model's plan"
    assert graph.get_state(thread).next == ("coder",) and "coder" not in session.prompts
    final = graph.invoke(Command(resume="the person's plan"), thread)
    assert final["accepted"] and final["plan"] == "the person's plan"
    assert "the person's plan" in session.prompts["coder"][0][-1].content


def test_a_scripted_run_stops_at_the_first_unexpected_verdict() -> None:
    from kernelwright.agent.scripted import ScriptDiverged

    script = {
        "planner": [plan()] * 2,
        "coder": [code("correct none 0.5"), code("crashed segfault")],
        "reviewer": [review()] * 2,
    }
    session = ScriptedSession(script, expected_verdicts=["correct", "correct"])  # type: ignore[arg-type]
    cfg = config()
    with pytest.raises(ScriptDiverged, match=r"candidate 2 .* is crashed \(segfault\); the script expected correct"):
        runner.run(
            cfg,
            runner.RunParts(models(session), FakeEvaluator(), scripted=session),
            runner.RunSteering(subscribers=(session.watch,)),
        )  # type: ignore[arg-type]
    summary = json.loads((cfg.run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("interrupted: candidate 2") and len(summary["candidates"]) == 1
