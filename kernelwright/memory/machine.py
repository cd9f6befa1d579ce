"""Which machine a candidate was measured on, as memory keys it: the GPU's name in the spec table
(so "NVIDIA H100 80GB HBM3" and "H100 SXM" are one machine) and its architecture (Hopper), or the
CPU's model and instruction set architecture. Retrieval ranks "same machine" above "same
architecture" above the rest."""

from __future__ import annotations

import functools

from kernelwright.hardware_specs import current_gpu, detect_cpu
from kernelwright.hardware_specs.matching import Match
from kernelwright.hardware_specs.table import find
from kernelwright.memory.records import Machine


def gpu_machine(name: str, capability: str | None) -> Machine:
    """A GPU as memory keys it: the table's name and architecture when the table knows it."""
    found = find(name)
    if isinstance(found, Match):
        spec = found.spec
        arch = spec.architecture or (
            f"sm_{spec.compute_capability.replace('.', '')}" if spec.compute_capability else ""
        )
        return Machine(device="cuda", name=spec.name, arch=arch or "unknown")
    arch = f"sm_{capability.replace('.', '')}" if capability else "unknown"
    return Machine(device="cuda", name=name, arch=arch)


@functools.cache
def current_machine(device: str) -> Machine:
    """This machine for a run on `device` (`cuda` reads the current GPU; anything else the CPU)."""
    if device == "cuda":
        gpu = current_gpu()
        if gpu is not None:
            return gpu_machine(gpu.name, gpu.compute_capability)
    cpu = detect_cpu()
    return Machine(device="cpu", name=cpu.model or "unknown CPU", arch=cpu.architecture or "unknown")
