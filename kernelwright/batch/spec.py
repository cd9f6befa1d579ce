"""What every worker of a batch judges with (`JudgeSpec`) and where each worker runs (`Slot`).

Both cross a process boundary (the parent writes them to its workers, Ray ships them to its
tasks), hence pydantic. `JudgeSpec.from_settings` is the one constructor from the settings and the
command's flags; `JudgeSpec.eval_options` is the one way back to the harness's `EvalOptions`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from kernelwright.errors import UsageError
from kernelwright.harness.options import EvalOptions, TimingPlan
from kernelwright.vocabulary import Device, Policy, SandboxMode, Size

if TYPE_CHECKING:
    from kernelwright.config import Settings


class JudgeSpec(BaseModel):
    """The harness options of a judge batch, the same for every worker."""

    device: Device
    size: Size = Size.DEFAULT
    trials: int = 5
    baselines: list[str] = ["eager", "compile"]
    timing: bool = True
    policy: Policy = Policy.STRICT
    sandbox: SandboxMode = SandboxMode.BEST_EFFORT
    build_cache: Path
    inductor_cache: Path | None = None
    build_timeout_s: float = 600.0
    run_timeout_s: float = 300.0
    time_cap_s: float | None = None
    parallel_builds: int = 1
    """Candidates of one problem handed to the harness as one group: built in parallel (or found
    built ahead), then judged one by one; a group's results are sent when it is done, so a kill
    loses at most that group."""
    build_ahead: int | None = None
    """Candidates a local worker builds at once ahead of judging them, on its build cores
    (`Slot.build_cores`): every candidate of the batch, in the order they will be judged. None:
    one per two build cores on a GPU (at least one), one on the CPU; 0: no builds ahead."""
    open_ahead: bool = True
    """A local worker opens its next problem's session (the reference's run, a candidate worker
    with its baselines ready) while it judges this problem's candidates."""

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        device: Device,
        *,
        size: Size | None = None,
        trials: int | None = None,
        baselines: list[str] | None = None,
        timing: bool | None = None,
        policy: Policy | None = None,
        sandbox: SandboxMode | None = None,
        time_cap_s: float | None = None,
        parallel_builds: int | None = None,
        build_ahead: int | None = None,
        open_ahead: bool | None = None,
    ) -> JudgeSpec:
        """Locations and limits from the settings, then the flags (None: not given)."""
        base = EvalOptions.from_settings(settings, device=device)
        spec = cls(
            device=device,
            size=Size.DEFAULT if size is None else size,
            trials=5 if trials is None else trials,
            baselines=["eager", "compile"] if baselines is None else baselines,
            timing=True if timing is None else timing,
            policy=base.policy if policy is None else policy,
            sandbox=base.sandbox if sandbox is None else sandbox,
            build_cache=base.build_cache,
            inductor_cache=base.inductor_cache,
            build_timeout_s=base.build_timeout_s,
            run_timeout_s=base.run_timeout_s,
            time_cap_s=time_cap_s,
            parallel_builds=(4 if device == Device.CUDA else 1) if parallel_builds is None else parallel_builds,
            build_ahead=build_ahead,
            open_ahead=True if open_ahead is None else open_ahead,
        )
        if spec.parallel_builds < 1:
            raise UsageError("--parallel-builds must be at least 1")
        if spec.build_ahead is not None and spec.build_ahead < 0:
            raise UsageError("--build-ahead must be 0 (off) or more")
        return spec

    def builds_ahead(self, slot: Slot) -> int:
        """How many candidates `slot`'s worker builds at once ahead of judging (0: none)."""
        if self.build_ahead is not None:
            return self.build_ahead
        if self.device == "cpu":
            return 1
        return max(1, len(slot.build_cores(self.device) or os.sched_getaffinity(0)) // 2)

    def judged_with(self) -> dict[str, Any]:
        """What decides a verdict or a time: results judged otherwise must not be mixed in one folder."""
        return self.model_dump(mode="json", include={"device", "size", "trials", "baselines", "timing", "policy"})

    def eval_options(
        self, slot: Slot, progress: Callable[[str], None] | None = None, out_dir: Path | None = None
    ) -> EvalOptions:
        """The harness's options for one worker (its cores, its thread count); `out_dir` receives
        the harness's evidence folder per candidate."""
        plan = TimingPlan(time_cap_s=self.time_cap_s) if self.time_cap_s else TimingPlan()
        return EvalOptions(
            device=self.device,
            size=self.size,
            trials=self.trials,
            baselines=tuple(self.baselines),
            timing=self.timing,
            build_timeout_s=self.build_timeout_s,
            run_timeout_s=self.run_timeout_s,
            build_jobs=slot.build_jobs,
            num_threads=slot.threads if self.device == "cpu" else None,
            build_cache=self.build_cache,
            inductor_cache=self.inductor_cache,
            sandbox=self.sandbox,
            policy=self.policy,
            out_dir=out_dir,
            timing_plan=plan,
            progress=progress,
        )


class Slot(BaseModel):
    """Where one worker runs: its GPU (the value of CUDA_VISIBLE_DEVICES) and its CPU cores.

    Workers' cores never overlap when the machine has at least one core per worker, so one
    worker's builds never run on the cores another worker is timing on; inside a worker the
    harness pauses its own builds while it times."""

    index: int
    label: str
    gpu: str | None = None
    cores: list[int] | None = None
    threads: int | None = None
    """CPU threads the candidate and eager get (CPU device)."""

    @property
    def build_jobs(self) -> int:
        return len(self.cores) if self.cores else 0  # 0: the harness's default (one per core)

    def build_cores(self, device: str) -> list[int] | None:
        """Where this worker builds ahead (None: wherever it runs). On a GPU, its cores less the
        first quarter of them (at least two), which judging keeps to itself: the reference and
        the candidate's launches, the baselines, the next problem's session. On the CPU all of
        them: the candidate and eager time on every core, and builds pause while anything times."""
        if not self.cores or device == "cpu" or len(self.cores) < 4:
            return self.cores
        kept = max(2, len(self.cores) // 4)
        return self.cores[kept:]

    def env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": self.gpu} if self.gpu is not None else {}


def visible_gpus(count: int) -> list[str]:
    """The GPU ids a worker may be pinned to: this process's CUDA_VISIBLE_DEVICES entries if set,
    else 0..count-1 (`count` from torch.cuda.device_count())."""
    listed = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    return listed[:count] if listed else [str(i) for i in range(count)]


def plan_slots(
    device: Device,
    *,
    workers: int | None,
    gpus: list[str] | None,
    threads: int | None = None,
    cores: list[int] | None = None,
) -> list[Slot]:
    """One slot per GPU on `cuda` (at most `workers` of them when given), `workers` slots on the
    CPU (default 1), each with its own share of this process's cores when there are enough."""
    if workers is not None and workers < 1:
        raise UsageError("--workers must be at least 1")
    labels: list[tuple[str, str | None]]
    if device == "cuda":
        if not gpus:
            raise UsageError("no GPU to run on", hint="--device cpu, or check CUDA_VISIBLE_DEVICES")
        chosen = gpus[:workers] if workers else gpus
        labels = [(f"gpu{g}", g) for g in chosen]
    else:
        if gpus:
            raise UsageError("--gpus needs --device cuda")
        labels = [(f"cpu{i}", None) for i in range(workers or 1)]
    available = sorted(cores if cores is not None else os.sched_getaffinity(0))
    n = len(labels)
    shares: list[list[int] | None] = [None] * n
    if len(available) >= n:
        size, extra = divmod(len(available), n)
        start = 0
        for i in range(n):
            take = size + (1 if i < extra else 0)
            shares[i] = available[start : start + take]
            start += take
    per_worker = max(1, len(available) // n)
    return [
        Slot(index=i, label=label, gpu=gpu, cores=shares[i], threads=threads or len(shares[i] or []) or per_worker)
        for i, (label, gpu) in enumerate(labels)
    ]
