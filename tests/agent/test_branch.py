"""Branching (`optimize --from RUN_ID --from-candidate N`) and the LLM settings that reach the
run's AgentConfig, driven by the scripted model."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kernelwright.agent import runner
from kernelwright.agent.scripted import ScriptedSession, tool_calls
from kernelwright.config import load_settings
from tests.agent.helpers import FakeEvaluator, code, config, models, plan, review, run_cli


def _first_run() -> runner.RunOutcome:
    session = ScriptedSession(
        {
            "planner": [plan("slow start"), plan("different idea")],
            "coder": [code("correct none 0.7"), code("correct none 0.9")],
            "reviewer": [review(), review()],
        }
    )
    return runner.run(config(max_rounds=2), runner.RunParts(models(session), FakeEvaluator(), scripted=session))  # type: ignore[arg-type]


def test_a_new_run_branches_from_an_earlier_candidate() -> None:
    first = _first_run()
    assert first.best is not None and first.best["index"] == 2
    branched = dataclasses.replace(
        config(max_rounds=2), branch_from=first.config.run_id, branch_candidate=1, target=1.0
    )
    session = ScriptedSession(
        {
            "planner": [plan("branch from the slow one"), tool_calls(("read_candidate", {"index": 0})), plan("again")],
            "coder": [code("correct none 0.8"), code("correct none 1.4")],
            "reviewer": [review(), review()],
        }
    )
    outcome = runner.run(branched, runner.RunParts(models(session), FakeEvaluator(), scripted=session))  # type: ignore[arg-type]
    run_dir = branched.run_dir
    assert (run_dir / "candidates" / "000.py").read_text() == (
        first.config.run_dir / "candidates" / "001.py"
    ).read_text()
    coder_prompt = str(session.prompts["coder"][0][-1].content)
    assert "# judge: correct none 0.7" in coder_prompt and "candidate 0: correct" in coder_prompt
    assert "the candidate this run branched from" in str(session.prompts["planner"][0][-1].content)
    assert [(c["index"], c["parent"]) for c in outcome.candidates] == [(1, 0), (2, 1)]
    assert outcome.accepted and outcome.best is not None and outcome.best["index"] == 2
    tool_answer = str(session.prompts["planner"][2][-1].content)
    assert "candidate 0" in tool_answer and "# judge: correct none 0.7" in tool_answer
    trajectory = json.loads((run_dir / "trajectory.json").read_text())
    branched_events = [e for e in trajectory["events"] if e["kind"] == "run_branched"]
    assert branched_events == [
        {**branched_events[0], "from_run": first.config.run_id, "from_index": 1, "verdict": "correct"}
    ]
    parents = [e["parent"] for e in trajectory["events"] if e["kind"] == "candidate_evaluated"]
    assert parents == [0, 1]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["branched_from"]["run_id"] == first.config.run_id and summary["branched_from"]["candidate"] == 1


def test_a_branch_takes_the_policy_given_on_its_command_line() -> None:
    """`optimize --from RUN --policy engineering`: the new run judges under the policy asked for,
    the rest of the earlier run's configuration kept (the policy was once dropped on the way)."""
    from kernelwright.agent.configuration import AgentConfig, RunFlags
    from kernelwright.cli.optimize_cmd import _branch_config
    from kernelwright.config import load_settings
    from kernelwright.vocabulary import Policy

    first = _first_run()
    assert first.config.policy == Policy.STRICT
    flags = RunFlags(policy=Policy.ENGINEERING)
    branched = _branch_config(load_settings(), first.config.run_id, 1, flags, {"policy"}, None, None)
    assert branched.policy == Policy.ENGINEERING
    assert branched.problem == first.config.problem and branched.branch_from == first.config.run_id
    kept = _branch_config(load_settings(), first.config.run_id, 1, RunFlags(), set(), None, None)
    assert kept.policy == Policy.STRICT
    assert kept.timing is not False
    # --no-timing: correctness only, in a branch as in a new run
    untimed = _branch_config(load_settings(), first.config.run_id, 1, RunFlags(timing=False), {"no_timing"}, None, None)
    assert untimed.timing is False and untimed.policy == Policy.STRICT
    assert AgentConfig.from_settings(load_settings(), "relu", RunFlags(timing=False)).timing is False


def test_branch_from_a_missing_candidate_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    first = _first_run()
    assert run_cli(["optimize", "--from", first.config.run_id, "--from-candidate", "9"]) == 2
    err = capsys.readouterr().err
    assert "has no candidate 9" in err and "its candidates: 1, 2" in err
    assert run_cli(["optimize", "relu", "--from-candidate", "1"]) == 2
    assert "--from-candidate needs --from" in capsys.readouterr().err


def test_llm_settings_reach_the_config_and_flags_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_LLM_TEMPERATURE", "0.7")
    monkeypatch.setenv("KERNELWRIGHT_LLM_MAX_TOKENS", "1000")
    monkeypatch.setenv("KERNELWRIGHT_LLM_TIMEOUT_S", "33")
    monkeypatch.setenv("KERNELWRIGHT_LLM_MAX_RETRIES", "1")
    monkeypatch.setenv("KERNELWRIGHT_LLM_STRUCTURED_OUTPUT", "json_schema")
    monkeypatch.setenv("KERNELWRIGHT_LLM_CODER_MODEL", "big-coder")
    monkeypatch.setenv("KERNELWRIGHT_LLM_PRICE_IN_PER_1K", "0.5")
    monkeypatch.setenv("KERNELWRIGHT_LLM_PRICE_OUT_PER_1K", "1.5")
    from kernelwright.agent.configuration import AgentConfig, RunFlags
    from kernelwright.vocabulary import StructuredOutput

    settings = load_settings()
    cfg = AgentConfig.from_settings(settings, "relu", RunFlags(model="small"))
    assert (cfg.request_timeout_s, cfg.max_retries, cfg.structured_method) == (33.0, 1, "json_schema")
    assert (cfg.price_in_per_1k, cfg.price_out_per_1k) == (0.5, 1.5)
    assert cfg.role("coder").model == "big-coder" and cfg.role("planner").model == "small"
    assert cfg.role("reviewer").temperature == 0.7 and cfg.role("reviewer").max_tokens == 1000
    flagged = AgentConfig.from_settings(
        settings,
        "relu",
        RunFlags(
            coder_model="flag-coder",
            temperature=0.0,
            structured_method=StructuredOutput.PLAIN_JSON,
            request_timeout_s=5.0,
            price_in_per_1k=None,
        ),
    )
    assert flagged.role("coder").model == "flag-coder" and flagged.role("coder").temperature == 0.0
    assert flagged.structured_method == "plain_json" and flagged.request_timeout_s == 5.0
    assert flagged.price_in_per_1k == 0.5  # None: the flag was not given
    monkeypatch.setenv("KERNELWRIGHT_LLM_STRUCTURED_OUTPUT", "xml")
    with pytest.raises(Exception, match="llm_structured_output"):
        load_settings()
