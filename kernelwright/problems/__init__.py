"""Problems: the PyTorch programs kernelwright optimizes (KernelBench format), their loader, and
the built-in suite with oracle solutions.

What this package exports imports no torch (commands list and resolve problems without paying
for it); running a problem's code is `problems.instance` (`materialize`, `import_module`), reading
its shapes without allocating is `problems.footprint`, loading a candidate `problems.candidate`.

Layer 6: imports `fastext`, `config`, `errors`; never `harness/`, `profiler/` or anything above.
"""

from kernelwright.problems.loader import (
    BUILTIN_SUITE,
    LoadReport,
    load_folder,
    load_problem_file,
    resolve_problem,
)
from kernelwright.problems.model import InputConstraint, Problem, ProblemMeta

__all__ = [
    "BUILTIN_SUITE",
    "InputConstraint",
    "LoadReport",
    "Problem",
    "ProblemMeta",
    "load_folder",
    "load_problem_file",
    "resolve_problem",
]
