"""Loading a candidate file: `load_candidate` (`loader.py`) runs it with its extensions built in
the content-addressed build cache (`cache.py`).

Shared by the harness (its worker) and the profiler (its ncu target and sweep worker), which may
not import each other, so it sits in `problems/`, below both: a candidate is a KernelBench
solution file, the counterpart of a problem file. Imports `kernelwright.fastext` (the layer
below `problems/`), `problems.execution` (`exec_as_module`) and nothing else of kernelwright.
"""

from kernelwright.problems.candidate.loader import load_candidate

__all__ = ["load_candidate"]
