"""The schema of the GPU spec table (`gpus.yaml`), validated on load.

Every figure in a `GpuSpec` is a leaf of a small group (memory, cache, limits, ...). A figure that is
not null must have a source: `GpuSpec.sources` maps a dotted field path (`memory.bandwidth_gbs`) or a
whole group (`memory`) to a `Source`. The validators enforce that, so the table cannot quietly grow
an unsourced number.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kernelwright.hardware_specs.names import compact

Figure = float | int | str | bool


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Strict):
    """Where a figure comes from: a vendor datasheet or whitepaper (title + URL), or a live reading."""

    title: str
    url: str | None = None
    note: str | None = None

    @model_validator(mode="after")
    def _traceable(self) -> Source:
        if not self.url and not self.note:
            raise ValueError(f"source {self.title!r} needs a url or a note saying where it is")
        return self


class Clocks(_Strict):
    boost_mhz: float | None = None
    base_mhz: float | None = None


class Memory(_Strict):
    size_gb: float | None = None
    type: str | None = None
    bandwidth_gbs: float | None = None


class Cache(_Strict):
    l2_mb: float | None = None
    l3_mb: float | None = None  # AMD Infinity Cache


class SmLimits(_Strict):
    """Per-SM (per-CU on AMD) limits; the CUDA ones are compute-capability facts."""

    shared_mem_per_sm_kb: float | None = None
    shared_mem_per_block_kb: float | None = None  # the opt-in maximum for one block
    registers_per_sm: int | None = None
    registers_per_thread: int | None = None
    max_threads_per_sm: int | None = None
    max_warps_per_sm: int | None = None
    max_blocks_per_sm: int | None = None
    warp_size: int | None = None


class CudaCoreThroughput(_Strict):
    """Dense TFLOP/s of the CUDA cores (AMD: vector ALUs)."""

    fp64: float | None = None
    fp32: float | None = None


class TensorCoreThroughput(_Strict):
    """Dense TFLOP/s of the tensor cores (AMD: matrix cores); int8 in TOP/s."""

    fp64: float | None = None
    tf32: float | None = None
    bf16: float | None = None
    fp16: float | None = None
    fp8: float | None = None
    fp4: float | None = None
    int8: float | None = None


class Features(_Strict):
    tensor_cores: bool | None = None
    tf32: bool | None = None
    bf16: bool | None = None
    fp8: bool | None = None
    fp4: bool | None = None
    structured_sparsity: bool | None = None
    async_copy: bool | None = Field(default=None, description="cp.async global->shared copies (sm_80+)")
    tma: bool | None = Field(default=None, description="Tensor Memory Accelerator, cp.async.bulk.tensor (sm_90+)")
    wgmma: bool | None = Field(default=None, description="warpgroup MMA (sm_90a only)")
    thread_block_clusters: bool | None = None
    distributed_shared_memory: bool | None = None
    tcgen05: bool | None = Field(default=None, description="5th-gen tensor core MMA with tensor memory (sm_100a)")


GROUPS: dict[str, type[_Strict]] = {
    "clocks": Clocks,
    "memory": Memory,
    "cache": Cache,
    "limits": SmLimits,
    "cuda_core_tflops": CudaCoreThroughput,
    "tensor_core_tflops": TensorCoreThroughput,
    "features": Features,
}
TOP_LEVEL_FIGURES = ("architecture", "compute_capability", "sms")


def field_paths() -> list[str]:
    """Every figure's dotted path, in table order (`sms`, `memory.bandwidth_gbs`, ...)."""
    paths = list(TOP_LEVEL_FIGURES)
    for group, model in GROUPS.items():
        paths += [f"{group}.{name}" for name in model.model_fields]
    return paths


class GpuSpec(_Strict):
    """One GPU's figures, each with a source. Null means nobody could source it (never a guess)."""

    name: str
    aliases: list[str] = Field(default_factory=list)
    vendor: Literal["nvidia", "amd"]
    architecture: str | None = None
    compute_capability: str | None = None
    sms: int | None = None
    clocks: Clocks = Clocks()
    memory: Memory = Memory()
    cache: Cache = Cache()
    limits: SmLimits = SmLimits()
    cuda_core_tflops: CudaCoreThroughput = CudaCoreThroughput()
    tensor_core_tflops: TensorCoreThroughput = TensorCoreThroughput()
    features: Features = Features()
    sources: dict[str, Source] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    def value(self, path: str) -> Figure | None:
        """The figure at a dotted path (`memory.bandwidth_gbs`); KeyError for an unknown path."""
        if path not in field_paths():
            raise KeyError(path)
        obj: object = self
        for part in path.split("."):
            obj = getattr(obj, part)
        return obj  # type: ignore[return-value]

    def source_for(self, path: str) -> Source | None:
        """The source of one figure: its own entry, else its group's."""
        return self.sources.get(path) or self.sources.get(path.split(".")[0])

    def figures(self) -> Iterator[tuple[str, Figure]]:
        """(path, value) for every non-null figure."""
        for path in field_paths():
            value = self.value(path)
            if value is not None:
                yield path, value

    @model_validator(mode="after")
    def _every_figure_sourced(self) -> GpuSpec:
        valid_keys = set(field_paths()) | set(GROUPS) | set(TOP_LEVEL_FIGURES)
        unknown = sorted(set(self.sources) - valid_keys)
        if unknown:
            raise ValueError(f"{self.name}: sources name unknown fields {unknown}")
        missing = [path for path, _ in self.figures() if self.source_for(path) is None]
        if missing:
            raise ValueError(f"{self.name}: figures without a source: {missing}")
        return self


class SpecTable(_Strict):
    """The whole table. Names and aliases must be unique (case- and punctuation-insensitive)."""

    gpus: list[GpuSpec]

    @model_validator(mode="after")
    def _unique_names(self) -> SpecTable:
        seen: dict[str, str] = {}
        for spec in self.gpus:
            for label in [spec.name, *spec.aliases]:
                key = compact(label)
                if key in seen and seen[key] != spec.name:
                    raise ValueError(f"{label!r} names both {seen[key]} and {spec.name}")
                seen[key] = spec.name
        return self
