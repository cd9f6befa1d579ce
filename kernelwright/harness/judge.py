"""Turning worker reports into a verdict: the rules a sceptical kernel engineer would apply.

The candidate's outputs are files its worker wrote, so they are read as data only: never
unpickled with arbitrary globals (`weights_only=True`), never through a link, and checked to be
plain CPU tensors (or lists of them, or scalars) before anything compares them.
"""

from __future__ import annotations

import io
import os
import pickle
import stat
from pathlib import Path
from typing import Any

import torch

from kernelwright.harness.checks.static.analysis import CandidateAnalysis
from kernelwright.harness.compiler_output import with_first_errors
from kernelwright.harness.fuzz import compare_outputs, is_constant
from kernelwright.harness.process.isolation import Isolation, SandboxMode, redact
from kernelwright.harness.process.sandbox import Outcome
from kernelwright.harness.result import EvalResult, Flag, TrialResult
from kernelwright.harness.timing.stats import TimingStats, speedup
from kernelwright.harness.verdicts import Reason, Verdict

# Library ops (aten, cuBLAS, cuDNN) inside the candidate's forward may take at most this share of
# the reference's whole forward: more, and PyTorch is doing the main computation.
MAX_LIBRARY_SHARE = 0.5

Decision = tuple[Verdict, Reason | None, str]


def static_rejection(analysis: CandidateAnalysis) -> tuple[Reason, str] | None:
    if analysis.syntax_error:
        return Reason.MALFORMED_CANDIDATE, f"syntax error: {analysis.syntax_error}"
    if not analysis.has_modelnew:
        return Reason.MALFORMED_CANDIDATE, "the file defines no class ModelNew"
    for finding in analysis.rejections:
        return Reason(finding.code), finding.message
    return None


def static_rejection_verdict(reason: Reason) -> Verdict:
    return Verdict.BUILD_ERROR if reason == Reason.MALFORMED_CANDIDATE else Verdict.REJECTED


def build_failure(outcome: Outcome, build_output: str = "") -> Decision | None:
    """The build phase's verdict, if it ended the evaluation. A compile error's message carries
    the compiler's first error lines from `build_output` (the worker's log)."""
    if outcome.timed_out:
        return Verdict.TIMEOUT, Reason.BUILD_TIMEOUT, outcome.detail
    if outcome.died is not None:
        return Verdict.CRASHED, outcome.died, f"while building: {outcome.detail}"
    assert outcome.message is not None
    data = outcome.message.data
    if not data.get("ok"):
        reason = Reason(data.get("reason", "compile_error"))
        detail = str(data.get("detail", ""))
        if reason == Reason.COMPILE_ERROR:
            detail = with_first_errors(detail, f"{detail}\n{build_output}")
        return Verdict.BUILD_ERROR, reason, detail
    for code, message in data.get("rejections", []):
        return Verdict.REJECTED, Reason(code), message
    return None


def run_failure(outcome: Outcome, timeout_reason: Reason) -> Decision | None:
    if outcome.timed_out:
        return Verdict.TIMEOUT, timeout_reason, outcome.detail
    if outcome.died is not None:
        return Verdict.CRASHED, outcome.died, outcome.detail
    return None


MAX_OUTPUT_BYTES = 64 << 30  # the worker's RLIMIT_FSIZE: no honest output file is larger
_MAX_DEPTH = 4
_SCALARS = (int, float, bool, complex, type(None))


class UnsafeOutput(ValueError):
    """A candidate's output file that is not plain tensor data."""


def _check_output(value: Any, depth: int = 0) -> None:
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor or value.layout != torch.strided or value.device.type != "cpu":
            raise UnsafeOutput(f"not a plain CPU tensor: {type(value).__name__} {value.layout} on {value.device}")
        if value.numel() * value.element_size() > MAX_OUTPUT_BYTES:
            raise UnsafeOutput(f"tensor of {value.numel()} elements is larger than any output")
        return
    if isinstance(value, list | tuple) and depth < _MAX_DEPTH:
        for item in value:
            _check_output(item, depth + 1)
        return
    if not isinstance(value, _SCALARS):
        raise UnsafeOutput(f"unexpected {type(value).__name__} in the output")


