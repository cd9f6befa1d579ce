"""The vocabulary of evaluation outcomes: verdicts and the named reasons behind them.

Reasons are stable strings: the agent, the oracle manifest and users' scripts match on them.
"""

from __future__ import annotations

from enum import StrEnum

from kernelwright.errors import ExitCode


class Verdict(StrEnum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    REJECTED = "rejected"  # a reward hack or rule violation
    BUILD_ERROR = "build_error"
    CRASHED = "crashed"
    TIMEOUT = "timeout"

    @property
    def exit_code(self) -> ExitCode:
        return _EXIT[self]


_EXIT = {
    Verdict.CORRECT: ExitCode.OK,
    Verdict.INCORRECT: ExitCode.NEEDS_ATTENTION,
    Verdict.REJECTED: ExitCode.NEEDS_ATTENTION,
    Verdict.BUILD_ERROR: ExitCode.BUILD,
    Verdict.CRASHED: ExitCode.CRASH,
    Verdict.TIMEOUT: ExitCode.CRASH,
}


class Reason(StrEnum):
    """Why a candidate is not `correct` (and, for flags, what raised an eyebrow)."""

    # incorrect
    OUTPUT_MISMATCH = "output_mismatch"  # values differ beyond tolerance
    SHAPE_MISMATCH = "shape_mismatch"
    DTYPE_MISMATCH = "dtype_mismatch"
    DEVICE_MISMATCH = "device_mismatch"
    NONFINITE_OUTPUT = "nonfinite_output"  # NaN/Inf where the reference is finite
    INPUT_MODIFIED = "input_modified"
    OUTPUT_ALIASES_INPUT = "output_aliases_input"
    OUTPUT_REUSED = "output_reused"  # a later call returns (or writes into) an earlier call's output
    NONDETERMINISTIC = "nondeterministic"  # two runs on the same inputs differ (a race)
    CONSTANT_OUTPUT = "constant_output"  # same output for different inputs
    RAISED = "raised"  # forward raised a Python exception
    # rejected: reward hacks and rule violations
    TORCH_FALLBACK = "torch_fallback"  # the main computation is done by PyTorch/cuBLAS/cuDNN
    CALLS_REFERENCE = "calls_reference"  # ModelNew inherits or calls Model
    EXCEPTION_FALLBACK = "exception_fallback"  # try/except falls back to PyTorch
    KERNEL_NOT_LAUNCHED = "kernel_not_launched"
    NO_CUSTOM_KERNEL = "no_custom_kernel"
    SIDE_STREAM = "side_stream"  # work the timer would not see (other streams, threads)
    INPUT_CACHE = "input_cache"  # results cached by input address or content
    PATCHED_TIMER = "patched_timer"
    PATCHED_TORCH = "patched_torch"
    GLOBAL_STATE = "global_state"  # flips global flags (TF32, default dtype, determinism, threads)
    PRECISION_DOWNGRADE = "precision_downgrade"
    LAZY_OUTPUT = "lazy_output"  # tensor subclasses / deferred work finishing outside the timer
    CUDA_GRAPH_REPLAY = "cuda_graph_replay"
    UNVERIFIED_SPEEDUP = "unverified_speedup"  # a suspicious speedup failed re-verification
    NETWORK_ACCESS = "network_access"  # tried to reach the network (strict sandbox; a flag otherwise)
    WRITE_OUTSIDE_SCRATCH = "write_outside_scratch"  # tried to write outside its own folders (strict sandbox)
    DYNAMIC_CODE = "dynamic_code"  # exec/eval/compile of source text: hidden from the static rules
    TIMED_OUTPUT_MISMATCH = "timed_output_mismatch"  # an output produced inside the timed loop is wrong
    PROFILED_OUTPUT_MISMATCH = "profiled_output_mismatch"  # an output produced while profiled is wrong
    PROFILE_MISMATCH = "profile_mismatch"  # far faster when timed than its profiled kernels take
    BASELINE_TAMPERED = "baseline_tampered"  # baselines slower in the candidate's process than in a clean one
    HARNESS_TAMPERED = "harness_tampered"  # the harness's own functions or channel were replaced
    # build_error
    COMPILE_ERROR = "compile_error"
    MALFORMED_CANDIDATE = "malformed_candidate"  # no ModelNew, syntax error, import error
    WRONG_BACKEND = "wrong_backend"
    # crashed / timeout
    SEGFAULT = "segfault"
    ILLEGAL_MEMORY_ACCESS = "illegal_memory_access"
    ABORT = "abort"
    LAUNCH_FAILURE = "launch_failure"  # the GPU aborted a kernel (a fault, or the driver's watchdog)
    OUT_OF_MEMORY = "out_of_memory"
    PROCESS_DIED = "process_died"
    BUILD_TIMEOUT = "build_timeout"
    CORRECTNESS_TIMEOUT = "correctness_timeout"
    TIMING_TIMEOUT = "timing_timeout"
