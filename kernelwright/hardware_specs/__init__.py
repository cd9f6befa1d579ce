"""GPU (and CPU) specifications: a sourced data table, live detection, and the query the agent calls.

What lives here, lowest first:
- `names`: GPU-name normalisation; `schema`: the table's validated shape; `matching`, `table`:
  loading `gpus.yaml` and finding a GPU in it; `roofline`: peak rates and ridge points of a spec.
- `live_gpu`: the one place kernelwright reads the GPU (torch device properties, nvidia-smi);
  the harness and `doctor` take their GPU facts from it. `detect_cpu`: the host CPU.
- `detect_gpu`, `detection`: live GPUs merged over their table entries, and `detect()` for the machine.
- `query`: structured answers (`query_specs`, `spec_value`, `has_feature`, `peaks`) for the agent.

Layer 6 of DESIGN.md: this folder imports only `kernelwright.config` and `kernelwright.errors`
(plus torch lazily, for start-up speed), never the harness, profiler, tools or frontends; they
import it. Inside the folder there are no import circles, hidden or not.
"""

from kernelwright.hardware_specs.brief import hardware_brief
from kernelwright.hardware_specs.ceilings import Ceiling, Ceilings, gpu_ceilings, host_ceilings
from kernelwright.hardware_specs.detect_cpu import CpuCache, CpuInfo, detect_cpu
from kernelwright.hardware_specs.detect_gpu import DetectedGpu
from kernelwright.hardware_specs.detection import HardwareInfo, detect, detected_spec
from kernelwright.hardware_specs.live_gpu import GpuLive, SmiAnswer, current_gpu, live_gpus, nvidia_smi
from kernelwright.hardware_specs.measured import CpuCeilings, cpu_ceilings
from kernelwright.hardware_specs.query import (
    SpecAnswer,
    has_feature,
    peaks,
    query_specs,
    resolve_field,
    spec_value,
)
from kernelwright.hardware_specs.roofline import Peaks, peaks_of, ridge_points
from kernelwright.hardware_specs.schema import GpuSpec, Source, SpecTable, field_paths
from kernelwright.hardware_specs.table import get_spec, known_gpus, load_table, lookup

__all__ = [
    "Ceiling",
    "Ceilings",
    "CpuCache",
    "CpuCeilings",
    "CpuInfo",
    "DetectedGpu",
    "GpuLive",
    "GpuSpec",
    "HardwareInfo",
    "Peaks",
    "SmiAnswer",
    "Source",
    "SpecAnswer",
    "SpecTable",
    "cpu_ceilings",
    "current_gpu",
    "detect",
    "detect_cpu",
    "detected_spec",
    "field_paths",
    "get_spec",
    "gpu_ceilings",
    "hardware_brief",
    "has_feature",
    "host_ceilings",
    "known_gpus",
    "live_gpus",
    "load_table",
    "lookup",
    "nvidia_smi",
    "peaks",
    "peaks_of",
    "query_specs",
    "resolve_field",
    "ridge_points",
    "spec_value",
]
