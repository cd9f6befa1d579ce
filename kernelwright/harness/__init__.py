"""The evaluation engine: is a candidate correct, is it its own work, and how fast is it?

`session.py` runs one problem's evaluations (`EvalSession`, `evaluate`, `EvalOptions`): the
workers' lifecycle; `phases/` is the pipeline one candidate goes through (build, trials, work
share, timing, re-verification); `judge/` turns what the workers report into decisions;
`verdicts.py` is the one registry of verdicts and rejection reasons; `result.py` the `EvalResult`
that crosses process and file boundaries; `fuzz.py` draws trial inputs and compares outputs;
`environment.py` records the machine. Subpackages: `workers/` (worker processes, their typed
protocol and their main), `building/` (the trusted build step, builds ahead), `checks/` (static
and dynamic reward-hack checks, what a worker records of a candidate's extension calls),
`timing/` (timers, statistics, the timing phase), `sandbox/` (isolation). A worker loads its
candidate through `kernelwright.problems.candidate`, the loader and build cache it shares with
the profiler. Inside, each sub-package imports only those below it (pyproject.toml's harness
layers contract).

Layer 5: imports `candidate/`, `problems/`, `hardware_specs/`, `fastext`, `config`, `errors`;
never `profiler/`, `tools/`, `agent/`, a frontend, langchain or textual.
"""
