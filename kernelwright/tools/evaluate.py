"""Judge candidates: what `kernelwright eval` and the agent's evaluate step call.

`open_session` is the agent's way in (the reference runs once, the next worker is started ahead);
`evaluate_files` judges a list of files once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kernelwright.config import Settings
from kernelwright.errors import EnvironmentProblem, UsageError
from kernelwright.harness.checks.static.analysis import detect_backend
from kernelwright.harness.options import EvalOptions, TimingPlan
from kernelwright.harness.result import EvalResult
from kernelwright.harness.session import EvalSession, evaluate
from kernelwright.problems import Problem
from kernelwright.vocabulary import Device, DeviceChoice, Policy, SandboxMode, Size


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def resolve_device(requested: DeviceChoice | Device | str | None, settings: Settings) -> Device:
    """`--device` (or the settings' `device`) made concrete: `auto` is the GPU when one is visible."""
    chosen = requested or settings.device
    if chosen == DeviceChoice.AUTO:
        chosen = Device.CUDA if cuda_available() else Device.CPU
    if chosen not in tuple(Device):
        raise UsageError(f"--device must be 'cuda' or 'cpu', not {str(chosen)!r}")
    if chosen == Device.CUDA and not cuda_available():
        raise EnvironmentProblem(
            "--device cuda, but no CUDA GPU is visible", hint="use --device cpu with a C++ candidate"
        )
    return Device(chosen)


def check_candidate_files(paths: list[Path], device: Device) -> None:
    """Every file exists, and no CUDA/Triton candidate is sent to the CPU (a usage or environment
    error before anything starts, not a verdict)."""
    for path in paths:
        if not path.is_file():
            raise UsageError(f"candidate file {path} does not exist")
        backend = detect_backend(path.read_text())
        if backend in ("cuda", "triton") and device == "cpu":
            raise EnvironmentProblem(f"{path} is a {backend} candidate and needs a GPU, but the device is cpu")


def eval_options(
    settings: Settings,
    device: Device,
    *,
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
    """Options from the settings (`EvalOptions.from_settings`), with the CPU's thread count
    pinned so eager and the candidate run on the same threads."""
    if device == Device.CPU and num_threads is None:
        import torch

        num_threads = torch.get_num_threads()
    return EvalOptions.from_settings(
        settings,
        device=device,
        size=size,
        trials=trials,
        baselines=baselines,
        timing=timing,
        timing_plan=timing_plan,
        num_threads=num_threads,
        out_dir=out_dir,
        sandbox=sandbox,
        policy=policy,
        progress=progress,
    )


def open_session(problem: Problem, opts: EvalOptions, *, warm: bool = True) -> EvalSession:
    """A session for one problem, candidate after candidate (close it, or use it in `with`)."""
    return EvalSession(problem, opts, warm=warm)


def evaluate_files(problem: Problem, paths: list[Path], opts: EvalOptions) -> list[EvalResult]:
    """One EvalResult per file, in order."""
    return evaluate(problem, paths, opts)
