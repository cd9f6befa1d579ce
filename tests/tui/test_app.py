"""The TUI driven with Textual's Pilot: a run shown as it happens, every steering action reaching
the graph (a hint in the next planner prompt, a pause at a checkpoint, an edited plan in the
coder's prompt, a stop keeping the best), branch and export, leaving mid-run with a resumable run,
a harness that crashes on a candidate, a finished run browsed read-only, and the command palette.
The graph runs for real in its thread, with the scripted chat model and a fake evaluator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.agent import runner
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.config import load_settings
from kernelwright.tui.app import make_app
from kernelwright.tui.launch import RunRequest
from kernelwright.tui.screens.plan import PlanScreen
from kernelwright.tui.screens.prompt import ConfirmScreen, PromptScreen
from kernelwright.tui.screens.run import RunScreen
from kernelwright.tui.widgets.candidates import CandidateTree
from kernelwright.tui.widgets.timeline import Timeline
from kernelwright.vocabulary import Device
from tests.agent.helpers import FakeEvaluator, code, models, plan, review
from tests.tui.helpers import SCRIPT, FakeBackend, fake_app, gated_app, run_screen, wait_for

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _kinds(screen: RunScreen) -> list[str]:
    return [s.step for s in screen.progress.steps]


async def test_a_run_shows_its_steps_candidates_and_meters_as_it_goes() -> None:
    app, _backend = fake_app(max_rounds=2)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: not screen.progress.running)
        progress = screen.progress
        assert progress.status == "finished" and progress.stop_reason.startswith("accepted: candidate 2")
        assert _kinds(screen)[:5] == ["planner", "coder", "evaluate", "profile", "reviewer"]
        assert all(s.status == "done" and s.seconds is not None for s in progress.steps)
        assert progress.tokens > 0 and progress.estimated_tokens  # the scripted model's documented estimate
        timeline = screen.query_one(Timeline)
        assert timeline.row_count == len(progress.steps)
        tree = screen.query_one(CandidateTree)
        labels = [str(n.label) for n in tree.root.children] + [str(n.label) for n in tree.root.children[0].children]
        assert labels == [" #1 ✓ correct 0.80x|0.80x", "★#2 ✓ correct 1.60x|1.60x"]  # #2 started from #1
        await pilot.press("2")  # the code tab shows the newest candidate, with its verdict line
        body = str(screen.query_one("#code-body").render())
        assert "#2 round 2 · from #1 · ✓ correct" in body or screen.selected_candidate().index == 2


async def test_a_hint_typed_during_a_step_reaches_the_next_planner_prompt() -> None:
    app, backend, gate = gated_app(max_rounds=2)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: gate.waiting == 1)
        await pilot.press("h")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press(*"use float4 loads")
        await pilot.press("enter")
        assert isinstance(app.screen, RunScreen)
        gate.allow(2)
        await wait_for(pilot, lambda: not screen.progress.running)
    prompts = backend.session.prompts["planner"]
    assert "use float4 loads" not in prompts[0][-1].content and "use float4 loads" in prompts[1][-1].content
    assert any("hints: use float4 loads" in d for s in screen.progress.steps for d in s.detail)


async def test_pause_stops_at_the_next_checkpoint_and_resume_carries_on() -> None:
    app, _backend, gate = gated_app(max_rounds=2)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: gate.waiting == 1)
        await pilot.press("p")
        assert screen.progress.status == "pausing"
        gate.allow()
        await wait_for(pilot, lambda: screen.progress.status == "paused")
        steps = _kinds(screen)
        await pilot.pause(0.3)
        assert _kinds(screen) == steps and "profile" not in steps  # nothing ran while paused
        await pilot.press("p")
        gate.allow()
        await wait_for(pilot, lambda: not screen.progress.running)
    assert screen.progress.status == "finished" and len(screen.progress.candidates) == 2


async def test_plan_approval_shows_the_plan_and_an_edit_reaches_the_coder() -> None:
    app, backend, gate = gated_app(max_rounds=1, approve=True)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
        assert screen.progress.status == "awaiting approval"
        area = app.screen.query_one("#plan-text")
        area.text = "fuse the loops, then vectorise"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        gate.allow()
        await wait_for(pilot, lambda: not screen.progress.running)
    coder_prompt = backend.session.prompts["coder"][0][-1].content
    assert "fuse the loops, then vectorise" in coder_prompt and "one pass over the data" not in coder_prompt


async def test_escape_approves_the_plan_as_written() -> None:
    app, backend, gate = gated_app(max_rounds=1, approve=True)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
        await pilot.press("escape")
        gate.allow()
        await wait_for(pilot, lambda: not screen.progress.running)
    assert "one pass over the data" in backend.session.prompts["coder"][0][-1].content


async def test_approval_can_be_switched_on_mid_run() -> None:
    app, _backend, gate = gated_app(max_rounds=2)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: gate.waiting == 1)
        await pilot.press("a")
        gate.allow()
        await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))  # round 2's plan waits
        await pilot.press("escape")
        gate.allow()
        await wait_for(pilot, lambda: not screen.progress.running)
    assert screen.progress.round == 2


async def test_stop_keeps_the_best_and_ends_the_run() -> None:
    app, backend, gate = gated_app(max_rounds=5)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: gate.waiting == 1)
        await pilot.press("s")
        gate.allow()
        await wait_for(pilot, lambda: not screen.progress.running)
    progress = screen.progress
    assert (
        progress.status == "finished" and progress.stop_reason == "stopped by the user (candidate 1 is the best so far)"
    )
    assert progress.best_index == 1 and "reviewer" not in backend.session.prompts
    summary = json.loads((screen.config.run_dir / "summary.json").read_text())
    assert summary["finished"] and not summary["accepted"]


async def test_export_writes_the_selected_candidate_as_a_drop_in_file(tmp_path: Path) -> None:
    app, _backend = fake_app(max_rounds=2)
    target = tmp_path / "out" / "relu_fast.py"
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: not screen.progress.running)
        await pilot.press("e")
        assert isinstance(app.screen, PromptScreen)
        app.screen.query_one("#prompt-input").value = str(target)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
    source = (screen.config.run_dir / "candidates" / "002.py").read_text()
    assert target.read_text() == source and "class ModelNew" in source


async def test_branch_starts_a_new_run_from_the_selected_candidate() -> None:
    script = {
        "planner": [plan(), plan(), plan("from the branch")],
        "coder": [code("correct none 0.8"), code("correct none 1.6"), code("correct none 2.0")],
        "reviewer": [review(), review(), review()],
    }
    app, backend = fake_app(FakeBackend(script), max_rounds=2)
    async with app.run_test(size=(80, 24)) as pilot:
        first = run_screen(app)
        await wait_for(pilot, lambda: not first.progress.running)
        first._candidate = 1  # the person highlighted candidate 1
        await pilot.press("b")
        await wait_for(pilot, lambda: run_screen(app) is not first)
        second = run_screen(app)
        await wait_for(pilot, lambda: not second.progress.running)
    assert second.config.branch_from == first.config.run_id and second.config.branch_candidate == 1
    assert 0 in second.progress.candidates and "from run" in second.progress.candidates[0].message
    assert "the candidate this run branched from" in backend.session.prompts["planner"][2][-1].content
    assert "from the branch" in backend.session.prompts["coder"][2][-1].content


async def test_branch_while_running_asks_to_stop_first() -> None:
    app, _backend, gate = gated_app(max_rounds=2)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: gate.waiting == 1)
        await pilot.press("b")
        assert run_screen(app) is screen
        gate.allow(2)
        await wait_for(pilot, lambda: not screen.progress.running)


async def test_leaving_mid_run_leaves_a_resumable_run() -> None:
    app, _backend, gate = gated_app(max_rounds=2)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: gate.waiting == 1)
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause()
    thread = screen.thread
    assert thread is not None and not thread.alive  # the interrupt ended the evaluation at once
    cfg = screen.config
    summary = json.loads((cfg.run_dir / "summary.json").read_text())
    assert not summary["finished"] and summary["candidates"] == []
    session = ScriptedSession(SCRIPT)  # type: ignore[arg-type]
    evaluator = FakeEvaluator()
    outcome = runner.run(
        cfg, runner.RunParts(models(session), evaluator, scripted=session), runner.RunSteering(resume=True)
    )  # type: ignore[arg-type]
    assert outcome.finished and outcome.accepted and len(evaluator.calls) == 2


async def test_a_harness_that_crashes_on_a_candidate_is_shown_not_fatal() -> None:
    app, _backend = fake_app(FakeBackend(fail_with=RuntimeError("harness bug: worker table corrupt")), max_rounds=2)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: not screen.progress.running)
        assert app.is_running and isinstance(app.screen, RunScreen)
    progress = screen.progress
    assert progress.status == "failed" and "harness bug: worker table corrupt" in progress.stop_reason
    evaluate = next(s for s in progress.steps if s.step == "evaluate")
    assert evaluate.status == "failed" and any("harness bug" in d for d in evaluate.detail)


async def test_a_finished_run_opens_read_only(tmp_path: Path) -> None:
    app, _backend = fake_app(max_rounds=2)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: not screen.progress.running)
    cfg = screen.config
    browse = make_app(load_settings(), request=RunRequest(config=cfg, read_only=True), backend=FakeBackend())
    async with browse.run_test(size=(80, 24)) as pilot:
        view = run_screen(browse)
        await pilot.pause()
        assert view.thread is None and view.progress.status == "finished"
        assert [c.index for c in view.progress.ordered_candidates()] == [1, 2] and view.progress.best_index == 2
        await pilot.press("p")  # steering a finished run says why it cannot
        await pilot.pause()
        assert view.progress.status == "finished"


async def test_every_steering_action_is_in_the_command_palette() -> None:
    app, _backend = fake_app(max_rounds=1)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = run_screen(app)
        await wait_for(pilot, lambda: not screen.progress.running)
        titles = [c.title for c in app.get_system_commands(screen)]
    for wanted in (
        "Pause or resume",
        "Toggle plan approval",
        "Give a hint",
        "Stop and keep the best",
        "Branch",
        "Export",
    ):
        assert any(t.startswith(wanted) for t in titles), wanted
    bound = {b.action for b in RunScreen.BINDINGS}  # and each is a key
    assert {"pause", "approval", "hint", "stop", "branch", "export", "report", "quit_run"} <= bound


def test_the_chart_plots_each_correct_candidate_at_its_round_and_the_best_as_steps() -> None:
    from kernelwright.agent.progress import Candidate, RunProgress
    from kernelwright.tui.widgets.chart import series

    progress = RunProgress()
    rows = [(1, "correct", 0.3), (2, "build_error", None), (2, "correct", 0.7), (3, "rejected", None)]
    rows += [(4, "correct", 2.2), (4, "correct", 1.1)]
    for index, (round_, verdict, ratio) in enumerate(rows, 1):
        cand = Candidate(index=index, round=round_, verdict=verdict)
        if ratio is not None:
            cand.speedups = {"compile": {"ratio": ratio, "ci_low": ratio, "ci_high": ratio}}
        progress.candidates[index] = cand
    xs, ys, bx, by = series(progress)
    assert (xs, ys) == ([1, 2, 4, 4], [0.3, 0.7, 2.2, 1.1])  # nothing for the build error or the hack
    assert (bx, by) == ([1, 2, 2, 4, 4], [0.3, 0.3, 0.7, 0.7, 2.2])


async def test_the_start_screen_builds_the_run_it_describes(tmp_path: Path) -> None:
    from kernelwright.problems.loader import builtin_problems
    from kernelwright.tui.screens.start import StartChoices, StartScreen

    choices = StartChoices(problems=builtin_problems(), runs=[], devices=[Device.CPU])
    app = make_app(load_settings(), choices=choices, backend=FakeBackend())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, StartScreen)
        screen.query_one("#target").value = "1.3"  # type: ignore[attr-defined]
        screen.query_one("#rounds").value = "3"  # type: ignore[attr-defined]
        screen.query_one("#cost").value = "2.5"  # type: ignore[attr-defined]
        request = screen.build_request()
        assert request.config.problem == "level1/1_relu" and request.config.device == "cpu"
        assert (request.config.target, request.config.max_rounds, request.config.max_cost_usd) == (1.3, 3, 2.5)
        assert request.config.backend == "cpp"
        screen.query_one("#file").value = str(tmp_path / "missing.py")  # type: ignore[attr-defined]
        await pilot.press("ctrl+r")  # a bad form is a notification, not a run
        await pilot.pause()
        assert isinstance(app.screen, StartScreen)
        screen.query_one("#file").value = ""  # type: ignore[attr-defined]
        screen.query_one("#scripted").value = True  # type: ignore[attr-defined]
        scripted = screen.build_request()
        assert scripted.config.scripted == "relu-cpu" and scripted.config.size == "small"


async def test_on_a_gpu_the_start_screen_offers_the_gpu_demo_s_problem_to_the_scripted_session() -> None:
    """The GPU demo runs `gelu_layernorm_bf16` at its default size (issue #29): the start screen
    highlights it when the GPU is the device offered first, and refuses relu for the scripted run there."""
    from kernelwright.errors import UsageError
    from kernelwright.problems.loader import builtin_problems
    from kernelwright.tui.screens.start import StartChoices, StartScreen

    choices = StartChoices(problems=builtin_problems(), runs=[], devices=[Device.CUDA, Device.CPU])
    app = make_app(load_settings(), choices=choices, backend=FakeBackend())
    async with app.run_test(size=(80, 24)):
        screen = app.screen
        assert isinstance(screen, StartScreen)
        assert screen.chosen_problem() == "level2/17_gelu_layernorm_bf16"
        screen.query_one("#scripted").value = True  # type: ignore[attr-defined]
        scripted = screen.build_request()
        assert (scripted.config.problem, scripted.config.size, scripted.config.scripted) == (
            "gelu_layernorm_bf16",
            "default",
            "gelu_layernorm_bf16-cuda",
        )
        screen.query_one("#file").value = "relu"  # type: ignore[attr-defined]
        with pytest.raises(UsageError, match="on cuda knows only the 'gelu_layernorm_bf16' problem, not 'relu'"):
            screen.build_request()
