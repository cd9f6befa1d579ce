"""The reports a worker sends back, one model per phase: the data of a `result` line, typed.

The wire stays JSON lines of `WorkerMessage` (`jobs.py`): a worker fills one of these models and
sends its fields as the message's data; the harness reads the data back as the same model
(`Outcome.report`) right after it took the message. A report whose data does not validate is one
the harness cannot read: it is handled as a missing one (a forged line is the only way to one;
the channel's sequence check names it).

Every field has the default the harness used when the worker left it out, so a report from an
older worker, or one cut short, reads the way it did when these were dicts.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from kernelwright.harness.options import TrialPlan
from kernelwright.harness.timing.stats import TimingStats
from kernelwright.harness.verdicts import Reason

# (reason, message): what the worker's dynamic checks found (`checks/dynamic.py`, `tamper.py`)
Rejection = tuple[Reason, str]


class Report(BaseModel):
    """A phase's result data. Unknown keys (the audit's `sandbox_attempts`) are left to `WorkerProcess`."""

    model_config = ConfigDict(extra="ignore")

    def wire(self) -> dict[str, object]:
        """The fields as the message's JSON data."""
        return self.model_dump(mode="json")


class BuildRecord(BaseModel):
    """One extension the candidate built (or found built) while it loaded."""

    name: str = ""
    key: str = ""
    cached: bool = False
    seconds: float = 0.0
    library: str | None = None


class BuildReport(Report):
    """`result build`: the candidate loaded (or not), and the baselines made before it."""

    ok: bool = False
    reason: Reason = Reason.COMPILE_ERROR
    detail: str = ""
    seconds: float | None = None  # the worker's own clock: importing the candidate (its build)
    prepare_s: float | None = None
    prepare_error: str | None = None  # the baselines failed before the candidate was loaded
    builds: list[BuildRecord] = Field(default_factory=list)
    rejections: list[Rejection] = Field(default_factory=list)


class ReadyReport(Report):
    """`result ready`: a worker started ahead has its baselines and waits for its candidate."""

    prepare_s: float = 0.0


class TrialReport(Report):
    """`result trial`: what one correctness trial's call did (its output went to the reference's
    process, which compares it). `fatal`: the model could not even be made."""

    index: int = -1
    status: str = ""  # "ok" or "raised"
    detail: str = ""
    reused: bool = False
    alias: bool = False
    modified_inputs: list[int] = Field(default_factory=list)
    output_reused: bool = False
    devices: list[str] = Field(default_factory=list)
    fatal: str | None = None
    rejections: list[Rejection] | None = None  # None: as the trial before said


class SettleReport(Report):
    """`result settle`: whether the last trial's output still equalled the copy handed over, a
    while after it was made (`checks/settling.py`). `looked`: there was a trial output to look at."""

    looked: bool = False
    settled: bool = True
    rejections: list[Rejection] | None = None


class Share(BaseModel):
    """One shape's work-share profile: the candidate's own kernels against library ops, and the
    reference's whole forward on the same inputs. `error`: profiling this shape failed."""

    plan: TrialPlan
    error: str | None = None
    file: str | None = None  # the profiled call's output, for the reference's process to check
    own_ms: float = 0.0
    library_ms: float = 0.0
    own_fraction: float = 0.0
    reference_ms: float = 0.0
    not_work_ms: float = 0.0
    streams: list[int] = Field(default_factory=list)
    reference_streams: list[int] = Field(default_factory=list)
    reference_not_work_ms: float = 0.0
    top_library_ops: list[tuple[str, float]] = Field(default_factory=list)
    own_kernels: list[str] = Field(default_factory=list)
    disowned_kernels: list[str] = Field(default_factory=list)
    ext_calls: int = 0
    ext_calls_by_function: dict[str, int] = Field(default_factory=dict)
    forward_calls: int = 0
    forward_s: float = 0.0
    extension_s: float = 0.0
    extension_fastest_s: dict[str, float] = Field(default_factory=dict)
    ops_inside_per_call: float = 0.0
    output_pass_ms: float = 0.0
    device: str = ""
    calls_per_round: int = 1
    reference_calls_per_round: int = 1
    graph_kernels: list[str] = Field(default_factory=list)  # own kernels replayed from a CUDA graph
    own_op_calls: int = 0  # calls of operators the candidate registered itself (torch.ops.NS.NAME)


class WorkShareReport(Report):
    """`result workshare`: one share per plan profiled."""

    shares: list[Share] = Field(default_factory=list)
    fatal: str | None = None
    rejections: list[Rejection] = Field(default_factory=list)
    ext_calls: dict[str, int] = Field(default_factory=dict)


