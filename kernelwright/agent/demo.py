"""The demo's run configuration: the real graph on a built-in problem with the scripted session of
the device, one round per scripted step. `kernelwright demo` and `kernelwright tui --scripted` both
start from it.

- On a GPU: `gelu_layernorm_bf16` at its default size, CUDA, a problem where an honest kernel beats
  torch.compile at real size (`agent/scripts/gelu_layernorm_cuda.py` says how it was found). relu was
  the GPU demo's problem before (issue #29): at its default size it is at the bandwidth limit for
  everyone, and at the small size what the kernel beat was mostly torch.compile's per-call overhead.
- On a CPU: `relu` at the small size, C++, one thread: a CPU at the default size would spend
  minutes on each candidate; the CPU demo shows the loop, not a speedup that carries to real sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelwright.agent.configuration import AgentConfig, RunFlags
from kernelwright.agent.scripts import gelu_layernorm_cuda
from kernelwright.config import Settings
from kernelwright.errors import UsageError
from kernelwright.vocabulary import Backend, Device, Size


@dataclass(frozen=True)
class Demo:
    """What the demo runs on one device: the built-in problem, its size and the scripted session."""

    problem: str
    size: Size
    scripted: str


DEMOS = {
    Device.CPU: Demo("relu", Size.SMALL, "relu-cpu"),
    Device.CUDA: Demo(gelu_layernorm_cuda.PROBLEM, Size.DEFAULT, gelu_layernorm_cuda.NAME),
}


def demo_for(device: Device | str) -> Demo:
    """The demo of `device` ('cpu' or 'cuda'); a UsageError for a device without one."""
    if device not in DEMOS:
        raise UsageError(f"no scripted demo session for {device} yet", hint="use --device cpu")
    return DEMOS[Device(device)]


def demo_config(settings: Settings, device: Device | str) -> AgentConfig:
    """The scripted demo's AgentConfig on `device` ('cpu' or 'cuda')."""
    demo = demo_for(device)
    chosen = Device(device)
    flags = RunFlags(
        device=chosen,
        backend=Backend.CPP if chosen == Device.CPU else Backend.CUDA,
        size=demo.size,
        target=1.0,
        max_rounds=4,
        coder_retries=1,
        no_improvement_rounds=10,
        timing_cap_s=5.0,
        # On the CPU eager, torch.compile and the candidates all run on one thread, so a shared
        # machine's load does not decide the race.
        num_threads=1 if chosen == Device.CPU else None,
        scripted=demo.scripted,
        memory=False,  # the demo shows the whole loop every time and leaves the user's memory alone
    )
    return AgentConfig.from_settings(settings, demo.problem, flags)


def is_demo_problem(ref: str, device: Device | str) -> bool:
    """Whether `ref` (a name, `17_name`, `level2/17_name` or a file path) names the demo problem of
    `device`, the only one its scripted session knows."""
    stem = Path(ref).stem if ref.endswith(".py") else ref.rsplit("/", 1)[-1]
    prefix, _, rest = stem.partition("_")
    return (rest if prefix.isdigit() and rest else stem) == demo_for(device).problem