def _load(path: Path) -> Any:
    """A candidate's saved output, as data: a regular file of its own (no link), at most
    MAX_OUTPUT_BYTES, unpickled with torch's weights-only loader (tensors, containers, numbers;
    no code), holding only plain CPU tensors, lists or tuples of them, and scalars."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise UnsafeOutput(f"{path.name} is not a regular file of the worker's own")
        if info.st_size > MAX_OUTPUT_BYTES:
            raise UnsafeOutput(f"{path.name} is {info.st_size} bytes")
        data = handle.read()
    value = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    _check_output(value)
    return value


def _load_output(path: Path) -> tuple[Any, str | None]:
    try:
        return _load(path), None
    except (OSError, UnsafeOutput, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as exc:
        return None, f"its saved output could not be read as tensor data: {type(exc).__name__}: {exc}"


def judge_correctness(
    result: EvalResult,
    reference: Outcome,
    data: dict[str, Any],
    expected_outputs: dict[int, Any],
    out_dir: Path,
    analysis: CandidateAnalysis,
) -> None:
    """Fill result.trials and set the verdict from the correctness phase's report."""
    atol, rtol = result.tolerance["atol"], result.tolerance["rtol"]
    if data.get("fatal"):
        result.verdict, result.reason, result.message = Verdict.INCORRECT, Reason.RAISED, str(data["fatal"])
        return
    assert reference.message is not None
    ref_trials = {t["index"]: t for t in reference.message.data["trials"]}
    failures: list[TrialResult] = []
    constant_candidate, varying_reference = 0, 0
    for report in data["trials"]:
        index = report["index"]
        ref = ref_trials[index]
        trial = TrialResult(
            index=index,
            seed=0,
            distribution="",
            shapes=ref.get("shapes", []),
            reused_addresses=report.get("reused", False),
        )
        if report["status"] == "raised":
            trial.passed, trial.reason, trial.detail = False, Reason.RAISED, f"forward raised {report['detail']}"
        elif report.get("modified_inputs"):
            trial.passed, trial.reason = False, Reason.INPUT_MODIFIED
            trial.detail = f"the candidate modified input(s) {report['modified_inputs']}"
        elif report.get("alias"):
            trial.passed, trial.reason, trial.detail = (
                False,
                Reason.OUTPUT_ALIASES_INPUT,
                "an output shares memory with an input",
            )
        elif any(not d.startswith(result.device) for d in report.get("devices", [])):
            trial.passed, trial.reason = False, Reason.DEVICE_MISMATCH
            trial.detail = f"outputs on {report['devices']}, expected {result.device}"
        else:
            expected = expected_outputs[index]
            got, unreadable = _load_output(out_dir / f"candidate_{index}.pt")
            if unreadable is not None:
                trial.passed, trial.reason, trial.detail = False, Reason.OUTPUT_MISMATCH, unreadable
                result.trials.append(trial)
                failures.append(trial)
                continue
            cmp = compare_outputs(expected, got, atol, rtol, ref.get("roundoff"))
            trial.passed, trial.reason, trial.detail = cmp.passed, cmp.reason, cmp.detail
            trial.max_abs_error, trial.max_rel_error, trial.mismatch_fraction = (
                cmp.max_abs_error,
                cmp.max_rel_error,
                cmp.mismatch_fraction,
            )
            trial.first_mismatches = [list(i) for i in cmp.first_mismatches]
            constant_candidate += is_constant(got)
            varying_reference += not is_constant(expected)
            repeat = out_dir / f"candidate_{index}_repeat.pt"
            if cmp.passed and repeat.exists():
                second, unreadable = _load_output(repeat)
                if unreadable is not None:
                    trial.passed, trial.reason, trial.detail = False, Reason.OUTPUT_MISMATCH, unreadable
                else:
                    again = compare_outputs(got, second, atol, rtol, ref.get("roundoff"))
                    if not again.passed:
                        trial.passed, trial.reason = False, Reason.NONDETERMINISTIC
                        trial.detail = f"two runs on the same inputs differ: {again.detail}"
        result.trials.append(trial)
        if not trial.passed:
            failures.append(trial)
    errors = [t.max_abs_error for t in result.trials if t.max_abs_error is not None]
    rels = [t.max_rel_error for t in result.trials if t.max_rel_error is not None]
    result.max_abs_error = max(errors) if errors else None
    result.max_rel_error = max(rels) if rels else None
    for code, message in data.get("rejections", []):
        result.verdict, result.reason, result.message = Verdict.REJECTED, Reason(code), message
        return
    if failures:
        first = failures[0]
        result.verdict, result.reason = Verdict.INCORRECT, first.reason
        result.message = f"trial {first.index} ({', '.join(first.shapes)}): {first.detail}; {len(failures)} of {len(result.trials)} trials failed"
        return
    if constant_candidate >= 2 and varying_reference >= 2:
        result.verdict, result.reason = Verdict.INCORRECT, Reason.CONSTANT_OUTPUT
        result.message = (
            "the output is constant while the reference's varies: it passed only because the reference is near zero"
        )
        return
    _judge_work_share(result, data.get("work_share", {}), analysis)


