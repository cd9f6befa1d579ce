"""RunFlags, the typed flags of one run: every flag named like an AgentConfig field sets it, one
not given leaves the settings' value, and a batch's JSON copy reads back as the same flags."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from kernelwright.agent.configuration import AgentConfig, RunFlags
from kernelwright.config import load_settings
from kernelwright.vocabulary import Backend, Device, Policy, Size, StructuredOutput


def test_every_flag_named_like_a_config_field_sets_it() -> None:
    base = AgentConfig.from_settings(load_settings(), "relu", run_id="base")
    config_names = {f.name for f in fields(AgentConfig)}
    for flag in fields(RunFlags):
        if flag.name not in config_names:
            continue
        before = getattr(base, flag.name)
        value: object = not before if isinstance(before, bool) else f"{flag.name}-value"
        applied = RunFlags(**{flag.name: value}).applied_to(base)
        assert getattr(applied, flag.name) == value, flag.name


def test_the_policy_flag_beats_the_setting_and_none_leaves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_POLICY", "engineering")
    settings = load_settings()
    assert AgentConfig.from_settings(settings, "relu").policy == Policy.ENGINEERING
    assert AgentConfig.from_settings(settings, "relu", RunFlags(policy=None)).policy == "engineering"
    assert AgentConfig.from_settings(settings, "relu", RunFlags(policy=Policy.STRICT)).policy == "strict"


def test_flags_cross_a_process_boundary_as_json() -> None:
    flags = RunFlags(
        device=Device.CUDA,
        backend=Backend.TRITON,
        size=Size.SMALL,
        policy=Policy.ENGINEERING,
        structured_method=StructuredOutput.PLAIN_JSON,
        max_rounds=3,
        model="m",
    )
    back = RunFlags.from_given(json.loads(json.dumps(flags.given())))
    assert back == flags and isinstance(back.device, Device) and isinstance(back.policy, Policy)
    with pytest.raises(TypeError):
        RunFlags.from_given({"polcy": "strict"})


def test_a_known_model_is_priced_from_the_dated_table_and_a_given_price_wins() -> None:
    from kernelwright.agent.prices import KNOWN_PRICES
    from tests.agent.helpers import config

    cfg = config(scripted=None, model="gpt-4.1-2025-04-14")
    assert cfg.price_for("coder") == KNOWN_PRICES["gpt-4.1"] and cfg.cost_uncounted() == ""
    given = config(scripted=None, model="gpt-4.1", price_in_per_1k=0.5, price_out_per_1k=1.0)
    assert given.price_for("planner").in_per_1k == 0.5
    local = config(scripted=None, model="my-local-coder")
    assert local.price_for("reviewer").in_per_1k == 0.0
    assert (
        "no price for my-local-coder" in local.cost_uncounted() and "--max-cost cannot stop" in local.cost_uncounted()
    )
    assert config().cost_uncounted() == ""  # scripted: nothing is billed