class TimedFunction(BaseModel):
    """One function's figures in a timing run (`timers.FnTiming`: the fields the judge reads typed,
    the others carried as they are)."""

    model_config = ConfigDict(extra="allow")

    stats: TimingStats
    converged: bool = True
    wall_median_ms: float | None = None
    hidden_work: str | None = None


class TimedRun(BaseModel):
    """`timers.InterleavedResult`, read back: every function timed (the rest carried as it is)."""

    model_config = ConfigDict(extra="allow")

    fns: dict[str, TimedFunction]


class OutputFile(BaseModel):
    """A measured call's output, saved for the reference's process, with the plan of its inputs."""

    plan: TrialPlan
    file: str


class TimingReport(Report):
    """`result timing`: the candidate and its baselines timed interleaved, in the candidate's process."""

    result: TimedRun
    compile_time_s: float | None = None
    prepare_s: float = 0.0
    input_sets: int = 0
    patched_timers: list[str] = Field(default_factory=list)
    sampled_calls: int = 0
    candidate_host_s: float = 0.0
    candidate_calls: int = 0
    extension_s: float = 0.0
    extension_fastest_s: dict[str, float] = Field(default_factory=dict)
    extension_calls: int = 0
    rejections: list[Rejection] = Field(default_factory=list)
    timed_outputs: list[OutputFile] = Field(default_factory=list)
    threads: int = 0  # the intra-op threads the timing ran with (0: not reported)
    one_thread: dict[str, TimingStats] = Field(
        default_factory=dict,
        description="The baselines timed again with one intra-op thread right after (`timing.run.time_one_thread`; "
        "CPU only, more than one thread configured): what `judge.timing` compares the timing with.",
    )


class OneThreadReport(Report):
    """`result onethread`: the CPU's one-thread look at the timed-vs-profiled rules (#28). The
    default shapes profiled and the candidate timed alone, both with one intra-op thread (the
    configured count restored after): no parallel region waits at a barrier for a thread the
    machine has not scheduled, so neither side is inflated by oversubscription the way a
    multi-threaded call is."""

    threads: int = 0  # the intra-op threads configured (the look ran with one)
    share: Share | None = None
    timed: TimingStats | None = None  # the candidate alone, one thread
    extension_fastest_s: dict[str, float] = Field(default_factory=dict)
    extension_calls: int = 0
    candidate_calls: int = 0
    timed_output: OutputFile | None = None  # the last timed call's output, for the reference to check
    fatal: str | None = None
    rejections: list[Rejection] = Field(default_factory=list)


class ReferenceTrial(BaseModel):
    """One trial as the reference ran it (or skipped it: it rejects non-contiguous inputs)."""

    index: int
    status: str = ""  # "ok" or "skipped"
    shapes: list[str] = Field(default_factory=list)
    roundoff: list[float | None] | None = None
    ms: float = 0.0
    detail: str = ""


class ReferenceReport(Report):
    """`result reference`: the reference ran every trial; its outputs stay in its process."""

    trials: list[ReferenceTrial] = Field(default_factory=list)
    held: int = 0


class CompareReport(Report):
    """`result compare`: a candidate's output against the reference, as figures, never values.
    `ipc_unavailable`: the output's CUDA memory handles did not open (the harness goes on with files)."""

    passed: bool = False
    reason: Reason | None = None
    detail: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatch_fraction: float | None = None
    first_mismatches: list[list[int]] = Field(default_factory=list)
    constant_candidate: bool = False
    constant_reference: bool = False
    ipc_unavailable: str | None = None
    seconds: float = 0.0
    handed_over: int = 0


class CleanFigures(BaseModel):
    """A baseline's figures timed in the reference's process (never ran candidate code), and the
    same baseline timed again there with one intra-op thread (None: not taken, as in the
    candidate's worker: `timing.run.time_one_thread`)."""

    median_ms: float = 0.0
    ci_low_ms: float = 0.0
    ci_high_ms: float = 0.0
    min_ms: float | None = None  # the fastest call (None: from a worker that did not send it)
    one_thread: CleanFigures | None = None


class BaselinesReport(Report):
    """`result baselines`: the clean figures of every baseline."""

    times: dict[str, CleanFigures] = Field(default_factory=dict)


class PrepareReport(Report):
    """`result prepare`: the baselines made (and kept) in the reference's process."""

    seconds: float = 0.0
    compile_time_s: float | None = None
