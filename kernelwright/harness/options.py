"""What one evaluation is asked to do: `EvalOptions` (built from the settings in one call,
`EvalOptions.from_settings`), the correctness trials (`plan_trials`) and the timing plan the
workers follow.

No torch here: the CLI reads the baseline names and defaults without paying for `import torch`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from kernelwright.harness.baselines import DEFAULT_BASELINES
from kernelwright.vocabulary import Device, Policy, SandboxMode, Size

if TYPE_CHECKING:  # pydantic-settings costs a tenth of a second the CLI's start-up need not pay
    from kernelwright.config import Settings

log = logging.getLogger(__name__)

DISTRIBUTIONS = ("uniform", "normal", "large", "tiny", "signed")  # trial input values (fuzz.py draws them)


class TrialPlan(BaseModel):
    """One correctness trial: which shapes, which value distribution, which seed. The harness plans
    them and sends them to its workers in the job file."""

    model_config = ConfigDict(frozen=True)

    index: int
    seed: int
    distribution: str
    variant: int | None = None  # None: the default input shapes
    contiguous: bool = True


def plan_trials(n_trials: int, n_variants: int, base_seed: int) -> list[TrialPlan]:
    """At least `n_trials` trials over the default shapes cycling through every distribution,
    then one per shape variant, then one non-contiguous trial."""
    plans: list[TrialPlan] = []

    def add(seed: int, distribution: str, variant: int | None, contiguous: bool = True) -> None:
        plans.append(
            TrialPlan(index=len(plans), seed=seed, distribution=distribution, variant=variant, contiguous=contiguous)
        )

    for i in range(max(n_trials, len(DISTRIBUTIONS))):
        add(base_seed + 7919 * i, DISTRIBUTIONS[i % len(DISTRIBUTIONS)], None)
    for v in range(n_variants):
        add(base_seed + 104729 + 31 * v, DISTRIBUTIONS[(v + 1) % len(DISTRIBUTIONS)], v)
    add(base_seed + 1299709, "normal", None, contiguous=False)
    return plans


class TimingPlan(BaseModel):
    """How the timing phase samples: warm-up calls, repetitions, the convergence target, the time
    cap and how many rotating input sets (within a memory budget) it cycles through."""

    warmup: int = 3
    min_reps: int = 10
    max_reps: int = 500
    target_rel_ci: float = 0.01
    time_cap_s: float = 20.0
    input_sets: int = 3
    memory_budget_bytes: int = 2 << 30
    blocks: int = 4
    """Consecutive timing blocks the batches are grouped into (the speedup interval covers the drift
    between them: `timing.stats.block_interval`); the stopping rule waits for one batch per block."""


@dataclass(frozen=True)
class EvalOptions:
    device: Device = Device.CPU
    size: Size = Size.DEFAULT
    trials: int = 5
    baselines: tuple[str, ...] = DEFAULT_BASELINES
    timing: bool = True
    weight_seed: int = 42
    base_seed: int = 1234
    suspicious_speedup: float = 10.0
    build_timeout_s: float = 600.0
    run_timeout_s: float = 300.0
    call_timeout_floor_s: float = 10.0  # one call's hang bound: at least this, ...
    call_timeout_factor: float = 100.0  # ... else this many times the reference's slowest trial
    build_jobs: int = 0
    num_threads: int | None = None
    build_cache: Path = Path("build-cache")
    inductor_cache: Path | None = None
    out_dir: Path | None = None
    sandbox: SandboxMode = SandboxMode.BEST_EFFORT
    policy: Policy = Policy.STRICT  # see Settings.policy and harness/reasons.py
    output_ipc: bool = True  # CUDA outputs to the reference's process as memory handles (else files)
    timing_plan: TimingPlan = field(default_factory=TimingPlan)
    progress: Callable[[str], None] | None = field(default=None, compare=False)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        device: Device | None = None,
        size: Size | None = None,
        trials: int | None = None,
        baselines: tuple[str, ...] | None = None,
        timing: bool | None = None,
        timing_plan: TimingPlan | None = None,
        num_threads: int | None = None,
        out_dir: Path | None = None,
        sandbox: SandboxMode | None = None,
        policy: Policy | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> EvalOptions:
        """The options a command or the agent runs with: locations and limits from the settings,
        then the flags given (None: not given; the settings' `sandbox` and `policy`, else the
        field's default). `device` must be resolved already (`cpu` or `cuda`, never `auto`)."""
        assert settings.build_cache_dir is not None  # derived by Settings
        defaults = cls()
        return cls(
            device=defaults.device if device is None else device,
            size=defaults.size if size is None else size,
            trials=defaults.trials if trials is None else trials,
            baselines=defaults.baselines if baselines is None else baselines,
            timing=defaults.timing if timing is None else timing,
            timing_plan=defaults.timing_plan if timing_plan is None else timing_plan,
            num_threads=num_threads,
            out_dir=out_dir,
            progress=progress,
            build_timeout_s=settings.build_timeout_s,
            run_timeout_s=settings.run_timeout_s,
            build_jobs=settings.build_jobs,
            build_cache=settings.build_cache_dir,
            inductor_cache=settings.inductor_cache_dir,
            sandbox=settings.sandbox if sandbox is None else sandbox,
            policy=settings.policy if policy is None else policy,
        )

    def say(self, message: str) -> None:
        log.info(message)
        if self.progress is not None:
            self.progress(message)
