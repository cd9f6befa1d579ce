"""Reward-hack checks: `static/` reads a candidate's source (Python and embedded C++/CUDA, with
tree-sitter) before it runs; `dynamic.py` watches it run inside its worker (global state, patched
functions, which kernels carried the work), with `recorder.py` (the candidate's own functions
wrapped: call counts, host time, profiler regions) and `symbols.py` (its CUDA kernels read from
its built libraries: which kernels are its own). Both report reasons from `harness/verdicts.py`,
and both take which PyTorch ops count as work from `torch_ops.py`.
"""
