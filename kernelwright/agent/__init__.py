"""The agent: a LangGraph planner / coder / evaluate / profile / reviewer loop over the harness.

`state.py` (graph state), `configuration.py` (one AgentConfig per run, from the settings and the
typed `RunFlags`), `graph.py` (the nodes
wired with `Command[Literal[...]]` routing), `nodes/` (one module per node, prompts beside them),
`budget.py` (acceptance and stopping, computed from EvalResults), `llm.py` and `scripted.py` (the
chat models), `events.py` (the typed event stream), `runs.py` (run folders), `runner.py` (one
run, start to summary), `assembly.py` (a run's live parts, the same for every frontend).
Inside, each module imports only from those below it (pyproject.toml's agent/ layers contract):
batch, assembly, runner, graph, nodes, remember, then what they share.

Layer 2: imports `memory/`, `tools/`, `harness/`, `profiler/`, `hardware_specs/`, `problems/`,
`config`, `errors`; never a frontend (cli, tui, textual).
"""
