"""The tools: the functions the agent and the commands call to act on the world.

`evaluate.py` (judge candidates: one-shot or a warm `EvalSession`), `problem.py` (read a problem),
`specs.py` (GPU specifications), `profile.py` (Nsight Compute digests). Each is thin: it turns
settings and names into calls of the rooms below and returns their typed results.

Layer 4: imports `harness/`, `profiler/`, `hardware_specs/`, `problems/`, `config`, `errors`;
never `agent/`, `memory/`, a frontend, langchain or textual.
"""
