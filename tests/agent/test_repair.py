"""Repair turns (#30): the coder's reply as a whole file or edits to the named base, compiler
diagnostics placed on the candidate's own lines, the feedback for a mismatch and a rejection, and
what the coder's and planner's prompts carry (the draft, the context, the whole run)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kernelwright.agent import runner
from kernelwright.agent.nodes import context
from kernelwright.agent.nodes.edits import apply_edits, read_reply
from kernelwright.agent.nodes.feedback import Diagnostic, diagnostics, failure_feedback, place
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.harness.result import EvalResult, Flag, TrialResult
from kernelwright.harness.verdicts import Reason, Verdict
from tests.agent.helpers import FakeEvaluator, code, config, models, plan, review

BASE = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x  \n"


def _edit(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def test_an_edit_applies_to_the_base_exactly_or_ignoring_trailing_spaces() -> None:
    done = read_reply("Fix:\n" + _edit("        return x\n", "        return x.clamp_min(0)\n"), BASE)
    assert done.source is not None and "x.clamp_min(0)" in done.source and done.form.startswith("edits")
    fenced = read_reply(
        "```python\n" + _edit("    def forward(self, x):\n", "    def forward(self, y):\n") + "```", BASE
    )
    assert fenced.source is not None and "forward(self, y)" in fenced.source


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (_edit("        return y\n", "        return x\n"), "is not in the base file"),
        (_edit("\n", "x\n"), "empty SEARCH"),
        (_edit("        return x\n", "        return (x\n"), "not valid Python"),
        ("I would tile it.", "no ```python code block"),
    ],
)
def test_an_edit_that_does_not_apply_says_why_and_nothing_half_applied_is_judged(reply: str, why: str) -> None:
    done = read_reply(reply, BASE)
    assert done.source is None and why in done.why


def test_a_whole_file_wins_over_edits_and_edits_need_a_base() -> None:
    whole = read_reply(code("correct none 1.0") + _edit("x\n", "y\n"), BASE)
    assert whole.form == "file" and "# judge: correct" in (whole.source or "")
    assert "no base file" in read_reply(_edit("a\n", "b\n"), None).why
    assert apply_edits("a\nb\n", [("a\n", "c\n"), ("c\nb\n", "d\n")]) == ("d\n", "")  # in order, on the result
    assert "occurs 2 times" in apply_edits("a\na\n", [("a\n", "b\n")])[1]


CANDIDATE = '''import torch
import torch.nn as nn

SOURCE = r"""
#include <cstdint>

