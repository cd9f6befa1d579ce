"""Scripted LLM sessions shipped with kernelwright: what `kernelwright demo` replays.

Each script is the replies a planner, coder and reviewer would give, in order, plus the verdicts
the harness is expected to reach; the builds, fuzzing and timing are real. `SCRIPTS` maps a name
to a factory of a fresh `ScriptedSession`.
"""

from __future__ import annotations

from collections.abc import Callable

from kernelwright.agent.scripted import ScriptedSession
from kernelwright.agent.scripts import (
    act_norm_region,
    gelu_layernorm_cuda,
    mlp_region_cpu,
    relu_cpu,
    relu_cuda,
    relu_cuda_wide,
    relu_triton,
)

SCRIPTS: dict[str, Callable[[], ScriptedSession]] = {
    "relu-cpu": relu_cpu.session,
    "relu-cuda": relu_cuda.session,
    gelu_layernorm_cuda.NAME: gelu_layernorm_cuda.session,
    "relu-cuda-wide": relu_cuda_wide.session,
    "relu-triton": relu_triton.session,
    mlp_region_cpu.NAME: mlp_region_cpu.session,
    act_norm_region.NAME_CUDA: act_norm_region.session,
    act_norm_region.NAME_CPU: act_norm_region.cpu_session,
}
