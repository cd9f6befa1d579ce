"""The planner's and reviewer's tools, driven by scripted tool calls: what each tool answers, the
bounded tool loop, truncation, and the profile node with a stub profiler (no GPU, no ncu)."""

from __future__ import annotations

import json
from pathlib import Path

from langchain_core.messages import ToolMessage

from kernelwright.agent import runner
from kernelwright.agent.deps import CandidateProfile
from kernelwright.agent.scripted import ScriptedSession, tool_calls
from kernelwright.profiler import NcuDigest
from kernelwright.profiler.classification import Bottleneck, Classification
from tests.agent.helpers import FakeEvaluator, code, config, models, plan, review


def _digest(duration_us: float, dram_pct: float) -> NcuDigest:
    return NcuDigest(
        kernel="relu_kernel",
        kernels_in_report=1,
        launches_in_report=1,
        total_duration_us=duration_us,
        duration_us=duration_us,
        sol_dram_pct=dram_pct,
        classification=Classification(kind=Bottleneck.MEMORY_BOUND, reason="DRAM throughput is the limiter"),
    )


class StubProfiler:
    """A canned digest per call: the second candidate is twice as fast as the first."""

    def __init__(self) -> None:
        self.calls: list[tuple[Path, Path]] = []

    def profile(self, candidate: Path, report_path: Path) -> CandidateProfile:
        self.calls.append((candidate, report_path))
        digest = _digest(20.0 / len(self.calls), 40.0 * len(self.calls))
        return CandidateProfile(
            ok=True,
            text=f"kernel: relu_kernel\nduration: {digest.duration_us} us\nbottleneck: memory-bound",
            own_pct=97.0,
            report=report_path,
            digest_json=digest.model_dump_json(),
        )


class ReadyEvaluator(FakeEvaluator):
    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    def wait_ready(self) -> bool:
        self.waits += 1
        return True


def _tool_results(session: ScriptedSession, role: str, step: int) -> dict[str, str]:
    return {str(m.name): str(m.content) for m in session.prompts[role][step] if isinstance(m, ToolMessage)}


def test_planner_tool_calls_answer_from_the_run_and_the_loop_is_bounded() -> None:
    script = {
        "planner": [
            plan("first"),
            tool_calls(("read_candidate", {"index": 1}), ("gpu_specs", {"question": "l2"})),
            tool_calls(("gpu_specs", {"question": "l2", "gpu": "h100"}), ("profile_digest", {"index": 1})),
            tool_calls(("read_candidate", {"index": 7}), ("no_such_tool", {})),
            tool_calls(("digest_diff", {"a": 1, "b": 1})),
            plan("second"),  # the forced answer after the 4 tool rounds
        ],
        "coder": [code("correct none 0.8"), code("correct none 1.6")],
        "reviewer": [review(), review()],
    }
    session = ScriptedSession(script)  # type: ignore[arg-type]
    cfg = config(max_rounds=2)
    outcome = runner.run(cfg, runner.RunParts(models(session), FakeEvaluator(), scripted=session))  # type: ignore[arg-type]
    assert outcome.accepted and outcome.state["plan"] == "second"
    assert session.tools["planner"] == ["gpu_specs", "read_candidate", "profile_digest", "digest_diff", "Plan"]
    assert len(session.prompts["planner"]) == 6 and session.position["planner"] == 6
    first = _tool_results(session, "planner", 2)
    assert "candidate 1 (round 1" in first["read_candidate"] and "# judge: correct none 0.8" in first["read_candidate"]
    assert "verdict: correct" in first["read_candidate"] and "0.80x vs compile" in first["read_candidate"]
    assert first["gpu_specs"].startswith("this run is on the CPU")
    second = _tool_results(session, "planner", 3)
    assert "H100 SXM: cache.l2_mb: 50.0 MB" in second["gpu_specs"]
    assert second["profile_digest"].startswith("not profiled: profiling skipped") and "CPU" in second["profile_digest"]
    third = _tool_results(session, "planner", 4)
    assert third["read_candidate"].startswith("no candidate 7 in this run (candidates: 1)")
    assert third["no_such_tool"].startswith("unknown tool 'no_such_tool'")
    last = session.prompts["planner"][5]
    assert "cannot diff" in str(last[-2].content) and "answer now" in str(last[-1].content)
    calls = [e for e in outcome.events if getattr(e, "kind", "") == "tool_called"]
    assert [e.name for e in calls][:2] == ["read_candidate", "gpu_specs"] and len(calls) == 7
    assert outcome.state["usage"]["calls.planner"] == 6  # every call is accounted
    trajectory = json.loads((cfg.run_dir / "trajectory.json").read_text())
    assert sum(e["kind"] == "tool_called" for e in trajectory["events"]) == 7


