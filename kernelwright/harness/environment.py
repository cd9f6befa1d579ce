"""What machine and library versions a result was measured with (recorded in every EvalResult)."""

from __future__ import annotations

import functools
import platform
import sys
from typing import Any

import torch

from kernelwright import __version__


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
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return {
            "device": "cuda",
            "name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "sms": props.multi_processor_count,
            "memory_gb": round(props.total_memory / 2**30, 1),
        }
    return {"device": "cpu", "name": platform.processor() or platform.machine(), "threads": torch.get_num_threads()}
