"""The registry of rejection reasons: complete, consistent with the verdicts, the table in
docs/harness.md up to date, and `kernelwright eval --explain` answering without a problem."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from kernelwright.cli import app, main
from kernelwright.errors import ExitCode
from kernelwright.harness.reasons import BOTH, POLICIES, REASONS, STAGES, UnknownReason, explain, markdown_table
from kernelwright.harness.verdicts import Reason, Verdict

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reason_table", ROOT / "scripts" / "gen_reason_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_reason_has_a_consistent_entry() -> None:
    assert set(REASONS) == set(Reason)
    for reason, info in REASONS.items():
        assert info.code is reason
        assert isinstance(info.verdict, Verdict) and info.verdict != Verdict.CORRECT, reason
        assert info.decided and set(info.decided) <= set(STAGES), reason
        assert info.policies and info.policies <= set(POLICIES), reason
        assert info.why.strip() and "|" not in info.why, reason
    assert all(i.policies == BOTH for i in REASONS.values())  # every hack is rejected under both policies
    assert [r for r, i in REASONS.items() if i.policy_rules] == [Reason.TORCH_FALLBACK]  # the one that differs
    sandbox = [r for r, i in REASONS.items() if i.decides == "strict_sandbox"]
    assert sandbox == [Reason.NETWORK_ACCESS, Reason.WRITE_OUTSIDE_SCRATCH]


def test_the_docs_table_is_generated_from_the_registry(tmp_path: Path) -> None:
    gen = _generator()
    assert gen.is_current(), "docs/harness.md is stale: run `python scripts/gen_reason_table.py`"
    table = markdown_table()
    assert all(f"| `{r.value}` |" in table for r in Reason)
    stale = tmp_path / "doc.md"
    stale.write_text(f"# t\n\n{gen.BEGIN}\n| old |\n{gen.END}\nafter\n")
    assert not gen.is_current(stale)
    assert gen.main(["--check", "--doc", str(stale)]) == 1
    assert gen.main(["--doc", str(stale)]) == 0
    assert gen.is_current(stale) and stale.read_text().endswith(f"{gen.END}\nafter\n")


def test_explain_accepts_spellings_and_suggests_close_codes() -> None:
    assert explain("TORCH-FALLBACK") == explain("torch_fallback")
    with pytest.raises(UnknownReason) as info:
        explain("torch_fallbak")
    assert info.value.suggestions[0] == "torch_fallback"
    assert "did you mean torch_fallback" in str(info.value) and "output_mismatch" in str(info.value)


def test_eval_explain_needs_no_problem() -> None:
    result = CliRunner().invoke(app, ["eval", "--explain", "torch_fallback"], standalone_mode=False)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("torch_fallback: rejected")
    words = " ".join(result.output.split())  # the rationale is wrapped for the terminal
    assert REASONS[Reason.TORCH_FALLBACK].why in words
    assert "engineering: applies, as: own kernels at least a quarter of one pass over the output" in words


def test_eval_explain_of_an_unknown_code_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["eval", "--explain", "torch_fallbak"])
    assert info.value.code == ExitCode.USAGE
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["usage error: unknown reason 'torch_fallbak' (did you mean torch_fallback?)"]


def test_eval_without_explain_still_needs_a_reference(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["eval"])
    assert info.value.code == ExitCode.USAGE
    assert "Missing argument 'reference'" in capsys.readouterr().err
