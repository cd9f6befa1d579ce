"""One registry of why a candidate is not `correct`: for every `Reason`, the verdict it leads to,
why it does not count, where in the harness it is decided and under which policy.

`kernelwright eval --explain REASON` prints an entry and `docs/harness.md` carries the table
(`scripts/gen_reason_table.py` regenerates it; a test fails when it is stale). The rationales
describe what the code in `checks/`, `judge/`, `phases/`, `timing/` and `workers/` does: change
the rule there, then the sentence here. No torch here: `eval --explain` answers at once.
"""

from __future__ import annotations

import difflib
import textwrap
from dataclasses import dataclass
from typing import Literal

from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.vocabulary import Policy

Stage = Literal["static", "build", "correctness", "work_share", "timing", "sandbox", "process"]
Decides = Literal["always", "strict_sandbox", "flag_only"]

STAGES: dict[Stage, str] = {
    "static": "tree-sitter reading of the source (and its C++/CUDA) before anything runs",
    "build": "the candidate's import and compilation in its worker",
    "correctness": "dynamic checks in the candidate's worker and comparison with the reference in the harness",
    "work_share": "torch.profiler attribution of the forward pass (the candidate's kernels against library ops)",
    "timing": "the timing phase and the checks on what it measured",
    "sandbox": "the worker's isolation layers and its audit hook",
    "process": "how the worker ended: signals, CUDA faults, phase time limits",
}
POLICIES: dict[Policy, str] = {
    Policy.STRICT: "the forward pass must be the candidate's own kernels (the default; KernelBench's rule)",
    Policy.ENGINEERING: "`--policy engineering`: library calls may do part of the work beside the candidate's own "
    "kernels on the hot path; their share is reported",
}
BOTH: frozenset[Policy] = frozenset(Policy)


@dataclass(frozen=True)
class ReasonInfo:
    code: Reason
    verdict: Verdict
    """The verdict this reason gives the result when it decides it."""
    decided: tuple[Stage, ...]
    """Where the harness decides it, the usual place first."""
    why: str
    """What the candidate did and why that does not count, for a sceptical kernel engineer."""
    policies: frozenset[Policy] = BOTH
    """The policies under which this reason rejects (`POLICIES`)."""
    policy_rules: tuple[tuple[Policy, str], ...] = ()
    """How the rule differs under a policy, where it does (shown by `--explain` and in the table)."""
    decides: Decides = "always"
    """`strict_sandbox`: a flag in best-effort sandbox mode, the verdict under `--sandbox strict`;
    `flag_only`: shown as a flag, never the verdict today (other checks catch the harm)."""

    @property
    def verdict_text(self) -> str:
        if self.decides == "strict_sandbox":
            return f"{self.verdict.value} with `--sandbox strict`; a flag in best-effort mode"
        if self.decides == "flag_only":
            return "a flag only (today)"
        return self.verdict.value

    @property
    def policy_text(self) -> str:
        text = "both" if self.policies == BOTH else " + ".join(sorted(self.policies))
        rules = "; ".join(f"{name}: {rule}" for name, rule in self.policy_rules)
        return f"{text} ({rules})" if rules else text