def _judge_work_share(result: EvalResult, share: dict[str, Any], analysis: CandidateAnalysis) -> None:
    if "error" in share or not share:
        result.flags.append(
            Flag(
                code="work_share_unknown",
                message=f"could not profile the forward pass: {share.get('error', 'no data')}",
            )
        )
        return
    top = ", ".join(f"{name} {ms:.2f} ms" for name, ms in share.get("top_library_ops", []))
    if analysis.backend in ("cpp", "cuda") and share.get("ext_calls", 0) == 0:
        result.verdict, result.reason = Verdict.REJECTED, Reason.KERNEL_NOT_LAUNCHED
        result.message = f"forward never called the candidate's extension; the work was done by {top or 'PyTorch'}"
        return
    if share.get("device") == "cuda" and not share.get("own_kernels") and analysis.backend in ("cuda", "triton"):
        result.verdict, result.reason = Verdict.REJECTED, Reason.KERNEL_NOT_LAUNCHED
        result.message = f"none of the candidate's kernels ran on the GPU; the kernels that ran: {top or 'none'}"
        return
    library, reference = float(share.get("library_ms", 0.0)), float(share.get("reference_ms", 0.0))
    if reference > 0 and library >= MAX_LIBRARY_SHARE * reference:
        result.verdict, result.reason = Verdict.REJECTED, Reason.TORCH_FALLBACK
        result.message = (
            f"PyTorch/library ops in the candidate took {library:.3f} ms, {library / reference:.0%} of the "
            f"reference's whole forward ({reference:.3f} ms): the main computation is not the candidate's own: {top}"
        )
        return
    result.message = (
        f"correct on {len(result.trials)} trials; library ops took {library:.3f} ms against the "
        f"reference's {reference:.3f} ms"
    )


def judge_timing(result: EvalResult, data: dict[str, Any], device: str) -> None:
    for code, message in data.get("rejections", []):
        result.verdict, result.reason, result.message = Verdict.REJECTED, Reason(code), message
        return
    if data.get("patched_timers"):
        result.verdict, result.reason = Verdict.REJECTED, Reason.PATCHED_TIMER
        result.message = f"timing functions were replaced: {', '.join(data['patched_timers'])}"
        return
    timed = data["result"]["fns"]
    for name, fn in timed.items():
        result.timings[name] = TimingStats.model_validate(fn["stats"])
        if fn.get("wall_median_ms") is not None:
            result.wall_median_ms[name] = float(fn["wall_median_ms"])
        if not fn.get("converged", True):
            result.flags.append(
                Flag(
                    code="not_converged",
                    message=f"{name}: timing stopped at its cap before the median's CI reached the target",
                )
            )
    result.compile_time_s = data.get("compile_time_s")
    cand = result.timings["candidate"]
    for name, stats in result.timings.items():
        if name != "candidate":
            result.speedups[name] = speedup(name, stats, cand)
    hidden = timed["candidate"].get("hidden_work")
    busy = [name for name, fn in timed.items() if name != "candidate" and fn.get("hidden_work")]
    if hidden and busy:
        # The baselines' synchronised calls were slowed too, and PyTorch's ops leave no hidden work: the
        # device was shared (another process), or the candidate keeps it busy between calls. Either way
        # no number from this run is trusted; the verdict from the correctness phase stands.
        result.speedups.clear()
        note = (
            f"timing not trusted: the synchronised wall times of the candidate and of {', '.join(busy)} "
            "were all far above their event times (another process on the GPU, or work left running "
            "between calls); rerun on an idle GPU"
        )
        result.flags.append(Flag(code="device_contended", message=note))
        result.message += f"; {note}"
        return
    for name in busy:  # a baseline alone: its event median is too low, so that speedup is understated
        result.flags.append(Flag(code="baseline_wall_mismatch", message=f"{name}: {timed[name]['hidden_work']}"))
    if hidden:  # the baselines timed beside it are then not trustworthy either: no speedup is reported
        result.speedups.clear()
        result.verdict, result.reason, result.message = Verdict.REJECTED, Reason.SIDE_STREAM, hidden
        return
    parts = [f"{name} {s.ratio:.2f}x [{s.ci_low:.2f}, {s.ci_high:.2f}]" for name, s in result.speedups.items()]
    result.message += f"; speedup vs {', '.join(parts)}" if parts else ""


_ATTEMPT_WORDS = {
    Reason.NETWORK_ACCESS: ("tried to reach the network", "network"),
    Reason.WRITE_OUTSIDE_SCRATCH: ("tried to write outside its scratch", "filesystem"),
}


def judge_sandbox(
    result: EvalResult, isolation: Isolation | None, attempts: list[dict[str, str]], mode: SandboxMode
) -> None:
    """Record the isolation the candidate ran under and what it attempted against it: a flag in
    best-effort mode, a rejection in strict mode. Then redact every known secret from the result."""
    result.isolation = isolation or Isolation(mode=mode, notes=["the worker never reported its isolation"])
    rejected: tuple[Reason, str] | None = None
    for reason, (what, layer) in _ATTEMPT_WORDS.items():
        targets = [a.get("target", "") for a in attempts if a.get("kind") == reason.value]
        if not targets:
            continue
        enforced = getattr(result.isolation, layer) not in ("none", "unknown")
        how = "blocked by the sandbox" if enforced else f"NOT blocked: no {layer} isolation on this machine"
        message = f"the candidate {what} ({', '.join(targets)[:400]}); {how}"
        result.flags.append(Flag(code=reason.value, message=message, severity="reject" if mode == "strict" else "flag"))
        rejected = rejected or (reason, message)
    if mode == "strict" and rejected is not None:
        result.verdict, result.reason, result.message = Verdict.REJECTED, *rejected
    clean = EvalResult.model_validate_json(redact(result.model_dump_json()))
    for name in EvalResult.model_fields:
        setattr(result, name, getattr(clean, name))
