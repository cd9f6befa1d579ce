"""The scripted sessions shipped for `kernelwright demo` are well-formed: every coder reply holds
a parseable ModelNew file of the right backend, or edits that apply to the draft before it (a
repair turn's base), and the hack is visible to the static checks.
(The CPU session runs for real in test_agent_demo.py; the CUDA and Triton ones need a GPU.)"""

from __future__ import annotations

import pytest

from kernelwright.agent.nodes.coder import extract_code
from kernelwright.agent.scripts import SCRIPTS
from kernelwright.harness.checks.static.analysis import analyze_candidate


@pytest.mark.parametrize(
    ("name", "backend", "rounds"), [("relu-cpu", "cpp", 4), ("relu-cuda", "cuda", 4), ("relu-triton", "triton", 2)]
)
def test_scripted_sessions_are_well_formed(name: str, backend: str, rounds: int) -> None:
    session = SCRIPTS[name]()
    coder = session.script["coder"]
    assert len(coder) == len(session.expected_verdicts)
    assert len(session.script["planner"]) == len(session.script["reviewer"]) == rounds
    draft: str | None = None
    for reply, expected in zip(coder, session.expected_verdicts, strict=True):
        assert isinstance(reply, str)
        source, why = extract_code(reply, draft)
        assert source is not None, why
        draft = source
        analysis = analyze_candidate(source)
        assert analysis.backend == backend
        codes = {f.code for f in analysis.findings}
        assert ("torch_fallback" in codes) == (expected == "rejected")
