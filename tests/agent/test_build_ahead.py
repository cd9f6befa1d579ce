"""Each coder reply is built as soon as it arrives (`nodes/ahead.py`, issue #31): a reply that came
back early is handed to the evaluator's `build_ahead` before the slowest one is in (the last one
is not: its evaluation starts at once), a reply without usable code builds nothing, a source
judged already is not built again, and on the CPU a real session's build ahead of a draft is the
build its candidate file's evaluation finds cached."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kernelwright.agent import runner, runs
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import BuildAhead, StepStarted, _Event
from kernelwright.agent.nodes.ahead import build_ahead_hook
from kernelwright.agent.scripted import ScriptedSession, slow
from kernelwright.harness.options import EvalOptions
from kernelwright.harness.session import EvalSession
from kernelwright.harness.verdicts import Verdict
from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import SOLUTIONS
from tests.agent.helpers import FakeEvaluator, code, config, plan, review


class BuildsAhead(FakeEvaluator):
    """A fake evaluator that can build ahead: records when each draft was handed over, and when
    the step's batch came to be judged."""

    def __init__(self) -> None:
        super().__init__()
        self.ahead: list[tuple[float, str]] = []
        self.judged_at: list[float] = []

    def build_ahead(self, candidates: list[Path]) -> None:
        self.ahead.extend((time.monotonic(), path.read_text()) for path in candidates)

    def evaluate(self, candidates: list[Path]) -> list[Any]:
        self.judged_at.append(time.monotonic())
        return super().evaluate(candidates)


def _run(coder: list[Any], evaluator: FakeEvaluator, **flags: Any) -> tuple[runner.RunOutcome, float]:
    """One round; returns the outcome and when the coder step started (monotonic)."""
    session = ScriptedSession({"planner": [plan()], "coder": coder, "reviewer": [review()]})
    models = {role: session.model(role, 0.2) for role in ("planner", "coder", "reviewer")}
    coder_started: list[float] = []

    def watch(event: _Event) -> None:
        if isinstance(event, StepStarted) and event.step == "coder":
            coder_started.append(time.monotonic())

    cfg = config(max_rounds=1, memory=False, coder_retries=0, **flags)
    parts = runner.RunParts(models, evaluator, scripted=session)  # type: ignore[arg-type]
    outcome = runner.run(cfg, parts, runner.RunSteering(subscribers=(watch,)))
    return outcome, coder_started[0]


def test_a_reply_that_comes_early_is_built_before_the_last_one_arrives() -> None:
    evaluator = BuildsAhead()
    replies = [
        slow(code("correct none 1.1"), 0.1),
        slow(code("correct none 1.2"), 0.5),
        slow(code("correct none 1.3"), 1.5),
    ]
    outcome, start = _run(replies, evaluator, width=3)

    # in the order they arrived, each once; the last one's evaluation starts as it arrives
    assert [source.split("# judge: ")[1].splitlines()[0] for _, source in evaluator.ahead] == [
        "correct none 1.1",
        "correct none 1.2",
    ]
    first = evaluator.ahead[0][0] - start
    assert first < 1.0  # the last reply takes 1.5 s from the coder's start: it was still awaited
    assert evaluator.judged_at[0] - start >= 1.5  # the step is judged once every reply is in
    events = [e for e in outcome.events if isinstance(e, BuildAhead)]
    assert [e.sample for e in events] == [1, 2]
    drafts = {Path(e.path) for e in events}
    assert all(p.parent == outcome.config.run_dir / "drafts" for p in drafts) and len(drafts) == 2
    # the candidates judged are the step's files, in the samples' order, whatever the drafts
    assert [Path(c["path"]).name for c in outcome.candidates] == ["001.py", "002.py", "003.py"]
    assert [c["verdict"] for c in outcome.candidates] == [Verdict.CORRECT.value] * 3


def test_a_reply_without_usable_code_builds_nothing() -> None:
    evaluator = BuildsAhead()
    replies = [
        slow("I would vectorise it, but here is no code.", 0.05),
        slow(code("correct none 1.1"), 0.2),
        slow(code("correct none 1.2"), 0.6),
    ]
    outcome, _ = _run(replies, evaluator, width=3)

    assert [source.split("# judge: ")[1].splitlines()[0] for _, source in evaluator.ahead] == ["correct none 1.1"]
    assert [e.sample for e in outcome.events if isinstance(e, BuildAhead)] == [2]
    assert len(list((outcome.config.run_dir / "drafts").glob("*.py"))) == 1


def test_a_source_judged_already_or_a_steps_only_reply_is_not_built_ahead_nor_for_an_evaluator_without_the_method(
    tmp_path: Path,
) -> None:
    cfg = config(memory=False)
    reply = code("correct none 1.1")
    source = reply.split("```python\n")[1].split("```")[0]
    evaluator = BuildsAhead()
    hook = build_ahead_hook(cfg, Deps(models={}, evaluator=evaluator), [None, None])
    assert hook is not None
    runs.store_result(cfg.run_dir, runs.source_sha(source), FakeEvaluator().evaluate([_written(tmp_path, source)])[0])
    hook(0, reply)
    assert evaluator.ahead == [] and not (cfg.run_dir / "drafts").exists()

    alone = build_ahead_hook(cfg, Deps(models={}, evaluator=evaluator), [None])
    assert alone is not None
    alone(0, code("correct none 1.2"))  # a step's only reply: its evaluation starts at once
    assert evaluator.ahead == []

    assert build_ahead_hook(cfg, Deps(models={}, evaluator=FakeEvaluator()), [None]) is None


def _written(folder: Path, source: str) -> Path:
    path = folder / "judged.py"
    path.write_text(source)
    return path


@pytest.mark.slow  # a real session: its reference, a C++ build and a candidate worker
def test_a_draft_built_ahead_is_found_cached_when_its_candidate_file_is_judged(tmp_path: Path) -> None:
    # relu's fast-form oracle with a library of its own: a cold build nobody else made
    unique = uuid.uuid4().hex[:12]
    source = (SOLUTIONS / "relu" / "cpp_fast.py").read_text().replace("kw_relu_cpp_fast", f"kw_relu_{unique}")
    cfg = config(memory=False)
    opts = EvalOptions(
        device="cpu", size="small", baselines=("eager",), timing=False, build_cache=tmp_path / "build-cache"
    )
    with EvalSession(resolve_problem("relu"), opts) as session:
        hook = build_ahead_hook(cfg, Deps(models={}, evaluator=session), [None, None])
        assert hook is not None
        hook(0, f"Here it is.\n```python\n{source}```\n")  # the step's other sample is awaited
        assert session.ahead is not None and session.ahead.wait(timeout_s=300)
        [built] = session.ahead.outcomes()
        assert built.status == "built" and built.candidate.parent == (cfg.run_dir / "drafts").resolve()
        # the evaluate node's file: another path, the same source
        candidate = runs.candidate_path(cfg.run_dir, 1)
        candidate.parent.mkdir(parents=True, exist_ok=True)
        candidate.write_text(source)
        [result] = session.evaluate([candidate])
    assert (result.verdict, result.build_cached) == (Verdict.CORRECT, True), result.message