_ENTRIES = (
    # incorrect
    ReasonInfo(
        Reason.OUTPUT_MISMATCH,
        Verdict.INCORRECT,
        ("correctness",),
        "Some output value differs from the reference by more than atol + rtol·abs(ref) plus 16x the reference's own "
        "round-off (fp32 against an fp64 run; fp16/bf16 against an fp32 run), on a fuzzed trial. That tolerance "
        "already covers a different summation order; beyond it the kernel computes something else (an unprocessed "
        "tail, a hard-coded shape, low-precision accumulation). Where the fp16/bf16 reference is itself no better "
        "than the tolerance (ill-conditioned at this precision), the output must match it or its fp32 run, and the "
        "message says so.",
    ),
    ReasonInfo(
        Reason.SHAPE_MISMATCH,
        Verdict.INCORRECT,
        ("correctness",),
        "The candidate returned a different number of outputs, something that is not a tensor where the reference "
        "returns one, or a tensor of another shape. Callers of the module depend on the shape, so it is wrong "
        "whatever the values.",
    ),
    ReasonInfo(
        Reason.DTYPE_MISMATCH,
        Verdict.INCORRECT,
        ("correctness",),
        "An output has a different dtype from the reference's. A drop-in replacement must return what the module "
        "returned; a cheaper dtype is also a hidden precision change.",
    ),
    ReasonInfo(
        Reason.DEVICE_MISMATCH,
        Verdict.INCORRECT,
        ("correctness",),
        "An output lives on another device than the one evaluated (for example a CUDA problem answered on the CPU)."
        " The work was not done where it is timed, and the caller would get a tensor on the wrong device.",
    ),
    ReasonInfo(
        Reason.NONFINITE_OUTPUT,
        Verdict.INCORRECT,
        ("correctness",),
        "The output has NaN or Inf where the reference is finite: an overflow, a division by zero or uninitialised "
        "memory. No tolerance makes a NaN close to a number.",
    ),
    ReasonInfo(
        Reason.INPUT_MODIFIED,
        Verdict.INCORRECT,
        ("correctness",),
        "The candidate wrote into an input tensor (the inputs are compared with a copy taken before the call). The "
        "reference leaves its inputs alone, and a caller that reuses them would compute with clobbered data.",
    ),
    ReasonInfo(
        Reason.OUTPUT_ALIASES_INPUT,
        Verdict.INCORRECT,
        ("correctness",),
        "An output shares memory with an input, e.g. an in-place op returning its argument. The reference returns a"
        " new tensor; an alias changes the caller's input and skips the allocation and writes the reference pays "
        "for.",
    ),
    ReasonInfo(
        Reason.OUTPUT_REUSED,
        Verdict.INCORRECT,
        ("correctness",),
        "A second call returned memory that the first call's output still holds: the module hands out one buffer "
        "(e.g. a C++ `static` tensor) and overwrites the caller's earlier result. PyTorch returns a new tensor per "
        "call; a reused buffer breaks any caller that keeps a result and skips the allocation the reference pays "
        "for. A static scratch buffer is fine; returning it is not.",
    ),
    ReasonInfo(
        Reason.NONDETERMINISTIC,
        Verdict.INCORRECT,
        ("correctness",),
        "Two runs on the same inputs gave outputs that differ beyond the tolerance (the first trial runs twice). "
        "That is a race or a read of uninitialised memory; it passing once proves nothing about the next call.",
    ),
    ReasonInfo(
        Reason.CONSTANT_OUTPUT,
        Verdict.INCORRECT,
        ("correctness",),
        "The output was constant on at least two trials where the reference's varied. It only passed the tolerance "
        "because the reference is near zero on those inputs; the kernel does not compute the function.",
    ),
    ReasonInfo(
        Reason.RAISED,
        Verdict.INCORRECT,
        ("correctness",),
        "forward raised a Python exception on a trial (or the worker reported a fatal error while running it). A "
        "kernel that fails on valid inputs of the problem is not a replacement for the reference.",
    ),
    # rejected: reward hacks and rule violations
    ReasonInfo(
        Reason.TORCH_FALLBACK,
        Verdict.REJECTED,
        ("static", "work_share"),
        "PyTorch did the main computation: torch.compile/dynamo/jit generated the kernel (read in the source), the "
        "extension calls ATen's kernels directly (`at::cpu::`, `at::native::`: the profiler cannot see that work), "
        "or, under `strict`, library ops (aten, cuBLAS, cuDNN, also called from inside the extension) took at least "
        "50% of the reference's whole forward time on some profiled shape. The speedup would then be PyTorch's, not "
        "the candidate's. Under `engineering` library ops may do part of the work, but on every shape the candidate's "
        "own kernels must take at least a quarter of the time of one copy of the output (or 5% of its profiled time, "
        "if that is less): an epilogue over a library GEMM's output does, a kernel run on one element does not.",
        policy_rules=(
            (Policy.STRICT, "library ops below 50% of the reference's time"),
            (Policy.ENGINEERING, "own kernels at least a quarter of one pass over the output; library share reported"),
        ),
    ),
    ReasonInfo(
        Reason.CALLS_REFERENCE,
        Verdict.REJECTED,
        ("static",),
        "ModelNew inherits from, instantiates, imports or refers to the reference Model. Calling the reference "
        "passes every correctness check by construction and measures PyTorch, not a kernel.",
    ),
    ReasonInfo(
        Reason.EXCEPTION_FALLBACK,
        Verdict.REJECTED,
        ("static",),
        "A try around the kernel falls back to PyTorch in its except/else branch (a branch keyed on device, dtype "
        "or shape that does so is a flag). When the kernel fails, PyTorch's answer passes the checks in its place, "
        "so a broken kernel looks correct.",
    ),
    ReasonInfo(
        Reason.KERNEL_NOT_LAUNCHED,
        Verdict.REJECTED,
        ("static", "work_share"),
        "The candidate's kernel does not run: forward never reaches it in the source, the extension function is "
        "never called, or the profiler saw, on some shape, no call of its extension (nor of an operator it "
        "registered itself, nor a CUDA graph replaying its own kernels) or no kernel of the candidate's. "
        "Whatever produced the output, it was not the custom kernel being evaluated.",
    ),
    ReasonInfo(
        Reason.NO_CUSTOM_KERNEL,
        Verdict.REJECTED,
        ("static",),
        "The file has no load_inline/load extension and no Triton kernel: nothing custom can run. A rearrangement "
        "of PyTorch calls is not a kernel.",
    ),
    ReasonInfo(
        Reason.SIDE_STREAM,
        Verdict.REJECTED,
        ("static", "work_share", "timing"),
        "Work runs where the timer does not look: a side CUDA stream or a host thread (in the source), kernels on a "
        "device stream the reference's kernels do not use (in the profiled calls, whatever the source hides), or a "
        "synchronised wall time far above the CUDA-event time while the baselines' are not (in the timing phase). "
        "Events on the current stream do not see that work, so the measured time understates the real one.",
    ),
    ReasonInfo(
        Reason.INPUT_CACHE,
        Verdict.REJECTED,
        ("static", "work_share"),
        "Results are cached by input identity: data_ptr(), id() or storage used as a key or compared, tensors kept "
        "in static C++ variables, @lru_cache on the computation (any other cache, keyed by values or shapes, is "
        "only a flag), or a cache flagged in the source that replayed a stored result when the profile called "
        "forward again on the same inputs. A replayed result is not a computation; the harness also reuses buffers "
        "with new values, so a cache that slips past fails as a mismatch. The same under both policies (a policy "
        "decides who may do the work, not whether a stored result counts as work); a cache that never replays "
        "while judged (a launch config keyed by shape) is correct, with its flag shown.",
    ),
    ReasonInfo(
        Reason.PATCHED_TIMER,
        Verdict.REJECTED,
        ("static", "correctness", "timing"),
        "The candidate replaces a timing function (time.perf_counter, CUDA events, ...), seen in the source or as a"
        " changed identity in its worker. Whoever controls the clock controls the speedup.",
    ),
    ReasonInfo(
        Reason.PATCHED_TORCH,
        Verdict.REJECTED,
        ("static", "correctness"),
        "The candidate monkey-patches a torch function (seen in the source, or a public callable of torch, "
        "torch.nn.functional, torch.Tensor or nn.Module whose identity changed in its worker). The baselines run in"
        " the same process, so a patch can slow them or change what the comparison sees.",
    ),
    ReasonInfo(
        Reason.GLOBAL_STATE,
        Verdict.REJECTED,
        ("static", "correctness"),
        "The candidate changes a process-wide PyTorch setting (default dtype, deterministic algorithms, thread "
        "count, cudnn.benchmark, ...). The eager and torch.compile baselines share the process, so the flag changes"
        " their speed, not only the candidate's.",
    ),
    ReasonInfo(
        Reason.PRECISION_DOWNGRADE,
        Verdict.REJECTED,
        ("static", "correctness"),
        "In a float32 problem the candidate computes in lower precision: TF32 enabled, a matmul precision below "
        "'highest', .half()/.bfloat16(), half types in its C++/CUDA, tl.dot asked for TF32, or the precision flags "
        "changed in its worker. It may pass the tolerance on the fuzzed inputs, but it is not the computation the "
        "problem asks for and the reference was timed without it.",
    ),
    ReasonInfo(
        Reason.LAZY_OUTPUT,
        Verdict.REJECTED,
        ("static", "correctness"),
        "The output finishes its work outside the call: the candidate returns a tensor subclass or intercepts ops "
        "with __torch_function__/dispatch modes, or its output was not final when forward returned (it changed "
        "while the harness copied it, or, after failing its comparison, kept changing after the copy). Deferred "
        "work is not in the timed region, so the time is not the cost of the result.",
    ),
    ReasonInfo(
        Reason.CUDA_GRAPH_REPLAY,
        Verdict.REJECTED,
        ("static",),
        "The candidate captures or replays CUDA graphs. Graphs are legitimate, so this is a flag; a graph replayed "
        "on stale addresses or values fails the fresh-input trials and the timed-output samples as an output "
        "mismatch.",
        decides="flag_only",
    ),
    ReasonInfo(
        Reason.UNVERIFIED_SPEEDUP,
        Verdict.REJECTED,
        ("correctness", "timing"),
        "A speedup over eager above the suspicious threshold (10x by default) was re-checked in fresh processes "
        "with new seeds and inputs, and was not correct there. (Correct there but re-timed under half the first "
        "speedup is the flag `speedup_not_reproduced`: the first figures are dropped and the fresh process's "
        "timing is reported, or none when it is itself over the threshold.)",
    ),
    ReasonInfo(
        Reason.NETWORK_ACCESS,
        Verdict.REJECTED,
        ("sandbox",),
        "The candidate tried to reach the network (socket connect/send/bind, name lookups, as reported by the "
        "worker's audit hook). A kernel has no reason to, and a connection could fetch answers or leak data; the "
        "network namespace blocks it where available.",
        decides="strict_sandbox",
    ),
    ReasonInfo(
        Reason.WRITE_OUTSIDE_SCRATCH,
        Verdict.REJECTED,
        ("sandbox",),
        "The candidate tried to write, rename or delete files outside its own scratch and build folders. That could"
        " plant files for later candidates or alter the harness and the build cache; Landlock blocks it where "
        "available.",
        decides="strict_sandbox",
    ),
    ReasonInfo(
        Reason.DYNAMIC_CODE,
        Verdict.REJECTED,
        ("static",),
        "The candidate runs code built from text at run time (exec, eval, compile, __import__). Every static rule "
        "reads the source; code that exists only as a string at run time hides from all of them.",
    ),
    ReasonInfo(
        Reason.TIMED_OUTPUT_MISMATCH,
        Verdict.REJECTED,
        ("timing",),
        "A sample of the outputs produced inside the timed loop, on fresh inputs drawn for each round, did not "
        "match the reference. The candidate computes something else when it is timed, so its time is not the time "
        "of a correct kernel.",
    ),
    ReasonInfo(
        Reason.PROFILED_OUTPUT_MISMATCH,
        Verdict.REJECTED,
        ("work_share",),
        "The output of a call made while the profiler watched did not match the reference. The work share then "
        "describes a different computation from the one that passed the trials.",
    ),
    ReasonInfo(
        Reason.PROFILE_MISMATCH,
        Verdict.REJECTED,
        ("timing", "work_share"),
        "The candidate behaves differently when profiled: its unprofiled timed calls were far faster (under half) "
        "than the kernels the profiler saw per call (an honest kernel is timed slower than profiled, not faster), or "
        "its timed forward called its extension under half as often as profiled, or, on the CPU, an extension "
        "function's fastest timed call took under a quarter of its fastest profiled one (the extension's calls are "
        "counted and clocked whether profiled or not, so the candidate cannot tell). A comparison of times is looked "
        "at again before it rejects: the default shapes profiled once more, and on a CPU timed with several threads, "
        "profiled and timed again with one intra-op thread, where a loaded machine's barrier waits cannot inflate "
        "the profile.",
    ),
    ReasonInfo(
        Reason.BASELINE_TAMPERED,
        Verdict.REJECTED,
        ("timing",),
        "Eager and torch.compile were slower in the candidate's process than the same baselines timed in a clean "
        "process of the session, and the clean timings still agree when re-timed. Speedups are ratios over the "
        "baselines, so slowing them inflates the candidate's.",
    ),
    ReasonInfo(
        Reason.HARNESS_TAMPERED,
        Verdict.REJECTED,
        ("correctness", "timing"),
        "The harness's own functions or objects in the worker were replaced (timers, the timing loop, input "
        "drawing, checks, the protocol), or module hooks or torch function/dispatch modes were left behind. Every "
        "figure the worker reports passes through that machinery.",
    ),
    # build_error
    ReasonInfo(
        Reason.COMPILE_ERROR,
        Verdict.BUILD_ERROR,
        ("build",),
        "The compiler (g++/nvcc through load_inline or the fast-build form) failed; the message carries its first "
        "errors. Nothing ran, so there is nothing to check or time.",
    ),
    ReasonInfo(
        Reason.MALFORMED_CANDIDATE,
        Verdict.BUILD_ERROR,
        ("static", "build"),
        "The file is not a usable candidate: a syntax error or no class ModelNew (read before anything runs), or "
        "its import raised. `kernelwright eval` exits 2 for it: the file, not the kernel, needs fixing.",
    ),
    ReasonInfo(
        Reason.WRONG_BACKEND,
        Verdict.BUILD_ERROR,
        ("static",),
        "Reserved: no check gives this verdict today. A CUDA or Triton candidate sent to the CPU is refused before "
        "anything runs, as an environment error (exit 5), not as a verdict.",
    ),
    # crashed / timeout
    ReasonInfo(
        Reason.SEGFAULT,
        Verdict.CRASHED,
        ("process",),
        "The worker died of SIGSEGV or SIGBUS: host code (the extension's C++, usually) read or wrote memory it "
        "does not own.",
    ),
    ReasonInfo(
        Reason.ILLEGAL_MEMORY_ACCESS,
        Verdict.CRASHED,
        ("process",),
        "The CUDA runtime reported an illegal memory access or a misaligned address: a kernel indexed out of "
        "bounds. The CUDA context is lost, so nothing after it can be trusted.",
    ),
    ReasonInfo(
        Reason.ABORT,
        Verdict.CRASHED,
        ("process",),
        "The worker died of SIGABRT, SIGFPE or SIGILL: a failed assertion, std::terminate, an integer division by "
        "zero or an illegal instruction.",
    ),
    ReasonInfo(
        Reason.LAUNCH_FAILURE,
        Verdict.CRASHED,
        ("process",),
        "The GPU aborted a kernel ('unspecified launch failure' or 'launch timed out'): a fault in the kernel or "
        "the driver's watchdog killing a kernel that ran too long.",
    ),
    ReasonInfo(
        Reason.OUT_OF_MEMORY,
        Verdict.CRASHED,
        ("process",),
        "The candidate ran out of memory (an out-of-memory error on its stderr), or its worker was killed by "
        "SIGKILL, most likely by the out-of-memory killer. An evaluation the machine cannot hold is refused up "
        "front (exit 5), so this is usually the candidate's own use.",
    ),
    ReasonInfo(
        Reason.PROCESS_DIED,
        Verdict.CRASHED,
        ("process",),
        "The worker ended in another way: an exit status or a signal not named above (e.g. sys.exit or os._exit in "
        "the candidate). The harness cannot tell more than the status and the tail of stderr.",
    ),
    ReasonInfo(
        Reason.BUILD_TIMEOUT,
        Verdict.TIMEOUT,
        ("process",),
        "Importing and compiling the candidate took longer than the build limit (setting build_timeout_s). The "
        "worker and every compiler it started are killed.",
    ),
    ReasonInfo(
        Reason.CORRECTNESS_TIMEOUT,
        Verdict.TIMEOUT,
        ("process",),
        "A trial call (or the profiled work-share phase) exceeded its limit: max(10 s, 100x the reference's slowest"
        " trial), capped at run_timeout_s. A call that slow is a hang or a deadlock, not a kernel worth timing.",
    ),
    ReasonInfo(
        Reason.TIMING_TIMEOUT,
        Verdict.TIMEOUT,
        ("process",),
        "The timing phase exceeded twice its time cap plus ten call limits. Calls that were fast during the trials "
        "and hang while timed are a hang all the same.",
    ),
)

