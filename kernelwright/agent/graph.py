"""The optimization graph: planner -> coder -> evaluate -> profile -> reviewer -> planner ...

Routing lives in the nodes' `Command[Literal[...]]` return types, so the allowed next steps read
off their signatures; START -> planner is the only static edge. `build_graph(checkpointer)`
compiles it; `studio_graph` is the factory `langgraph.json` points at (LangGraph Studio,
`langgraph dev`), which supplies its own checkpointer.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from kernelwright.agent.nodes.coder import coder
from kernelwright.agent.nodes.evaluate import evaluate
from kernelwright.agent.nodes.planner import planner
from kernelwright.agent.nodes.profile import profile
from kernelwright.agent.nodes.reviewer import reviewer
from kernelwright.agent.state import AgentState

NODES = ("planner", "coder", "evaluate", "profile", "reviewer")


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(AgentState)
    builder.add_node("planner", planner)
    builder.add_node("coder", coder)
    builder.add_node("evaluate", evaluate)
    builder.add_node("profile", profile)
    builder.add_node("reviewer", reviewer)
    builder.add_edge(START, "planner")
    return builder.compile(checkpointer=checkpointer, name="kernelwright")


def studio_graph(config: Any = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled graph for LangGraph Studio (`langgraph.json`); invoke it with
    configurable.agent_config and configurable.deps (see `runner.py`)."""
    return build_graph()
