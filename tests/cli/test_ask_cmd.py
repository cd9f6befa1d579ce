"""`kernelwright ask` through the CLI with scripted replies (`--scripted FILE`): one question, JSON,
the interactive chat, a report read through `ncu --import` only, and every failure's exit code and
one-line message (a file that is no report, no reader, no API key, bad flags)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kernelwright.cli import app
from kernelwright.errors import ExitCode, KernelwrightError
from tests.agent.ask.helpers import DATA, fixture_path, needs_module

NO_WARPSTATE = DATA / "transpose_no_warpstate.ncu-rep"


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) the way `main` ends a command: an error is one stderr line."""
    result = CliRunner().invoke(app, list(args), input=stdin, standalone_mode=False)
    if isinstance(result.exception, KernelwrightError):
        return int(result.exception.exit_code), result.stdout, result.exception.one_line()
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    code = result.return_value if isinstance(result.return_value, int) else result.exit_code
    return int(code), result.stdout, result.stderr


def script(folder: Path, *replies: Any) -> str:
    path = folder / "script.json"
    path.write_text(json.dumps({"replies": list(replies)}))
    return str(path)


DURATION = "[[gpu__time_duration.sum = 132.48 usecond @ report:0]]"


def test_not_a_report_is_exit_2_with_one_line(tmp_path: Path) -> None:
    text = tmp_path / "notes.ncu-rep"
    text.write_text("this is not a report\n")
    code, out, err = invoke("ask", str(text), "why?")
    assert code == ExitCode.USAGE and out == ""
    assert (
        err
        == f"usage error: {text} is not an Nsight Compute report (.ncu-rep) (give a report written by `ncu -o FILE`)"
    )
    empty = tmp_path / "empty.ncu-rep"
    empty.write_bytes(b"")
    assert invoke("ask", str(empty), "why?")[2].startswith(f"usage error: {empty} is an empty file")
    assert invoke("ask", str(tmp_path / "missing.ncu-rep"), "why?")[:3:2] == (
        ExitCode.USAGE,
        f"usage error: no such report: {tmp_path / 'missing.ncu-rep'}",
    )


@needs_module
def test_a_truncated_report_is_exit_2(tmp_path: Path) -> None:
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(fixture_path("relu_candidate").read_bytes()[:40_000])
    code, _, err = invoke("ask", str(cut), "why?")
    assert code == ExitCode.USAGE and "\n" not in err
    assert err.startswith(f"usage error: {cut} holds no kernel results: the report is truncated or corrupt")


@needs_module
def test_one_question_streams_the_answer_then_its_checked_citations(tmp_path: Path) -> None:
    replies = script(tmp_path, {"tool_calls": [["kernel_digest", {}]]}, f"It runs {DURATION}.")
    code, out, err = invoke("ask", str(NO_WARPSTATE), "How long does it run?", "--scripted", replies)
    assert code == ExitCode.OK
    assert out == f"It runs {DURATION}.\ncitations: 1 checked, all match the report\n"
    assert "· kernel_digest()" in err


@needs_module
def test_json_answer_with_a_wrong_citation_is_exit_1(tmp_path: Path) -> None:
    wrong = "[[dram__bytes_read.sum = 99 MB]]"
    replies = script(tmp_path, {"tool_calls": [["metric", {"query": "dram__bytes_read.sum"}]]}, f"{DURATION}, {wrong}")
    code, out, _ = invoke("ask", str(NO_WARPSTATE), "q", "--json", "--scripted", replies)
    doc = json.loads(out)
    assert code == ExitCode.NEEDS_ATTENTION and doc["ok"] is False
    assert [c["status"] for c in doc["citations"]] == ["ok", "value_mismatch"]
    assert doc["citations"][1]["report_value"] == "67114496" and doc["citations"][1]["report_unit"] == "byte"
    assert doc["marked"].endswith(f"{wrong} [✗ value mismatch: the report says 67114496 byte (67.1 MB)]")
    assert doc["tool_calls"][0]["name"] == "metric" and doc["reports"] == {"report": str(NO_WARPSTATE)}
    assert doc["focus"] == {"report": "report:0 transpose_smem"} and doc["model"] == "scripted:script"
    code, out, _ = invoke("ask", str(NO_WARPSTATE), "q", "--scripted", replies)
    assert code == ExitCode.NEEDS_ATTENTION
    assert out.endswith(f"citations: 2 checked, 1 does not match the report:\n  ✗ {wrong}: value mismatch: "
                        "the report says 67114496 byte (67.1 MB)\n")  # fmt: skip


