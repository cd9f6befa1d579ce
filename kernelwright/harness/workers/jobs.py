"""The messages between the harness and its worker processes (a job file in, JSON lines out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from kernelwright.harness.options import TimingPlan, TrialPlan

# In a candidate's worker: "request_fd,reply_fd", the pipes to the harness's trusted build step
# (`harness/building/broker.py`), which alone writes the shared build cache.
BUILD_FDS_VAR = "KERNELWRIGHT_BUILD_FDS"


class WorkerJob(BaseModel):
    mode: Literal["reference", "candidate", "build"]
    problem_path: Path
    candidate_path: Path | None = None
    size: Literal["default", "small"] = "default"
    device: Literal["cpu", "cuda"] = "cpu"
    weight_seed: int = 42
    trials: list[TrialPlan] = Field(
        default_factory=list,
        description="The correctness trials, for the reference's worker only: a candidate's worker learns each "
        "trial's seed when that trial runs (`TrialRequest`).",
    )
    out_dir: Path = Field(description="Where this worker writes its own outputs.")
    build_cache: Path
    num_threads: int | None = None
    timing: TimingPlan | None = None
    baselines: list[str] = Field(default_factory=list, description="What the candidate is timed against.")


class CandidateAssignment(BaseModel):
    """Sent to a candidate worker started ahead without a candidate (`candidate JSON` on stdin)."""

    candidate_path: Path


class TrialRequest(BaseModel):
    """`trial JSON`: run one correctness trial (inputs drawn from the plan's seed); with `repeat`,
    run it twice on the same inputs (a race shows as two different outputs)."""

    plan: TrialPlan
    repeat: bool = False
    ipc: bool = Field(
        default=False,
        description="Hand CUDA outputs over as memory handles (`cuda_ipc`) from this trial on, this one's and "
        "the profiled and timed calls' outputs too; otherwise as files of data.",
    )


class WorkShareRequest(BaseModel):
    """`workshare JSON`: profile the candidate and the reference on each plan's inputs."""

    plans: list[TrialPlan]
    own_exact: list[str] = Field(
        default_factory=list, description="The candidate's CUDA kernels, demangled, read from its built libraries."
    )
    own_names: list[str] = Field(
        default_factory=list,
        description="Kernel names matched by function name: Triton kernels, and the source's CUDA kernels when "
        "the libraries could not be read.",
    )


class WorkerMessage(BaseModel):
    """One JSON line from a worker: a phase starting, or a phase's result."""

    event: Literal["phase", "result", "error"]
    phase: str
    data: dict[str, Any] = Field(default_factory=dict)
    seq: int | None = Field(
        default=None,
        description="1, 2, 3... in the order the worker sent its messages: a line written by other code in the "
        "worker (candidate code writing to the channel's descriptor) breaks the sequence.",
    )
