"""A run id names the problem, never the path it was given by: a file's stem, a built-in's name."""

from __future__ import annotations

import re
from pathlib import Path

from kernelwright.agent.configuration import AgentConfig, RunFlags, new_run_id, problem_name
from kernelwright.config import load_settings

_ID = re.compile(r"^\d{8}-\d{6}-(?P<name>.+)-[0-9a-f]{4}$")


def _name(run_id: str) -> str:
    match = _ID.match(run_id)
    assert match, run_id
    return match.group("name")


def test_a_problem_file_is_named_by_its_stem_not_its_path(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "folder" / "my_fused_op.py"
    assert _name(new_run_id(str(path))) == "my_fused_op"
    assert _name(new_run_id("~/ops/my_fused_op.py")) == "my_fused_op"
    assert _name(new_run_id("models/net.py:Factory")) == "net"
    assert "folder" not in new_run_id(str(path)) and str(tmp_path.name) not in new_run_id(str(path))


def test_a_built_in_keeps_its_name() -> None:
    assert problem_name("relu") == "relu"
    assert _name(new_run_id("relu")) == "relu"
    assert _name(new_run_id("level1/1_relu")) == "level1-1_relu"  # as before: file-name-safe


def test_the_config_of_a_problem_file_gets_that_run_id(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "scaled_gelu.py"
    config = AgentConfig.from_settings(load_settings(), str(path), RunFlags(scripted="test"))
    assert _name(config.run_id) == "scaled_gelu" and config.problem == str(path)
