"""The run's problem as the agent's modules read it, resolved once per process: the nodes (its
source, its brief for the prompts) and `remember.py` (its key in memory) both need it, so it lives
below both."""

from __future__ import annotations

from functools import cache

from kernelwright.problems import Problem, resolve_problem
from kernelwright.tools.problem import problem_brief


@cache
def problem_of(name: str) -> Problem:
    return resolve_problem(name)


@cache
def brief(name: str, size: str) -> str:
    return problem_brief(problem_of(name), size)
