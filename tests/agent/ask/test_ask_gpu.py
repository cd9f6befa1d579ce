"""`ask` end to end on a GPU host: profile a candidate with the profiler, then ask about the fresh
report (scripted replies citing what the tools returned). Marked gpu: skipped without a GPU or ncu."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage

from kernelwright.agent.ask import AskChat, open_reports
from kernelwright.agent.scripted import ScriptedSession, tool_calls
from kernelwright.config import load_settings
from kernelwright.errors import ExitCode
from kernelwright.profiler import profile_problem
from tests.agent.ask.helpers import DATA, cited
from tests.cli.test_ask_cmd import invoke, script

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(shutil.which("ncu") is None, reason="needs ncu on PATH")]


def test_profile_a_candidate_then_ask_about_the_fresh_report(tmp_path: Path) -> None:
    result = profile_problem(
        "1_relu",
        DATA / "src" / "relu_candidate.py",
        report_path=tmp_path / "cand.ncu-rep",
        size="small",
        timeout_s=600,
        build_cache=load_settings().build_cache_dir,
    )
    assert result.ok, result.one_line()
    assert result.report_path is not None

    def answer(messages: list[BaseMessage]) -> str:
        return (
            f"It runs {cited(messages, 'gpu__time_duration.sum')} and reads {cited(messages, 'dram__bytes_read.sum')}."
        )

    session = ScriptedSession({"ask": [tool_calls(("list_kernels", {}), ("kernel_digest", {})), answer]})
    reports = open_reports(result.report_path)
    assert reports.first.focus.name.startswith("kw_relu_kernel")
    got = AskChat(reports, session.model("ask")).ask("How fast is the candidate's kernel?")
    assert [u.name for u in got.tool_calls] == ["list_kernels", "kernel_digest"]
    assert len(got.citations) == 2 and not got.mismatches, [c.note for c in got.citations]
    duration = reports.first.focus.duration_ns
    assert duration is not None and duration > 0
    # The same through the CLI, with the digest's duration in microseconds.
    cite = f"[[gpu__time_duration.sum = {duration / 1e3:.3f} us @ report:0]]"
    replies = script(tmp_path, {"tool_calls": [["rule_findings", {}]]}, f"Duration {cite}.")
    code, out, _ = invoke("ask", str(result.report_path), "how long?", "--scripted", replies)
    assert code == ExitCode.OK and out.endswith("citations: 1 checked, all match the report\n")
