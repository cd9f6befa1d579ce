"""Shared by the `ask` tests: the recorded reports (tests/data/ncu/NOTE.md), read once per test
session, and scripted replies that cite what a tool returned."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage, ToolMessage

from kernelwright.profiler import NcuReport
from kernelwright.profiler.csv_fallback import from_csv_exports
from kernelwright.profiler.reader import ncu_report_available
from kernelwright.profiler.report_file import open_report

DATA = Path(__file__).parent.parent.parent / "data" / "ncu"
needs_module = pytest.mark.skipif(not ncu_report_available(), reason="ncu_report not installed")


def fixture_path(name: str) -> Path:
    path = DATA / f"{name}.ncu-rep"
    if not path.exists():
        pytest.skip(f"fixture {path.name} not recorded (scripts/record_ask_fixtures.py on a GPU host)")
    return path


@cache
def _read(path: Path) -> NcuReport:
    return open_report(path)


def report(name: str) -> NcuReport:
    """A recorded .ncu-rep, read with ncu_report (once per session; copy before changing it)."""
    return _read(fixture_path(name)).model_copy(deep=True)


def csv_report(name: str) -> NcuReport:
    """A report from its recorded CSV exports (the `ncu --import` reader's view)."""
    raw, details = DATA / f"{name}.raw.csv", DATA / f"{name}.details.csv"
    if not raw.exists():
        pytest.skip(f"fixture {raw.name} not recorded")
    return from_csv_exports(raw.read_text(), details.read_text() if details.exists() else None)


def tool_results(messages: list[BaseMessage], name: str | None = None) -> list[str]:
    return [str(m.content) for m in messages if isinstance(m, ToolMessage) and (name is None or m.name == name)]


def cited(messages: list[BaseMessage], metric: str) -> str:
    """The citation of `metric` exactly as the last tool result that printed it has it (its last)."""
    for text in reversed(tool_results(messages)):
        found = re.findall(r"\[\[" + re.escape(metric) + r" = [^\]]+\]\]", text)
        if found:
            return str(found[-1])
    raise AssertionError(f"no tool result printed {metric}")