extern "C" int relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : zero;
    return 0;
}
"""


class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_real_compiler_error_is_placed_on_the_candidate_s_own_line(tmp_path: Path) -> None:
    generated = tmp_path / "kw_relu.cpp"
    generated.write_text(CANDIDATE.split('r"""')[1].split('"""')[0])
    done = subprocess.run(["g++", "-c", str(generated), "-o", str(tmp_path / "x.o")], capture_output=True, text=True)
    assert done.returncode != 0
    [diag] = diagnostics(done.stderr)
    assert "zero" in diag.message and diag.file == str(generated)
    line, quoted = place(diag, CANDIDATE)
    assert line == 8 and "? x[i] : zero;" in quoted  # line 8 of the candidate, line 5 of the generated file
    result = EvalResult(
        problem="level1/1_relu",
        candidate="c.py",
        verdict=Verdict.BUILD_ERROR,
        reason=Reason.COMPILE_ERROR,
        message="the extension did not build",
        stderr_tail=done.stderr,
    )
    text = failure_feedback(result, CANDIDATE, 1500)
    assert "line 8 of your file (line 5 of the generated kw_relu.cpp): error:" in text and "zero" in text


def test_the_harness_s_one_line_summary_is_placed_by_where_the_build_writes_the_literal() -> None:
    message = (
        "kernelwright.fastext.KernelBuildError: Error building extension 'kw_relu':: kw_relu.cpp:5: error: "
        "‘zero’ was not declared in this scope; kw_relu.cpp:9: error: expected ‘;’ before ‘}’ token"
    )
    first, second = diagnostics(message)
    assert (first.file, first.line, second.line) == ("kw_relu.cpp", 5, 9) and first.message.startswith("‘zero’")
    assert place(first, CANDIDATE) == (8, "    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : zero;")
    assert place(second, CANDIDATE) == (None, "")  # no name of the message on that line: not guessed
    inline = Diagnostic("main.cpp", 6, "error", "‘zero’ was not declared")  # after load_inline's include line
    assert place(inline, CANDIDATE)[0] == 8


def test_an_nvcc_diagnostic_is_read_and_an_unreadable_file_is_said_so() -> None:
    log = '/gone/kw_relu.cu(12): error: identifier "step" is undefined\n1 error detected\n'
    [diag] = diagnostics(log)
    assert (diag.file, diag.line, diag.kind) == ("/gone/kw_relu.cu", 12, "error")
    assert place(diag, CANDIDATE) == (None, "")
    result = EvalResult(problem="p", candidate="c.py", verdict=Verdict.BUILD_ERROR, stderr_tail=log)
    assert "line 12 of the generated kw_relu.cu (not found in your file)" in failure_feedback(result, CANDIDATE, 500)


def test_a_mismatch_names_the_trial_its_inputs_and_where_the_outputs_differ() -> None:
    trial = TrialResult(
        index=3,
        seed=41,
        distribution="normal(0, 100)",
        variant=1,
        shapes=["(17, 1023)"],
        passed=False,
        reason=Reason.OUTPUT_MISMATCH,
        max_abs_error=2.5,
        max_rel_error=1.0,
        mismatch_fraction=0.001,
        first_mismatches=[[16, 1020]],
    )
    ok = TrialResult(index=0, seed=1, distribution="normal", passed=True)
    result = EvalResult(
        problem="p",
        candidate="c.py",
        verdict=Verdict.INCORRECT,
        reason=Reason.OUTPUT_MISMATCH,
        trials=[ok, trial],
        tolerance={"atol": 1e-5, "rtol": 1e-5},
    )
    text = failure_feedback(result, "", 500)
    assert (
        "1 of 2 trials passed" in text and "trial 3 (seed 41, inputs drawn from normal(0, 100), shape variant 1" in text
    )
    assert "(17, 1023)" in text and "max abs error 2.5" in text and "(16, 1020)" in text


def test_a_rejection_gives_the_registry_entry_not_the_detector_s_evidence() -> None:
    result = EvalResult(
        problem="p",
        candidate="c.py",
        verdict=Verdict.REJECTED,
        reason=Reason.SIDE_STREAM,
        message="work ran where the timer does not look",
        flags=[Flag(code="side_stream", message="torch.cuda.Stream() at line 12 matched rule S3", severity="reject")],
    )
    text = failure_feedback(result, "", 500)
    assert "What `side_stream` means and why it does not count: Work runs where the timer does not look" in text
    assert "rule S3" not in text


def test_a_long_source_is_shown_with_a_marker_saying_what_was_left_out_and_how_to_read_it() -> None:
    text = "".join(f"line {i}\n" for i in range(5000))
    shown = context.clip(text, 2000, what="candidate 4", page="read_candidate(4, offset=N) pages it")
    assert len(shown) < 2200 and "characters of candidate 4 left out here (lines" in shown
    assert "read_candidate(4, offset=N)" in shown and shown.startswith("line 0\n") and shown.endswith("line 4999\n")
    assert context.clip("short", 10, what="x", page="y") == "short"


def test_older_rounds_are_kept_shorter_and_every_round_stays() -> None:
    history = [
        context.round_line(
            i, "tile the loads in shared memory. and more", f"c{i} correct 1.10x vs compile", "iterate", "x" * 200
        )
        for i in range(1, 13)
    ]
    text = context.run_text({"history": history, "abandoned": ["use torch.relu"]})  # type: ignore[typeddict-item]
    lines = text.splitlines()
    assert len(lines) == 14 and all(len(line) <= context.ROUND_LINE_CHARS for line in lines[1:13])
    assert all(len(line) <= context.OLD_ROUND_CHARS for line in lines[1:8]) and lines[1].startswith("r1: ")
    assert "Abandoned directions (do not propose them again): use torch.relu" in lines[-1]


class TimedEvaluator(FakeEvaluator):
    """A fake evaluator that also knows the reference's times (as an EvalSession does)."""

    def baseline_ms(self) -> dict[str, float]:
        return {"eager": 2.0, "compile": 0.8}


def _run(script: dict[str, list[object]], evaluator: FakeEvaluator | None = None, **flags: object):
    session = ScriptedSession(script)  # type: ignore[arg-type]
    outcome = runner.run(
        config(**flags), runner.RunParts(models(session), evaluator or FakeEvaluator(), scripted=session)
    )  # type: ignore[arg-type]
    return outcome, session


@pytest.mark.parametrize(("device", "backend", "says"), [("cpu", "cpp", "g++"), ("cuda", "triton", "@triton.jit")])
def test_the_coder_s_first_prompt_carries_the_machine_the_times_the_rules_and_the_backend(
    device: str, backend: str, says: str
) -> None:
    _, session = _run(
        {"planner": [plan()], "coder": [code("correct none 2.0")], "reviewer": [review()]},
        TimedEvaluator(),
        device=device,
        backend=backend,
    )
    prompt = str(session.prompts["coder"][0][-1].content)
    assert "Speed of light for level1/1_relu" in prompt and "No kernel can run faster than this." in prompt
    assert (
        "Reference on this machine (medians, timed once at the start of the run): eager 2.000 ms, compile 800.0 µs."
        in prompt
    )
    assert "Policy in force: strict" in prompt and "- torch_fallback: PyTorch did the main computation" in prompt
    assert says in prompt and "(none yet: write the file from scratch)" in prompt
    if backend == "triton":
        assert (
            "relu_tl[(triton.cdiv(n, 1024),)]" in prompt and "load_kernels" not in prompt.split("# How candidates")[1]
        )


