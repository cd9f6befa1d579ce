"""Every C++ oracle solution of the built-in suite gets the verdict its manifest expects."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from kernelwright.harness.options import EvalOptions
from kernelwright.harness.session import evaluate
from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import BundledSolution, all_solutions

pytestmark = pytest.mark.slow

_BY_PROBLEM: dict[str, list[BundledSolution]] = defaultdict(list)
for _entry in all_solutions():
    if _entry.backend == "cpp":
        _BY_PROBLEM[_entry.problem].append(_entry)


def test_the_manifest_has_cpp_oracles() -> None:
    assert len(_BY_PROBLEM) >= 5


@pytest.mark.parametrize("problem_name", sorted(_BY_PROBLEM))
def test_cpp_oracles_get_their_expected_verdicts(problem_name: str, shared_home: Path) -> None:
    entries = _BY_PROBLEM[problem_name]
    opts = EvalOptions(
        device="cpu",
        size="small",
        timing=False,
        build_cache=shared_home / "build-cache",
        num_threads=1,
        run_timeout_s=180,
        build_timeout_s=400,
    )
    results = evaluate(resolve_problem(problem_name), [e.path for e in entries], opts)
    for entry, result in zip(entries, results, strict=True):
        got = (result.verdict.value, result.reason.value if result.reason else None)
        assert got == (entry.expected, entry.reason), f"{entry.path.name}: {result.message}"
