"""The evaluation engine: is a candidate correct, is it its own work, and how fast is it?

`session.py` runs one problem's evaluations (`EvalSession`, `evaluate`, `EvalOptions`); `judge.py`
turns what the workers report into verdicts; `verdicts.py` is the one registry of verdicts and
rejection reasons; `result.py` the `EvalResult` that crosses process and file boundaries;
`fuzz.py` draws trial inputs and compares outputs; `environment.py` records the machine.
Subpackages: `process/` (worker processes and their protocol), `build/` (what a worker records
of a candidate's builds and extension calls), `checks/` (static and dynamic reward-hack checks),
`timing/` (timers, statistics, the timing phase). A worker loads its candidate through
`kernelwright.problems.candidate`, the loader and build cache it shares with the profiler.

Layer 5: imports `candidate/`, `problems/`, `hardware_specs/`, `fastext`, `config`, `errors`;
never `profiler/`, `tools/`, `agent/`, a frontend, langchain or textual.
"""
