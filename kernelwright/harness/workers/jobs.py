"""What the harness gives its worker processes: a job file and an environment at start, then
requests on stdin; and the JSON line every message back is (its data typed in `messages.py`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from kernelwright.harness.options import EvalOptions, TimingPlan, TrialPlan
from kernelwright.harness.sandbox.isolation import MODE_VAR
from kernelwright.vocabulary import Device, Size

# In a candidate's worker: "request_fd,reply_fd", the pipes to the harness's trusted build step
# (`harness/building/broker.py`), which alone writes the shared build cache.
BUILD_FDS_VAR = "KERNELWRIGHT_BUILD_FDS"


class WorkerJob(BaseModel):
    mode: Literal["reference", "candidate", "build"]
    problem_path: Path
    candidate_path: Path | None = None
    size: Size = Size.DEFAULT
    device: Device = Device.CPU
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

    @classmethod
    def from_options(
        cls,
        opts: EvalOptions,
        mode: Literal["reference", "candidate", "build"],
        problem_path: Path,
        out_dir: Path,
        *,
        candidate: Path | None = None,
        trials: list[TrialPlan] | None = None,
    ) -> WorkerJob:
        """The job of one worker of an evaluation with `opts` (a build ahead gets the same job as
        the evaluation's own build)."""
        return cls(
            mode=mode,
            problem_path=problem_path,
            candidate_path=candidate,
            size=opts.size,
            device=opts.device,
            weight_seed=opts.weight_seed,
            trials=trials or [],
            out_dir=out_dir,
            build_cache=opts.build_cache,
            num_threads=opts.num_threads,
            timing=opts.timing_plan if opts.timing else None,
            baselines=list(opts.baselines),
        )


def worker_env(opts: EvalOptions) -> dict[str, str]:
    """What the harness adds to a worker's scrubbed environment (`isolation.scrubbed_env`): the
    same for a build ahead as for the evaluation's own workers."""
    # Inductor's parallel-compile pool costs seconds to start and to tear down in every worker,
    # and with a warm cache it compiles nothing: compile in-process unless the user chose otherwise.
    env = {
        "KERNELWRIGHT_WORKER": "1",
        MODE_VAR: opts.sandbox,
        "TORCHINDUCTOR_COMPILE_THREADS": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "1"),
    }
    if opts.inductor_cache is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(opts.inductor_cache)
        if not os.environ.get("TRITON_CACHE_DIR"):
            env["TRITON_CACHE_DIR"] = str(opts.inductor_cache / "triton")
    if opts.device == "cpu" and opts.num_threads:
        env["OMP_NUM_THREADS"] = str(opts.num_threads)
    return env


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


class CompareRequest(BaseModel):
    """`compare JSON`, to the reference's worker: compare a candidate's output file (and its
    repeat's) with the reference for `plan`."""

    plan: TrialPlan
    path: Path
    repeat_path: Path | None = None
    atol: float
    rtol: float


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
    own_ops: list[str] = Field(
        default_factory=list,
        description="Operators the candidate registered itself with its own implementation (`ns::name`, from "
        "static analysis): their calls are its own code in the profile.",
    )


class OneThreadRequest(BaseModel):
    """`onethread JSON`: the CPU's one-thread look at the timed-vs-profiled rules: the first plan
    of `shapes` profiled, then the candidate timed alone, both with one intra-op thread."""

    shapes: WorkShareRequest
    median_ms: float = Field(description="The candidate's median in the timing phase (it bounds the look's probe).")


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