@needs_module
def test_interactive_chat_until_exit(tmp_path: Path) -> None:
    replies = script(tmp_path, {"tool_calls": [["list_kernels", {}]]}, "One kernel: transpose_smem.", f"{DURATION}")
    code, out, err = invoke(
        "ask", str(NO_WARPSTATE), "--scripted", replies, stdin="Which kernels?\n\nHow long?\nexit\nnever asked\n"
    )
    assert code == ExitCode.OK
    assert out.splitlines() == [
        "One kernel: transpose_smem.",
        "citations: none (the answer cites no report metric)",
        DURATION,
        "citations: 1 checked, all match the report",
    ]
    assert "report: " in err and "in focus: report:0 transpose_smem" in err and err.count("ask> ") == 4


def _fake_ncu(monkeypatch: pytest.MonkeyPatch, folder: Path, name: str) -> None:
    """An `ncu` that exports the recorded CSV pages, and no ncu_report module."""
    folder.mkdir(parents=True, exist_ok=True)
    ncu = folder / "ncu"
    ncu.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *"--page raw"*) cat "{DATA / (name + ".raw.csv")}";; '
        f'*"--page details"*) cat "{DATA / (name + ".details.csv")}";; *) exit 1;; esac\n'
    )
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    monkeypatch.delenv("KERNELWRIGHT_NCU", raising=False)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr("kernelwright.profiler.reader.ncu_report_available", lambda: False)


def test_many_kernels_read_through_ncu_import_without_ncu_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_ncu(monkeypatch, tmp_path / "bin", "multi_cnn")
    rep = tmp_path / "multi_cnn.ncu-rep"
    rep.write_bytes(b"NVR\x00 recorded elsewhere; the fake ncu exports its CSV pages")
    pool = "[[gpu__time_duration.sum = 5.088 us @ report:4]]"
    replies = script(tmp_path, {"tool_calls": [["list_kernels", {}], ["source_hotspots", {}]]}, f"The pool: {pool}.")
    code, out, err = invoke("ask", str(rep), "the max pool?", "--kernel", "max_pool", "--json", "--scripted", replies)
    doc = json.loads(out)
    assert code == ExitCode.OK and doc["ok"] and doc["citations"][0]["ref"] == "report:4"
    assert doc["focus"]["report"].startswith("report:4 void at::<unnamed>::max_pool_forward_nchw")
    code, _, err = invoke("ask", str(rep), "q", "--kernel", "nope", "--scripted", replies)
    assert code == ExitCode.USAGE and "no kernel in the report matches 'nope'" in err
    monkeypatch.setattr("kernelwright.profiler.csv_fallback.find_ncu", lambda: None)
    code, _, err = invoke("ask", str(rep), "q", "--scripted", replies)
    assert code == ExitCode.ENVIRONMENT
    assert err == (
        "environment: cannot read the report: neither the ncu_report module nor the ncu binary is available "
        "(pip install ncu-report)"
    )


@needs_module
def test_no_api_key_is_exit_5_and_bad_flags_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KERNELWRIGHT_LLM_API_KEY", "KERNELWRIGHT_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = invoke("ask", str(NO_WARPSTATE), "why?")
    assert code == ExitCode.ENVIRONMENT and err.startswith("environment: no API key for the LLM endpoint")
    assert invoke("ask", str(NO_WARPSTATE), "--json")[::2] == (
        ExitCode.USAGE,
        'usage error: --json needs a question (kernelwright ask REPORT "question" --json)',
    )
    assert invoke("ask", str(NO_WARPSTATE), "q", "--compare-kernel", "x")[0] == ExitCode.USAGE
    code, _, err = invoke("ask", str(NO_WARPSTATE), "q", "--kernel", "(")
    assert code == ExitCode.USAGE and "bad --kernel regex '('" in err


@needs_module
def test_compare_two_reports(tmp_path: Path) -> None:
    source = DATA / "transpose_source.ncu-rep"
    before, after = DURATION.replace("report:0", "baseline:0"), "[[gpu__time_duration.sum = 133.952 us @ candidate]]"
    replies = script(tmp_path, {"tool_calls": [["compare", {}]]}, f"Same speed: {before} vs {after}.")
    code, out, err = invoke("ask", str(NO_WARPSTATE), "what changed?", "--compare", str(source), "--scripted", replies)
    assert code == ExitCode.OK and out.endswith("citations: 2 checked, all match the report\n")
    assert "· compare()" in err
    code, out, _ = invoke("ask", str(NO_WARPSTATE), "q", "--compare", str(source), "--json", "--scripted", replies)
    doc = json.loads(out)
    assert doc["reports"] == {"baseline": str(NO_WARPSTATE), "candidate": str(source)}
    assert [c["ref"] for c in doc["citations"]] == ["baseline:0", "candidate:0"]
