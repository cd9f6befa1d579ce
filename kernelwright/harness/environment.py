"""What machine and library versions a result was measured with (recorded in every EvalResult).

The GPU facts come from `hardware_specs` (kernelwright's one GPU reader); this module only picks
the few that a result carries and keeps their JSON shape stable.
"""

from __future__ import annotations

import functools
import platform
import sys
from typing import Any

import torch

from kernelwright import __version__
from kernelwright.hardware_specs import current_gpu


@functools.cache
def library_versions() -> dict[str, str]:
    versions = {
        "kernelwright": __version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
    }
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    return versions


def hardware_summary(device: str) -> dict[str, Any]:
    """{device, name, capability, sms, memory_gb} for the current CUDA device; {device, name,
    threads} on the CPU (or when no GPU is visible)."""
    gpu = current_gpu() if device == "cuda" else None
    if gpu is not None:
        return {
            "device": "cuda",
            "name": gpu.name,
            "capability": gpu.compute_capability,
            "sms": gpu.sms,
            "memory_gb": round(gpu.total_memory_bytes / 2**30, 1) if gpu.total_memory_bytes else None,
        }
    return {"device": "cpu", "name": platform.processor() or platform.machine(), "threads": torch.get_num_threads()}
