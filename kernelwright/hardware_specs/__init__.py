"""GPU (and CPU) specifications: a sourced data table, live detection, and the query the agent calls."""

from kernelwright.hardware_specs.detect_cpu import CpuCache, CpuInfo, detect_cpu
from kernelwright.hardware_specs.detect_gpu import DetectedGpu, GpuLive
from kernelwright.hardware_specs.detection import HardwareInfo, detect, detected_spec
from kernelwright.hardware_specs.query import (
    Peaks,
    SpecAnswer,
    has_feature,
    peaks,
    peaks_of,
    query_specs,
    resolve_field,
    ridge_points,
    spec_value,
)
from kernelwright.hardware_specs.schema import GpuSpec, Source, SpecTable, field_paths
from kernelwright.hardware_specs.table import get_spec, known_gpus, load_table, lookup

__all__ = [
    "CpuCache",
    "CpuInfo",
    "DetectedGpu",
    "GpuLive",
    "GpuSpec",
    "HardwareInfo",
    "Peaks",
    "Source",
    "SpecAnswer",
    "SpecTable",
    "detect",
    "detect_cpu",
    "detected_spec",
    "field_paths",
    "get_spec",
    "has_feature",
    "known_gpus",
    "load_table",
    "lookup",
    "peaks",
    "peaks_of",
    "query_specs",
    "resolve_field",
    "ridge_points",
    "spec_value",
]