REASONS: dict[Reason, ReasonInfo] = {info.code: info for info in _ENTRIES}


class UnknownReason(KeyError):
    """`explain` was given a code that is not a Reason; `suggestions` are the closest valid ones."""

    def __init__(self, code: str, suggestions: list[str]) -> None:
        self.code = code
        self.suggestions = suggestions
        near = f"; did you mean {' or '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown reason {code!r}{near} (valid: {', '.join(r.value for r in Reason)})")

    def __str__(self) -> str:  # KeyError would print the repr of its argument
        return str(self.args[0])


def lookup(code: str) -> ReasonInfo:
    """The entry for `code`, spelled as the value (`torch_fallback`), the member name
    (`TORCH_FALLBACK`) or with dashes; UnknownReason with the closest codes otherwise."""
    key = code.strip().lower().replace("-", "_")
    try:
        return REASONS[Reason(key)]
    except ValueError:
        values = [r.value for r in Reason]
        raise UnknownReason(code, difflib.get_close_matches(key, values, n=3, cutoff=0.6)) from None


def explain(code: str) -> str:
    """A few lines on one reason, for `kernelwright eval --explain`."""
    info = lookup(code)
    where = "\n".join(f"  {stage}: {STAGES[stage]}" for stage in info.decided)
    rules = dict(info.policy_rules)
    policy = "\n".join(
        f"  {name}: {'applies' if name in info.policies else 'does not apply'}"
        + (f", as: {rules[name]}" if name in rules else "")
        + f" ({text})"
        for name, text in POLICIES.items()
    )
    return (
        f"{info.code.value}: {info.verdict_text}\n\n{textwrap.fill(info.why, 96)}\n\n"
        f"decided in:\n{where}\npolicies:\n{policy}\n\n"
        "All reasons: the table in docs/harness.md, section 'Rejection reasons'."
    )


def markdown_table() -> str:
    """The registry as the Markdown table in docs/harness.md, in the order of `Reason`."""
    lines = ["| reason | verdict | decided in | policy | why |", "|---|---|---|---|---|"]
    for reason in Reason:
        info = REASONS[reason]
        cells = (
            f"`{info.code.value}`",
            info.verdict_text,
            ", ".join(info.decided),
            info.policy_text,
            info.why.replace("|", "\\|"),
        )
        lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"
