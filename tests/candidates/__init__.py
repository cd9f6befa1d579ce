"""Test candidates (the bundled adversarial cases and the kits to compose more) and the helpers to
evaluate them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelwright.harness.options import EvalOptions, TimingPlan


def harness_options(home: Path, device: str, **overrides: Any) -> EvalOptions:
    """Harness options for tests: small size, eager baseline only, caches in the session's home."""
    base = EvalOptions(
        device="cuda" if device == "cuda" else "cpu",
        size="small",
        timing=False,
        baselines=("eager",),
        build_cache=home / "build-cache",
        inductor_cache=home / "inductor-cache",
        num_threads=1 if device == "cpu" else None,
        run_timeout_s=180 if device == "cuda" else 120,
        build_timeout_s=400 if device == "cuda" else 300,
        timing_plan=TimingPlan(min_reps=20, max_reps=400, time_cap_s=8.0, input_sets=2)
        if device == "cuda"
        else TimingPlan(min_reps=10, max_reps=60, time_cap_s=3.0, input_sets=2),
    )
    return replace(base, **overrides)


def write_case(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(source)
    return path
