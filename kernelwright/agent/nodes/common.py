"""What every node shares: prompt templates, calling a role's model with usage accounting (and,
for the planner and reviewer, a bounded tool-calling loop), and short renderings of candidates for
prompts (digests, never transcripts, so prompts stay bounded)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from string import Template
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command
from pydantic import BaseModel

from kernelwright.agent.configuration import AgentConfig, Role
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import StepStarted
from kernelwright.agent.state import AgentState, CandidateRecord
from kernelwright.agent.tools import make_tools

PROMPTS = Path(__file__).parent / "prompts"
T = TypeVar("T", bound=BaseModel)


@cache
def template(name: str) -> Template:
    return Template((PROMPTS / f"{name}.md").read_text())


def messages(role: Role, **values: object) -> list[BaseMessage]:
    return [
        SystemMessage(template("system").safe_substitute(role=role)),
        HumanMessage(template(role).safe_substitute({k: str(v) for k, v in values.items()})),
    ]


def stopped_by_user(state: AgentState, deps: Deps) -> Command[Any] | None:
    """Every node's first check: a person asked the run to stop (the TUI's "stop, keep the best").
    The best candidate so far stays; it counts as accepted only if it beats the target (in code)."""
    if deps.control is None or not deps.control.stop_requested:
        return None
    best = state.get("best")
    accepted = bool(best and best["beats_target"])
    kept = f"candidate {best['index']} is the best so far" if best else "no correct candidate yet"
    return Command(goto="__end__", update={"stop_reason": f"stopped by the user ({kept})", "accepted": accepted})


def started(deps: Deps, state: AgentState, step: str) -> None:
    deps.events.round = state.get("round", 0)
    deps.events.emit(StepStarted(step=step))


def role_tools(state: AgentState, config: AgentConfig) -> list[BaseTool]:
    """The planner's and reviewer's tools; none where replies are plain JSON (an endpoint without
    function calling) or tool rounds are off."""
    if config.structured_method == "plain_json" or config.tool_rounds == 0:
        return []
    return make_tools(state, config)


def speedup_text(candidate: CandidateRecord) -> str:
    parts = [
        f"{s['ratio']:.2f}x vs {name} [CI {s['ci_low']:.2f}-{s['ci_high']:.2f}]"
        for name, s in candidate["speedups"].items()
    ]
    return ", ".join(parts) or "not timed"


def describe(candidate: CandidateRecord | None) -> str:
    if candidate is None:
        return "(none)"
    reason = f" ({candidate['reason']})" if candidate["reason"] else ""
    text = f"candidate {candidate['index']}: {candidate['verdict']}{reason}"
    if candidate["verdict"] == "correct":
        text += f"; {speedup_text(candidate)}"
    elif candidate["message"]:
        text += f": {candidate['message']}"
    return text


def record_of(state: AgentState, index: int | None) -> CandidateRecord | None:
    """The run's candidate `index` (0: the branch origin or the remembered kernel), or None."""
    if index is None:
        return None
    origin = state.get("origin")
    if origin is not None and origin["index"] == index:
        return origin
    return next((c for c in state.get("candidates", []) if c["index"] == index), None)


def starting_point(state: AgentState) -> CandidateRecord | None:
    """What a round starts from: the best correct candidate so far, else the branch origin."""
    return state.get("best") or state.get("origin")


def best_source(state: AgentState, limit: int = 6000) -> str:
    start = state.get("start") or starting_point(state)
    if start is None:
        return "(none yet)"
    source = Path(start["path"]).read_text()
    return f"{describe(start)}\n```python\n{source[:limit]}\n```"


def hardware_text(config: AgentConfig) -> str:
    from kernelwright.harness.environment import hardware_summary

    return json.dumps(hardware_summary(config.device))


def tail(items: list[str], count: int) -> str:
    return "\n".join(items[-count:]) if items else "(none)"
