"""The bundled adversarial cases (the manifest's `adversarial` suite): every entry names a file that
exists and reads as its backend, an expected verdict with a known reason, and a known category;
every category of issue #11 has cases on both devices. Static checks only: nothing is built."""

from __future__ import annotations

import ast
from collections import defaultdict

import pytest

from kernelwright.harness.checks.static.analysis import detect_backend
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.problems import load_problem_file
from kernelwright.problems.loader import builtin_problems
from kernelwright.problems.solutions_index import (
    CATEGORIES,
    SOLUTIONS,
    SUITES,
    BundledSolution,
    all_solutions,
)

ADVERSARIAL = all_solutions("adversarial")
BUILTIN = {p.name for p in builtin_problems()}

# Issue #11's categories (9, timing beside other busy work, is not here: the harness stops its
# other workers while one times, and a candidate file has nothing to show for it) and the honest
# styles, each with cases on the CPU and on CUDA. Except: a kernel named like PyTorch's (6) exists
# on CUDA only, because the CPU judge counts the calls of the extension's own functions, not the
# profiler's kernel names, so on the CPU a name claims nothing.
ISSUE_CATEGORIES = [
    "reads_expected",
    "cheats_when_timed",
    "cheats_when_profiled",
    "value_keyed_cache",
    "slows_baselines",
    "kernel_named_like_pytorch",
    "shape_keyed_or_exec_fallback",
    "side_stream",
    "tampers_with_harness",
    "honest_style",
]
CUDA_ONLY = {"kernel_named_like_pytorch"}


def _device(entry: BundledSolution) -> str:
    return "cpu" if entry.backend == "cpp" else "cuda"


def _unparsable(entry: BundledSolution) -> bool:
    """A case that is a syntax error on purpose."""
    try:
        ast.parse(entry.path.read_text())
    except SyntaxError:
        return True
    return False


def test_the_suites_are_apart() -> None:
    oracles, both = all_solutions(), all_solutions(None)
    assert oracles and ADVERSARIAL
    assert {s.suite for s in oracles} == {"oracle"}
    assert len(both) == len(oracles) + len(ADVERSARIAL)
    assert {s.suite for s in both} == set(SUITES)


@pytest.mark.parametrize("entry", ADVERSARIAL, ids=[e.name for e in ADVERSARIAL])
def test_entry_is_complete(entry: BundledSolution) -> None:
    assert entry.path.is_file()
    sub = "cpp" if entry.backend == "cpp" else "cuda"
    assert entry.path.parent == SOLUTIONS / "adversarial" / sub
    assert entry.backend in {"cpp", "cuda", "triton"}
    assert entry.category in CATEGORIES
    assert entry.note.endswith(".") and len(entry.note) > 40
    assert entry.expected in {v.value for v in Verdict}
    reasons = {r.value for r in Reason}
    if entry.expected == "correct":
        assert entry.reason is None and not entry.also
    else:
        assert entry.reason in reasons
    assert set(entry.also) <= reasons
    assert entry.size in (None, "default", "small")
    assert entry.policy in (None, "strict", "engineering")
    if entry.problem_file is None:
        assert entry.problem in BUILTIN
    else:
        assert load_problem_file(entry.problem_file).name == entry.problem
    if _unparsable(entry):
        assert entry.reason == "malformed_candidate"
        return
    assert detect_backend(entry.path.read_text()) == entry.backend
    classes = {n.name for n in ast.parse(entry.path.read_text()).body if isinstance(n, ast.ClassDef)}
    assert "ModelNew" in classes or entry.reason == "malformed_candidate"


def test_names_are_unique() -> None:
    names = [e.name for e in ADVERSARIAL]
    assert len(names) == len(set(names))


def test_accepts_the_other_reasons_as_right() -> None:
    [entry] = [e for e in ADVERSARIAL if e.name == "uninitialised_output"]
    assert entry.accepts("incorrect", "output_mismatch") and entry.accepts("incorrect", "nonfinite_output")
    assert not entry.accepts("rejected", "output_mismatch") and not entry.accepts("incorrect", "output_reused")


def test_every_category_of_the_issue_has_cases_on_both_devices() -> None:
    devices: dict[str, set[str]] = defaultdict(set)
    for e in ADVERSARIAL:
        devices[e.category or ""].add(_device(e))
    for category in ISSUE_CATEGORIES:
        want = {"cuda"} if category in CUDA_ONLY else {"cpu", "cuda"}
        assert devices[category] >= want, category
