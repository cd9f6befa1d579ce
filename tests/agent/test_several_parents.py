"""Several parents shown together (#31): an idea may name up to two other correct candidates to
combine with its parent ("the tiling of 1 with the epilogue of 2"); the names are checked against
the run's correct candidates, the coder's prompt shows those sources after the parent's (clipped,
with a marker), and the candidate, its event, the idea log and the export record them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelwright.agent import runner
from kernelwright.agent.dataset import export_rows
from kernelwright.agent.events import CandidateEvaluated, PlanWritten
from kernelwright.agent.nodes import coder
from kernelwright.agent.nodes.planner import MAX_ALSO, checked_also
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.agent.state import CandidateRecord
from tests.agent.helpers import FakeEvaluator, code, config, models, review


def test_only_correct_candidates_other_than_the_parent_are_kept_and_at_most_two() -> None:
    correct = {1, 2, 3, 4}
    assert checked_also([2, 1, 99, 2, 3, 4], parent=1, correct=correct) == [2, 3]
    assert MAX_ALSO == 2 and checked_also([], parent=None, correct=correct) == []
    assert checked_also([5], parent=None, correct=correct) == []  # not a correct candidate of this run


def _idea(plan: str, also: list[int] | None = None) -> dict[str, Any]:
    return {"plan": plan, "expected_speedup": 1.3, **({"also": also} if also is not None else {})}


def test_an_idea_that_combines_two_parents_shows_both_and_records_them() -> None:
    vec = code("correct none 0.9").replace("# judge", "# float4 loads\n# judge")
    plain = code("correct none 0.6").replace("# judge", "# the row epilogue\n# judge")
    session = ScriptedSession(
        {  # type: ignore[arg-type]
            "planner": [
                {"ideas": [_idea("vectorise with float4"), _idea("a plain row loop")]},
                {
                    "ideas": [
                        # 99 is no candidate, 1 is the idea's own parent, 2 twice: kept [2]
                        _idea("float4 loads of 1 with the row epilogue of 2", also=[99, 1, 2, 2]),
                        _idea("block the plain loop by rows"),
                    ]
                },
            ],
            "coder": [vec, plain, code("correct none 1.8"), code("correct none 0.7")],
            "reviewer": [review(), review()],
        }
    )
    cfg = config(ideas=2, max_rounds=2, memory=False)
    outcome = runner.run(cfg, runner.RunParts(models(session), FakeEvaluator(), scripted=session))  # type: ignore[arg-type]
    first_plan, second_plan = (str(p[-1].content) for p in session.prompts["planner"])
    assert '"also"' not in first_plan and '"also": [3, 5]' in second_plan  # offered once there is something to combine
    combined = outcome.state["ideas"][0]
    assert combined["parent"] == 1 and combined["also"] == [2]
    assert "also" not in outcome.state["ideas"][1]
    assert outcome.state["idea_log"][1]["ideas"][0]["also"] == [2]
    prompts = [str(p[-1].content) for p in session.prompts["coder"]]
    shown = prompts[2]
    assert "# Also combine: candidate 2" in shown and "# the row epilogue" in shown
    assert shown.index("Starting point (the base for edits): candidate 1") < shown.index("# float4 loads")
    assert shown.index("# float4 loads") < shown.index("# Also combine") < shown.index("# the row epilogue")
    assert "# Also combine" not in prompts[3] and "# Also combine" not in prompts[0]
    by_index = {c["index"]: c for c in outcome.candidates}
    assert by_index[3]["parent"] == 1 and by_index[3]["also"] == [2] and "also" not in by_index[4]
    [event] = [e for e in outcome.events if isinstance(e, CandidateEvaluated) and e.index == 3]
    assert event.also == [2]
    plans = [e.plan for e in outcome.events if isinstance(e, PlanWritten)]
    assert "idea 1 (from candidate 1 with candidate 2): float4 loads" in plans[1]
    rows = {row.index: row for row in export_rows(cfg.runs_dir, cfg.run_id)}
    assert rows[3].parents == [1, 2] and rows[4].parents == [2]


def _record(path: Path, index: int) -> CandidateRecord:
    return CandidateRecord(
        index=index,
        round=1,
        attempt=1,
        sha256="x",
        path=str(path),
        verdict="correct",
        reason=None,
        message="",
        speedups={},
        target_baseline=None,
        beats_target=False,
        parent=None,
    )


def test_an_extra_parents_source_is_clipped_with_a_marker(tmp_path: Path) -> None:
    long = tmp_path / "long.py"
    long.write_text("".join(f"x_{i} = {i}  # a line of a long kernel\n" for i in range(2000)))
    short = tmp_path / "short.py"
    short.write_text("y = 1\n")
    text = coder.also_text([_record(long, 7), _record(short, 8)])
    assert text.startswith("# Also combine: candidate 7, candidate 8")
    assert "characters of candidate 7 left out here" in text and "read_candidate(7, offset=N)" in text
    assert "x_0 = 0" in text and "x_1999 = 1999" in text  # head and tail kept
    assert len(text) < coder.ALSO_SOURCE_CHARS + 500 and "y = 1" in text
    assert coder.also_text([]) == ""


def test_optimize_says_which_parents_a_candidate_came_from() -> None:
    from io import StringIO

    from rich.console import Console

    from kernelwright.cli.agent_run import HeadlessRenderer

    out = StringIO()
    render = HeadlessRenderer(Console(file=out, width=200, no_color=True))
    render(CandidateEvaluated(run_id="r", index=3, verdict="correct", parent=1, also=[2]))
    render(CandidateEvaluated(run_id="r", index=4, verdict="correct", parent=2))
    assert "candidate 3 (from 1 with 2): correct" in out.getvalue()
    assert "candidate 4 (from 2): correct" in out.getvalue()
