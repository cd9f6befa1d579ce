"""The agent and its memory, with the scripted chat model and the fake evaluator: every judged
candidate written as it is judged (plan, verdict, speedups, then the lesson), the planner's
prompt showing what was recalled and why, and a second run of a solved problem starting from the
first run's best kernel, evaluated again here."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.agent import runner
from kernelwright.agent.deps import CandidateProfile
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.config import load_settings
from kernelwright.harness.verdicts import Verdict
from kernelwright.memory import KnowledgeBase
from tests.agent.helpers import FakeEvaluator, code, config, models, plan, review


def _run(script: dict[str, list[object]], evaluator: FakeEvaluator | None = None, **flags: object):
    session = ScriptedSession(script)  # type: ignore[arg-type]
    flags.setdefault("coder_retries", 0)  # a rejected draft goes to the reviewer, not back for repair
    outcome = runner.run(
        config(**flags), runner.RunParts(models(session), evaluator or FakeEvaluator(), scripted=session)
    )  # type: ignore[arg-type]
    return outcome, session


def _memory() -> KnowledgeBase:
    path = load_settings().memory_db
    assert path is not None and path.parent.name.startswith("test_"), path  # the test's own, never a user's
    return KnowledgeBase.open(path)


FIRST = {
    "planner": [plan("a first single-pass loop"), plan("unroll by four")],
    "coder": [code("rejected torch_fallback 9.0"), code("correct none 1.3")],
    "reviewer": [review(lesson="torch.relu for the work is rejected"), review(lesson="unrolling by four paid off")],
}


def test_every_candidate_is_remembered_with_plan_verdict_speedups_and_lesson() -> None:
    outcome, _ = _run(FIRST, max_rounds=2)
    assert outcome.accepted
    with _memory() as kb:
        rows = sorted(kb.candidates(run_id=outcome.config.run_id), key=lambda c: c.index)
    assert [(r.index, r.verdict, r.error_class) for r in rows] == [
        (1, "rejected", "torch_fallback"),
        (2, "correct", None),
    ]
    rejected, correct = rows
    assert rejected.plan == "a first single-pass loop" and rejected.lesson == "torch.relu for the work is rejected"
    assert correct.plan == "unroll by four" and correct.lesson == "unrolling by four paid off"
    assert correct.speed_compile is not None and correct.speed_compile.ratio == 1.3 and correct.speed_eager is not None
    assert correct.problem == "level1/1_relu" and correct.backend == "cpp" and correct.device == "cpu"
    assert correct.scripted == "test" and "# judge: correct none 1.3" in correct.source
    assert (outcome.config.run_dir / "candidates" / "002.py").read_text() == correct.source


def test_a_killed_run_has_already_remembered_what_was_judged() -> None:
    class Kill(Exception):
        pass

    def kill(event: object) -> None:
        if getattr(event, "kind", "") == "candidate_evaluated":
            raise Kill  # inside the evaluate node, right after the harness's verdict

    session = ScriptedSession(FIRST)  # type: ignore[arg-type]
    cfg = config(max_rounds=2)
    with pytest.raises(Kill):
        runner.run(
            cfg,
            runner.RunParts(models(session), FakeEvaluator(), scripted=session),
            runner.RunSteering(subscribers=(kill,)),
        )  # type: ignore[arg-type]
    with _memory() as kb:
        [row] = kb.candidates(run_id=cfg.run_id)
    assert row.verdict == "rejected" and row.plan == "a first single-pass loop"


def test_a_second_run_of_a_solved_problem_starts_from_the_first_runs_best_kernel() -> None:
    first, _ = _run(FIRST, max_rounds=2)
    best_source = (first.config.run_dir / "best.py").read_text()

    # Solved before and still beating the target here: re-evaluated as candidate 0 and accepted,
    # without a single LLM call.
    evaluator = FakeEvaluator()
    again, session = _run({"planner": [], "coder": [], "reviewer": []}, evaluator)
    assert evaluator.calls == [best_source]
    assert again.accepted and again.stop_reason.startswith("accepted: candidate 0 beats compile")
    assert [c["index"] for c in again.candidates] == [0] and session.prompts == {}
    assert (again.config.run_dir / "best.py").read_text() == best_source
    kinds = [getattr(e, "kind", "") for e in again.events]
    assert kinds.index("remembered_start") < kinds.index("candidate_evaluated")
    start = next(e for e in again.events if getattr(e, "kind", "") == "remembered_start")
    assert start.from_run == first.config.run_id and start.from_index == 2  # type: ignore[attr-defined]
    assert again.state["remembered"]["run_id"] == first.config.run_id  # type: ignore[index]

    # A higher target: the run plans from that kernel, and the prompts say where it came from and why.
    third, session = _run(
        {
            "planner": [plan("vectorize the remembered loop")],
            "coder": [code("correct none 2.6")],
            "reviewer": [review()],
        },
        target=2.0,
    )
    assert third.accepted and [c["index"] for c in third.candidates] == [0, 1]
    assert third.candidates[1]["parent"] == 0
    planner_prompt = session.prompts["planner"][0][-1].content
    assert "Starting point of this round: candidate 0: correct; 1.30x vs eager" in planner_prompt
    assert "(remembered from an earlier run, re-evaluated here as candidate 0)" in planner_prompt
    memory = planner_prompt.split("# Memory")[1].split("# Hints")[0]
    assert "Same problem, this machine:" in memory and "unrolling by four paid off" in memory
    assert "why: same problem (level1/1_relu) on this machine" in memory and "General lessons:" in memory
    assert "# judge: correct none 1.3" in session.prompts["coder"][0][-1].content  # the coder starts from it
    recalled = next(e for e in third.events if getattr(e, "kind", "") == "memory_recalled")
    assert recalled.items and all(i["why"] for i in recalled.items)  # type: ignore[attr-defined]


def test_a_remembered_kernel_that_is_no_longer_correct_is_not_a_starting_point() -> None:
    _run({"planner": [plan()], "coder": [code("correct none 1.3")], "reviewer": [review()]})

    class Stricter(FakeEvaluator):  # the harness (or the machine) changed: the same kernel is now rejected
        def evaluate(self, candidates: list[Path]):  # type: ignore[no-untyped-def]
            return [
                r.model_copy(update={"verdict": Verdict.REJECTED, "speedups": {}}) for r in super().evaluate(candidates)
            ]

    outcome, session = _run(
        {"planner": [plan()], "coder": [code("correct none 1.1")], "reviewer": [review()]}, Stricter(), max_rounds=1
    )
    assert [(c["index"], c["verdict"]) for c in outcome.candidates] == [(0, "rejected"), (1, "rejected")]
    assert outcome.state.get("origin") is None and outcome.candidates[1]["parent"] is None
    prompt = session.prompts["planner"][0][-1].content
    assert "is now rejected here; starting without it" in prompt
    assert "correct, 1.30x" not in prompt.split("# Memory")[1]  # the stale kernel is not offered as a kernel
    # Memory has seen it rejected since: the next run does not start from it.
    third, _ = _run({"planner": [plan()], "coder": [code("correct none 1.2")], "reviewer": [review()]})
    assert [c["index"] for c in third.candidates] == [1]


def test_no_memory_neither_reads_nor_writes() -> None:
    _run({"planner": [plan()], "coder": [code("correct none 1.3")], "reviewer": [review()]})
    outcome, session = _run(
        {"planner": [plan()], "coder": [code("correct none 1.4")], "reviewer": [review()]}, memory=False
    )
    assert [c["index"] for c in outcome.candidates] == [1]
    assert "(memory is off for this run)" in session.prompts["planner"][0][-1].content
    with _memory() as kb:
        assert kb.candidates(run_id=outcome.config.run_id) == []


class _Profiler:
    def profile(self, candidate: Path, report_path: Path) -> CandidateProfile:
        return CandidateProfile(ok=True, text=f"kernel: relu_kernel of {candidate.name}\nbottleneck: memory-bound")


def test_the_profilers_digest_is_attached_to_the_candidate() -> None:
    session = ScriptedSession({"planner": [plan()], "coder": [code("correct none 1.3")], "reviewer": [review()]})
    cfg = config(device="cuda", backend="cuda")
    runner.run(cfg, runner.RunParts(models(session), FakeEvaluator(), scripted=session, profiler=_Profiler()))  # type: ignore[arg-type]
    with _memory() as kb:
        [row] = kb.candidates(run_id=cfg.run_id)
    assert row.digest.startswith("kernel: relu_kernel of 001.py") and row.lesson == "a lesson"