def test_a_repair_turn_shows_the_failed_draft_its_diff_from_the_parent_and_accepts_an_edit() -> None:
    fix = "Declare it.\n" + _edit("# judge: build_error compile_error\n", "# judge: correct none 2.0\n")
    outcome, session = _run(
        {
            "planner": [plan(), plan("now faster")],
            "coder": [code("correct none 0.7"), code("build_error compile_error"), fix],
            "reviewer": [review(), review()],
        },
        max_rounds=2,
    )
    assert [c["verdict"] for c in outcome.candidates] == ["correct", "build_error", "correct"] and outcome.accepted
    repair = str(session.prompts["coder"][2][-1].content)
    assert "Your draft (candidate 2) failed: repair it (the base for edits)" in repair
    assert "What the harness said about your draft (candidate 2)" in repair and "was not declared" in repair
    assert "What your draft changed from its parent (candidate 1)" in repair
    assert "-# judge: correct none 0.7" in repair and "+# judge: build_error compile_error" in repair
    fixed = Path(outcome.candidates[2]["path"]).read_text()
    assert fixed == Path(outcome.candidates[1]["path"]).read_text().replace(
        "build_error compile_error", "correct none 2.0"
    )


def test_an_edit_that_does_not_apply_goes_back_to_the_coder_with_why() -> None:
    outcome, session = _run(
        {
            "planner": [plan()],
            "coder": [code("build_error compile_error"), _edit("no such line\n", "x\n"), code("correct none 2.0")],
            "reviewer": [review()],
        },
    )
    assert outcome.accepted
    again = str(session.prompts["coder"][2][-1].content)
    assert "edit block 1: its SEARCH text is not in the base file" in again
    assert "Your draft (candidate 1) failed" in again  # still the repair turn, with the same base


def test_an_abandoned_direction_is_shown_and_a_plan_too_like_it_is_asked_again() -> None:
    outcome, session = _run(
        {
            "planner": [
                plan("use shared memory tiles of 64 for the loads"),
                plan("use shared memory tiles of 64 for the loads again"),
                plan("vectorise with float4 loads"),
            ],
            "coder": [code("correct none 0.8"), code("correct none 2.0")],
            "reviewer": [review(decision="abandon", feedback="tiles do not help a streaming op"), review()],
        },
        max_rounds=2,
    )
    assert outcome.accepted and outcome.state["abandoned"] == ["use shared memory tiles of 64 for the loads"]
    second = session.prompts["planner"][2]
    assert "too like a direction the reviewer abandoned" in str(second[-1].content)
    assert "Abandoned directions (do not propose them again)" in str(second[1].content)
    assert outcome.state["plan"] == "vectorise with float4 loads"


def test_the_wall_time_budget_counts_every_session_of_a_resumed_run() -> None:
    class Slow(FakeEvaluator):
        def evaluate(self, candidates: list[Path]) -> list[EvalResult]:
            time.sleep(1.5)
            return super().evaluate(candidates)

    class Kill(Exception):
        pass

    def kill_at_profile(event: object) -> None:
        if getattr(event, "kind", "") == "step_started" and getattr(event, "step", "") == "profile":
            raise Kill

    script = {
        "planner": [plan(), plan()],
        "coder": [code("correct none 0.9"), code("correct none 2.0")],
        "reviewer": [review()] * 2,
    }
    cfg = config(max_rounds=3, max_wall_s=1.4)
    first = ScriptedSession(script)  # type: ignore[arg-type]
    with pytest.raises(Kill):
        runner.run(
            cfg,
            runner.RunParts(models(first), Slow(), scripted=first),
            runner.RunSteering(subscribers=(kill_at_profile,)),
        )  # type: ignore[arg-type]
    again = ScriptedSession(script)  # type: ignore[arg-type]
    outcome = runner.run(cfg, runner.RunParts(models(again), Slow(), scripted=again), runner.RunSteering(resume=True))  # type: ignore[arg-type]
    assert outcome.stop_reason.startswith("budget: wall time") and outcome.state["round"] == 1


def test_a_reference_faster_than_the_speed_of_light_says_the_ceiling_was_read_low() -> None:
    """A busy machine measures its CPU ceilings low; the prompt must not call that the room."""
    honest = {"context": {"baseline_ms": {"eager": 30.0, "compile": 20.0}, "sol_s": 0.010}}
    assert "2.0x the speed of light: that is the room" in context.times_text(honest, None)  # type: ignore[arg-type]
    low = {"context": {"baseline_ms": {"eager": 30.0, "compile": 20.0}, "sol_s": 0.1}}
    text = context.times_text(low, None)  # type: ignore[arg-type]
    assert "faster than it" in text and "do not trust the speed of light" in text and "that is the room" not in text