def test_tool_results_come_in_pages_that_say_how_to_read_on() -> None:
    script = {
        "planner": [plan("first"), tool_calls(("read_candidate", {"index": 1})), plan("second")],
        "coder": [code("correct none 0.8" + " " * 50 + "\n" + "# padding\n" * 400), code("correct none 1.6")],
        "reviewer": [review(), review()],
    }
    session = ScriptedSession(script)  # type: ignore[arg-type]
    cfg = config(max_rounds=2, tool_result_chars=300)
    runner.run(cfg, runner.RunParts(models(session), FakeEvaluator(), scripted=session))  # type: ignore[arg-type]
    text = _tool_results(session, "planner", 2)["read_candidate"]
    assert len(text) < 400 and "more characters of" in text and "call read_candidate again with offset=" in text


def test_plain_json_endpoints_get_no_tools() -> None:
    session = ScriptedSession({"planner": [plan()], "coder": [code("correct none 2.0")], "reviewer": [review()]})
    runner.run(
        config(structured_method="plain_json"), runner.RunParts(models(session), FakeEvaluator(), scripted=session)
    )  # type: ignore[arg-type]
    assert "planner" not in session.tools
    assert "(none on this endpoint" in str(session.prompts["planner"][0][-1].content)


def test_profile_node_profiles_correct_candidates_and_the_reviewer_reads_the_digest() -> None:
    script = {
        "planner": [plan(), plan()],
        "coder": [code("correct none 0.8"), code("incorrect output_mismatch"), code("correct none 1.6")],
        "reviewer": [
            tool_calls(("profile_digest", {"index": 1})),
            review(),
            tool_calls(("digest_diff", {"a": 1, "b": 3}), ("profile_digest", {"index": 2})),
            review(),
        ],
    }
    session = ScriptedSession(script)  # type: ignore[arg-type]
    evaluator, profiler = ReadyEvaluator(), StubProfiler()
    cfg = config(device="cuda", backend="cuda", max_rounds=2)
    outcome = runner.run(cfg, runner.RunParts(models(session), evaluator, scripted=session, profiler=profiler))  # type: ignore[arg-type]
    assert outcome.accepted
    assert [c.name for c, _ in profiler.calls] == ["001.py", "003.py"]  # correct ones only
    assert profiler.calls[0][1] == cfg.run_dir / "evidence" / "001" / "candidate.ncu-rep"
    assert evaluator.waits == 2  # the spare worker is ready before each profile
    profiles = outcome.state["profiles"]
    assert profiles["1"]["own_pct"] == 97.0 and "memory-bound" in profiles["1"]["text"]
    assert (cfg.run_dir / "evidence" / "003" / "digest.json").is_file()
    assert "candidate 1: kernel: relu_kernel" in str(session.prompts["reviewer"][0][-1].content)
    first = _tool_results(session, "reviewer", 1)
    assert "duration: 20.0 us" in first["profile_digest"] and "97%" in first["profile_digest"]
    second = _tool_results(session, "reviewer", 3)
    assert "candidate 1 (baseline) vs candidate 3" in second["digest_diff"] and "speedup" in second["digest_diff"]
    assert second["profile_digest"] == "not profiled: candidate 2 is incorrect (only correct candidates are profiled)"
    kinds = [getattr(e, "kind", "") for e in outcome.events]
    assert kinds.count("candidate_profiled") == 2 and "profile_skipped" not in kinds


def test_profile_node_skips_on_cuda_without_ncu_and_says_why() -> None:
    session = ScriptedSession({"planner": [plan()], "coder": [code("correct none 2.0")], "reviewer": [review()]})
    cfg = config(device="cuda", backend="cuda")
    outcome = runner.run(
        cfg, runner.RunParts(models(session), FakeEvaluator(), scripted=session, profiler_missing="ncu is not here")
    )  # type: ignore[arg-type]
    skipped = [e for e in outcome.events if getattr(e, "kind", "") == "profile_skipped"]
    assert [e.why for e in skipped] == ["profiling skipped: ncu is not here"]
    assert "ncu is not here" in str(session.prompts["reviewer"][0][-1].content)
    assert outcome.state["profiles"]["1"]["note"] == "profiling skipped: ncu is not here"


def test_a_failed_profile_is_a_note_not_an_error() -> None:
    class Fails:
        def profile(self, candidate: Path, report_path: Path) -> CandidateProfile:
            return CandidateProfile(ok=False, text="no_permission: ERR_NVGPUCTRPERM")

    session = ScriptedSession({"planner": [plan()], "coder": [code("correct none 2.0")], "reviewer": [review()]})
    cfg = config(device="cuda", backend="cuda")
    outcome = runner.run(cfg, runner.RunParts(models(session), FakeEvaluator(), scripted=session, profiler=Fails()))  # type: ignore[arg-type]
    assert outcome.accepted
    assert outcome.state["profiles"]["1"]["note"] == "profiling failed: no_permission: ERR_NVGPUCTRPERM"
    assert "ERR_NVGPUCTRPERM" in str(session.prompts["reviewer"][0][-1].content)
