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
    ("name", "backend", "rounds", "dtype"),
    [
        ("relu-cpu", "cpp", 4, "float32"),
        ("relu-cuda", "cuda", 4, "float32"),
        ("relu-triton", "triton", 2, "float32"),
        ("gelu_layernorm_bf16-cuda", "cuda", 4, "bfloat16"),
    ],
)
def test_scripted_sessions_are_well_formed(name: str, backend: str, rounds: int, dtype: str) -> None:
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
        analysis = analyze_candidate(source, problem_dtype=dtype)
        assert analysis.backend == backend
        codes = {f.code for f in analysis.findings}
        assert ("torch_fallback" in codes) == (expected == "rejected")
        assert not analysis.rejections, analysis.rejections  # what the static checks reject outright


def test_the_wide_session_keys_eight_distinct_correct_cuda_kernels_to_two_rounds_of_four_samples() -> None:
    """`relu-cuda-wide` (#33): each reply keyed to (round, idea 1, sample); every source distinct
    (so none shares another's build) and free of findings that would make it other than correct."""
    from kernelwright.agent.scripted import Keyed

    session = SCRIPTS["relu-cuda-wide"]()
    coder = session.script["coder"]
    assert all(isinstance(reply, Keyed) for reply in coder)
    keys = [reply.key.as_tuple() for reply in coder]  # type: ignore[union-attr]
    assert keys == [(r, 1, k, 1) for r in (1, 2) for k in (1, 2, 3, 4)]
    assert session.expected_verdicts == ["correct"] * 8
    assert len(session.script["planner"]) == len(session.script["reviewer"]) == 2
    sources = []
    for reply in coder:
        source, why = extract_code(str(reply.reply), None)  # type: ignore[union-attr]
        assert source is not None, why
        analysis = analyze_candidate(source)
        assert analysis.backend == "cuda"
        assert not {"torch_fallback", "kernel_not_launched"} & {f.code for f in analysis.findings}
        sources.append(source)
    assert len(set(sources)) == 8
