"""langgraph.json (LangGraph Studio, `langgraph dev`) points at a factory of the compiled graph."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_graph_loads_from_the_langgraph_json_entry() -> None:
    spec = json.loads((ROOT / "langgraph.json").read_text())
    path, _, attr = spec["graphs"]["kernelwright"].partition(":")
    module_spec = importlib.util.spec_from_file_location("kw_studio_entry", ROOT / path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    graph = getattr(module, attr)()
    drawn = graph.get_graph()
    assert {"planner", "coder", "evaluate", "profile", "reviewer"} <= set(drawn.nodes)
    edges = {(e.source, e.target) for e in drawn.edges}
    # routing read from the nodes' Command[Literal[...]] signatures
    assert {("__start__", "planner"), ("coder", "evaluate"), ("evaluate", "coder"), ("reviewer", "planner")} <= edges
    assert ("evaluate", "profile") in edges and ("profile", "reviewer") in edges and ("reviewer", "__end__") in edges
