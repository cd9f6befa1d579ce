"""The demo's run configuration: the real graph on the built-in `relu` problem with the scripted
session of the device (C++ on the CPU, CUDA on a GPU), at the small size, one round per scripted
step. `kernelwright demo` and `kernelwright tui --scripted` both start from it."""

from __future__ import annotations

from kernelwright.agent.configuration import AgentConfig, RunFlags
from kernelwright.config import Settings
from kernelwright.errors import UsageError
from kernelwright.vocabulary import Backend, Device, Size

DEMO_PROBLEM = "relu"
DEMO_SCRIPTS = {Device.CPU: "relu-cpu", Device.CUDA: "relu-cuda"}


def demo_config(settings: Settings, device: Device | str) -> AgentConfig:
    """The scripted demo's AgentConfig on `device` ('cpu' or 'cuda')."""
    if device not in DEMO_SCRIPTS:
        raise UsageError(f"no scripted demo session for {device} yet", hint="use --device cpu")
    chosen = Device(device)
    flags = RunFlags(
        device=chosen,
        backend=Backend.CPP if chosen == Device.CPU else Backend.CUDA,
        size=Size.SMALL,
        target=1.0,
        max_rounds=4,
        coder_retries=1,
        no_improvement_rounds=10,
        timing_cap_s=5.0,
        # On the CPU eager, torch.compile and the candidates all run on one thread, so a shared
        # machine's load does not decide the race.
        num_threads=1 if chosen == Device.CPU else None,
        scripted=DEMO_SCRIPTS[chosen],
        memory=False,  # the demo shows the whole loop every time and leaves the user's memory alone
    )
    return AgentConfig.from_settings(settings, DEMO_PROBLEM, flags)
