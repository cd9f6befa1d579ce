"""Problems: the PyTorch programs kernelwright optimizes (KernelBench format), their loader, and
the built-in suite with oracle solutions."""

from kernelwright.problems.instance import ProblemInstance, import_module, materialize
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
    "ProblemInstance",
    "ProblemMeta",
    "import_module",
    "load_folder",
    "load_problem_file",
    "materialize",
    "resolve_problem",
]
