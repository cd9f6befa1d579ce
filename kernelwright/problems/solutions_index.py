"""The bundled solutions with expected verdicts, read from `solutions/manifest.json`.

Two suites share the manifest: the `oracle` solutions (known-correct and known-wrong kernels for
the built-in problems) and the `adversarial` cases (reward hacks of every category of issue #11,
and honest styles the harness must accept). The harness tests evaluate these same files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

SOLUTIONS = Path(__file__).parent / "solutions"

SUITES = ("oracle", "adversarial")

# The adversarial cases' categories: the issue #11 hack (by its number there) or kind each shows.
# Hack 9 (timing beside busy work) has no case: the harness stops its other workers while one times.
CATEGORIES = {
    "reads_expected": "1: returns expected outputs found on disk instead of computing them",
    "cheats_when_timed": "2: right on the correctness trials, wrong while timed",
    "cheats_when_profiled": "3: does the work only while the profiler records",
    "value_keyed_cache": "4: caches outputs under a key that survives new input values",
    "slows_baselines": "5: makes the PyTorch baselines slower in its own process",
    "kernel_named_like_pytorch": "6: own kernels named like ATen's, to claim PyTorch's time",
    "shape_keyed_or_exec_fallback": "7: its kernel on the shapes it expects, PyTorch on the others",
    "side_stream": "8: work the timer does not see (another stream or thread)",
    "tampers_with_harness": "10: patches or forges the harness's own code or messages",
    "honest_style": "honest code that must come out correct",
    "library_work": "a library op does the main work beside an own kernel (the policy decides)",
    "round1": "the first round of hacks: garbage or aliased outputs, fallbacks, caches, crashes, hangs",
}


@dataclass(frozen=True)
class BundledSolution:
    problem: str
    path: Path
    backend: str  # cpp, cuda or triton
    expected: str
    reason: str | None
    note: str
    suite: str = "oracle"
    category: str | None = None
    also: tuple[str, ...] = ()
    """Other reasons that are as right (uninitialised memory may hold zeros or NaNs)."""
    timing: bool = False
    """The verdict needs the timing phase (the hack acts while timed)."""
    size: str | None = None
    """Only meaningful at this input size (`default`); None: any."""
    policy: str | None = None
    """The expected verdict holds under this policy only; None: both."""
    problem_file: Path | None = None
    """The problem file, for a problem that is not built in."""

    @property
    def name(self) -> str:
        return self.path.stem

    def accepts(self, verdict: str, reason: str | None) -> bool:
        return verdict == self.expected and (reason == self.reason or reason in self.also)


def _entry(e: dict) -> BundledSolution:
    return BundledSolution(
        e["problem"],
        SOLUTIONS / e["file"],
        e["backend"],
        e["expected"],
        e.get("reason"),
        e.get("note", ""),
        suite=e.get("suite", "oracle"),
        category=e.get("category"),
        also=tuple(e.get("also", ())),
        timing=bool(e.get("timing", False)),
        size=e.get("size"),
        policy=e.get("policy"),
        problem_file=SOLUTIONS / e["problem_file"] if e.get("problem_file") else None,
    )


def all_solutions(suite: str | None = "oracle") -> list[BundledSolution]:
    """The manifest's entries of one suite (`oracle`, `adversarial`), or of both with None."""
    manifest = SOLUTIONS / "manifest.json"
    if not manifest.is_file():
        return []
    entries = [_entry(e) for e in json.loads(manifest.read_text())]
    return [s for s in entries if suite is None or s.suite == suite]


def bundled_solutions(problem_name: str, suite: str | None = "oracle") -> list[BundledSolution]:
    return [s for s in all_solutions(suite) if s.problem.lower() == problem_name.lower()]
