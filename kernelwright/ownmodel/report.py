"""What `kernelwright model profile --json` writes (pydantic: it crosses a file boundary)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class TensorSpec(BaseModel):
    shape: list[int]
    dtype: str  # "float32", ... ("?" where the trace did not see the call)


class OpRow(BaseModel):
    """One operator at one set of input shapes, ranked by its self device time."""

    rank: int = Field(description="1 is the most time.")
    name: str = Field(description="The profiler's name: aten::addmm.")
    op: str | None = Field(description="torch.ops name of the matched call: aten.addmm.default; None: not traced.")
    inputs: list[TensorSpec] = Field(description="Tensor inputs with a shape, in argument order.")
    time_s: float = Field(description="Self device time per forward (CPU time on the CPU, CUDA time on a GPU).")
    share: float = Field(description="time_s over the model's whole self device time per forward (0 to 1).")
    calls: float = Field(description="Calls per forward.")
    call_s: float = Field(description="Self device time per call.")
    flops: int | None = Field(default=None, description="Per call; None: unknown.")
    bytes: int | None = Field(default=None, description="Per call: each distinct input and output once.")
    sol_s: float | None = Field(default=None, description="Roofline's lower bound per call; None: n/a.")
    bound: str | None = Field(default=None, description="memory or compute, where both bounds are known.")
    room: float | None = Field(default=None, description="call_s over sol_s: how far from the roofline.")
    roofline_note: str = Field(default="", description="Why the roofline is n/a, or what it rests on.")
    inside: str | None = Field(
        default=None, description="For an op the trace did not see: the traced op it ran inside (extract that one)."
    )


class Timing(BaseModel):
    """Whole-model forward time over `repeats` timed calls (after warm-up)."""

    label: str
    median_s: float
    q1_s: float
    q3_s: float
    min_s: float
    max_s: float
    repeats: int


class ModelProfile(BaseModel):
    schema_version: int = 1
    model: str = Field(description="The spec as given: FILE.py:FACTORY.")
    device: str
    device_name: str
    time_kind: str = Field(description="What the op times are: 'CPU time' or 'CUDA time'.")
    iterations: int = Field(description="Profiled forwards (after warm-up).")
    total_s: float = Field(description="The model's self device time per forward, over every profiled event.")
    ops: list[OpRow]
    eager: Timing | None = None
    compiled: Timing | None = None
    compile_note: str = ""
    timer: str = ""
    bandwidth_source: str = ""
    peak_source: str = ""
    notes: list[str] = Field(default_factory=list)

    @property
    def speedup(self) -> float | None:
        """Eager median over compiled median (above 1: torch.compile is faster)."""
        if self.eager is None or self.compiled is None or self.compiled.median_s <= 0:
            return None
        return self.eager.median_s / self.compiled.median_s
