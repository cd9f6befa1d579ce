"""A problem as the agent's planner and coder read it: a short brief (what it computes, dtype,
input shapes, tolerance) and the reference source."""

from __future__ import annotations

from kernelwright.problems import Problem
from kernelwright.problems.instance import materialize
from kernelwright.vocabulary import Size


def input_shapes(problem: Problem, size: str) -> list[str]:
    inst = materialize(problem, Size.SMALL if size == Size.SMALL else Size.DEFAULT)
    return [
        f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}" if hasattr(t, "shape") else repr(t)
        for t in inst.inputs
    ]


def problem_brief(problem: Problem, size: str) -> str:
    atol, rtol = problem.meta.tolerance()
    lines = [
        f"problem: {problem.qualified}",
        f"description: {problem.meta.description or '(none)'}",
        f"dtype: {problem.meta.dtype}; tolerance atol={atol:g} rtol={rtol:g}",
        f"inputs at size {str(size)!r}: {'; '.join(input_shapes(problem, size))}",
        "held-out shape variants are tested too" if problem.has_variants else "",
    ]
    return "\n".join(line for line in lines if line)
