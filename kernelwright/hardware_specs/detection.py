"""`detect()`: what this machine has — its GPUs merged over the spec table, or, with no GPU, its CPU."""

from __future__ import annotations

import functools
import logging
import platform
from typing import Literal

from pydantic import BaseModel, Field

from kernelwright.hardware_specs.detect_cpu import CpuInfo, detect_cpu
from kernelwright.hardware_specs.detect_gpu import DetectedGpu, detect_gpus
from kernelwright.hardware_specs.schema import GpuSpec

log = logging.getLogger(__name__)


class HardwareInfo(BaseModel):
    """This machine, as kernelwright sees it. `kind` is "gpu" when at least one GPU is visible."""

    kind: Literal["gpu", "cpu"]
    gpus: list[DetectedGpu] = Field(default_factory=list)
    cpu: CpuInfo
    os: str = Field(default_factory=platform.platform)
    python: str = Field(default_factory=platform.python_version)
    torch_version: str | None = None
    cuda_runtime: str | None = None  # torch.version.cuda
    hip_runtime: str | None = None  # torch.version.hip on ROCm builds
    driver_version: str | None = None
    notes: list[str] = Field(default_factory=list)


def detect() -> HardwareInfo:
    """Detect the machine. Never raises for a missing GPU, driver or file: those become None fields
    and notes."""
    gpus, driver, notes = detect_gpus()
    torch_version = cuda = hip = None
    try:
        import torch

        torch_version = str(torch.__version__)
        cuda = torch.version.cuda
        hip = getattr(torch.version, "hip", None)
    except ImportError:
        notes.append("torch is not installed")
    if not gpus:
        notes.append("no GPU visible: describing the CPU")
    return HardwareInfo(
        kind="gpu" if gpus else "cpu",
        gpus=gpus,
        cpu=detect_cpu(),
        torch_version=torch_version,
        cuda_runtime=cuda,
        hip_runtime=hip,
        driver_version=driver,
        notes=notes,
    )


@functools.cache
def detected_spec() -> GpuSpec | None:
    """The merged spec of this machine's first GPU (cached per process), or None with no GPU."""
    gpus, _, _ = detect_gpus()
    return gpus[0].spec if gpus else None
