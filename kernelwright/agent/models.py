"""The chat model of each role for a run: the endpoint's (`llm.chat_model`), or a scripted
session shipped with the package (`--scripted NAME`: the demo's, the tests'). Every frontend
(the headless commands, the TUI) gets its models here."""

from __future__ import annotations

from typing import Any

from kernelwright.agent.configuration import ROLES, AgentConfig
from kernelwright.agent.llm import chat_model
from kernelwright.agent.scripted import ScriptedSession
from kernelwright.agent.scripts import SCRIPTS
from kernelwright.errors import UsageError


def make_models(config: AgentConfig) -> tuple[dict[str, Any], ScriptedSession | None]:
    """(model per role, the scripted session when the run is scripted)."""
    if config.scripted:
        factory = SCRIPTS.get(config.scripted)
        if factory is None:
            raise UsageError(f"no scripted session {config.scripted!r}; known: {', '.join(SCRIPTS)}")
        session = factory()  # at the roles' temperatures, so a scripted run shows the sampling schedule
        return {role: session.model(role, config.role(role).temperature) for role in ROLES}, session
    return {role: chat_model(config, role) for role in ROLES}, None
