"""Turning worker reports into a verdict: the rules a sceptical kernel engineer would apply.

The candidate's outputs are compared with the reference in the reference's own process
(`process/oracle.py`, reading them as data only: `outputs.py`); what comes here is the
comparison's figures and the candidate worker's reports.
"""

from __future__ import annotations

from typing import Any

from kernelwright.harness.checks.static.analysis import CandidateAnalysis
from kernelwright.harness.compiler_output import with_first_errors
from kernelwright.harness.result import EvalResult, Flag, TrialResult
from kernelwright.harness.sandbox.isolation import Isolation, SandboxMode, redact
from kernelwright.harness.timing.stats import TimingStats, speedup
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.process import Outcome
from kernelwright.problems.candidate.kernel_names import base_name

# Library ops (aten, cuBLAS, cuDNN) inside the candidate's forward may take at most this share of
# the reference's whole forward: more, and PyTorch is doing the main computation.
MAX_LIBRARY_SHARE = 0.5
# Policy engineering: the candidate's own kernels must take at least this share of one copy of the
# output per call (an epilogue over a cuBLAS GEMM's output does; a kernel run on one element
# beside PyTorch's op does not), or of the candidate's whole time, whichever is less.
ENGINEERING_MIN_OUTPUT_PASS = 0.25
ENGINEERING_MIN_OWN_SHARE = 0.05

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


def trial_result(
    report: dict[str, Any], ref: dict[str, Any], comparison: dict[str, Any] | None, device: str
) -> TrialResult:
    """One trial's result from the candidate worker's report and the reference process's
    comparison of its output (None when the report already decides the trial)."""
    trial = TrialResult(
        index=report["index"],
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
        trial.passed, trial.reason = False, Reason.OUTPUT_ALIASES_INPUT
        trial.detail = "an output shares memory with an input"
    elif report.get("output_reused"):
        trial.passed, trial.reason = False, Reason.OUTPUT_REUSED
        trial.detail = "the repeated call returned memory the first call's output still held"
    elif any(not d.startswith(device) for d in report.get("devices", [])):
        trial.passed, trial.reason = False, Reason.DEVICE_MISMATCH
        trial.detail = f"outputs on {report['devices']}, expected {device}"
    elif comparison is not None:
        trial.passed = bool(comparison.get("passed"))
        trial.reason = Reason(comparison["reason"]) if comparison.get("reason") else None
        trial.detail = str(comparison.get("detail", ""))
        trial.max_abs_error = comparison.get("max_abs_error")
        trial.max_rel_error = comparison.get("max_rel_error")
        trial.mismatch_fraction = comparison.get("mismatch_fraction")
        trial.first_mismatches = [list(i) for i in comparison.get("first_mismatches", [])]
    return trial


def needs_comparison(report: dict[str, Any], device: str) -> bool:
    return (
        report.get("status") == "ok"
        and not report.get("modified_inputs")
        and not report.get("alias")
        and not report.get("output_reused")
        and all(d.startswith(device) for d in report.get("devices", []))
    )


def judge_trials(result: EvalResult, constants: list[tuple[bool, bool]], rejections: list[tuple[str, str]]) -> None:
    """The verdict from `result.trials` (filled by the caller), the worker's rejections and how
    often the candidate's output was constant where the reference's varied."""
    errors = [t.max_abs_error for t in result.trials if t.max_abs_error is not None]
    rels = [t.max_rel_error for t in result.trials if t.max_rel_error is not None]
    result.max_abs_error = max(errors) if errors else None
    result.max_rel_error = max(rels) if rels else None
    for code, message in rejections:
        result.verdict, result.reason, result.message = Verdict.REJECTED, Reason(code), message
        return
    failures = [t for t in result.trials if not t.passed]
    if failures:
        first = failures[0]
        result.verdict, result.reason = Verdict.INCORRECT, first.reason
        result.message = f"trial {first.index} ({', '.join(first.shapes)}): {first.detail}; {len(failures)} of {len(result.trials)} trials failed"
        return
    if sum(c for c, _ in constants) >= 2 and sum(not r for _, r in constants) >= 2:
        result.verdict, result.reason = Verdict.INCORRECT, Reason.CONSTANT_OUTPUT
        result.message = (
            "the output is constant while the reference's varies: it passed only because the reference is near zero"
        )


def judge_measured_outputs(result: EvalResult, checks: list[dict[str, Any]], reason: Reason, what: str) -> bool:
    """Outputs of calls that were profiled or timed, compared with the reference on the very inputs
    those calls got: any mismatch rejects (the candidate behaves differently when measured).
    False when it rejected."""
    bad = [c for c in checks if not c.get("passed")]
    if not bad:
        return True
    result.speedups.clear()
    result.verdict, result.reason = Verdict.REJECTED, reason
    result.message = (
        f"{len(bad)} of {len(checks)} outputs of {what} did not match the reference: {bad[0].get('detail', '')}"
    )
    return False


def judge_work_share(
    result: EvalResult, shares: list[dict[str, Any]], analysis: CandidateAnalysis, policy: str = "strict"
) -> None:
    """Judge the work share on every shape profiled (the default shapes and each variant): the
    worst one decides, so a fallback keyed on shape cannot hide behind the default inputs.

    `strict`: library ops may not take half the reference's time. `engineering`: they may do
    part of the work, but on every shape the candidate's own kernels must take a quarter of one
    copy of the output, or 5% of its profiled time if that is less (a kernel run on one element
    beside a library call is not on the hot path); the library share is reported."""
    result.policy = policy
    if not shares or any("error" in s for s in shares):
        why = next((s["error"] for s in shares if "error" in s), "no data")
        result.flags.append(Flag(code="work_share_unknown", message=f"could not profile the forward pass: {why}"))
        return
    shares = [_count_not_work(share) for share in shares]
    worst = shares[0]
    for share in shares:
        library, reference = float(share.get("library_ms", 0.0)), float(share.get("reference_ms", 0.0))
        where = "" if share is shares[0] else f" (on shape variant {share['plan'].get('variant')})"
        top = ", ".join(f"{name} {ms:.2f} ms" for name, ms in share.get("top_library_ops", []))
        if analysis.backend in ("cpp", "cuda") and share.get("ext_calls", 0) == 0:
            result.verdict, result.reason = Verdict.REJECTED, Reason.KERNEL_NOT_LAUNCHED
            result.message = (
                f"forward never called the candidate's extension{where}; the work was done by {top or 'PyTorch'}"
            )
            return
        side = sorted(set(share.get("streams", [])) - set(share.get("reference_streams", [])))
        if side and share.get("reference_streams"):
            result.verdict, result.reason = Verdict.REJECTED, Reason.SIDE_STREAM
            result.message = (
                f"the candidate's kernels ran on device stream(s) {side}{where}, where the reference's run on "
                f"{sorted(share['reference_streams'])} (the current stream): work on another stream escapes the timer"
            )
            return
        disowned = share.get("disowned_kernels") or []
        if disowned and not any(f.code == "kernel_named_like_reference" for f in result.flags):
            result.flags.append(
                Flag(
                    code="kernel_named_like_reference",
                    message=f"counted as library time: the reference launches kernels of the same name ({', '.join(disowned[:3])})",
                )
            )
        if share.get("device") == "cuda" and not share.get("own_kernels") and analysis.backend in ("cuda", "triton"):
            result.verdict, result.reason = Verdict.REJECTED, Reason.KERNEL_NOT_LAUNCHED
            named = f" (named like the reference's: {', '.join(disowned[:3])})" if disowned else ""
            result.message = (
                f"none of the candidate's kernels ran on the GPU{where}{named}; the kernels that ran: {top or 'none'}"
            )
            return
        low = _reduced_precision_kernels(share, analysis)
        if low:
            result.verdict, result.reason = Verdict.REJECTED, Reason.PRECISION_DOWNGRADE
            result.message = f"the candidate's kernel ran in reduced precision in a float32 problem{where}: {low[0]}"
            return
        own = float(share.get("own_ms", 0.0))
        share_of_library = library / (own + library) if own + library > 0 else 0.0
        result.library_share = max(result.library_share or 0.0, share_of_library)
        if policy == "engineering":
            need = min(
                ENGINEERING_MIN_OUTPUT_PASS * float(share.get("output_pass_ms", 0.0)),
                ENGINEERING_MIN_OWN_SHARE * (own + library),
            )
            # On the CPU a call's fixed costs (the profiler's region, a loaded machine's wake-ups) can
            # pass for work: what the extension's functions did at their fastest counts instead.
            fastest = _own_work_at_fastest_ms(share) if share.get("device") == "cpu" else None
            own_work = min(own, fastest) if fastest is not None else own
            if own + library > 0 and own_work < need:
                result.verdict, result.reason = Verdict.REJECTED, Reason.TORCH_FALLBACK
                result.message = (
                    f"the candidate's own kernels took {own_work:.4f} ms per call{where}, less than policy engineering's "
                    f"{need:.4f} ms (a quarter of one pass over the output, or 5% of its time): they are not on the "
                    f"hot path; {top}"
                )
                return
        elif reference > 0 and library >= MAX_LIBRARY_SHARE * reference:
            result.verdict, result.reason = Verdict.REJECTED, Reason.TORCH_FALLBACK
            result.message = (
                f"PyTorch/library ops in the candidate took {library:.3f} ms, {library / reference:.0%} of the "
                f"reference's whole forward ({reference:.3f} ms){where}: the main computation is not the candidate's own: {top}"
            )
            return
        if reference > 0 and library / reference > float(worst.get("library_ms", 0.0)) / max(
            float(worst.get("reference_ms", 0.0)), 1e-12
        ):
            worst = share
    library, reference = float(worst.get("library_ms", 0.0)), float(worst.get("reference_ms", 0.0))
    result.message = (
        f"correct on {len(result.trials)} trials; library ops took {library:.3f} ms against the "
        f"reference's {reference:.3f} ms (the worst of {len(shares)} shapes profiled)"
    )
    if policy == "engineering" and result.library_share:
        result.message += f"; library share {result.library_share:.0%} (policy engineering)"


def _own_work_at_fastest_ms(share: dict[str, Any]) -> float | None:
    """Per forward, the time the extension's functions took at their fastest profiled call, times
    their calls, less the profiler's cost of the ATen ops they called inside; None without data."""
    fastest = share.get("extension_fastest_s") or {}
    calls = share.get("ext_calls_by_function") or {}
    forwards = int(share.get("forward_calls", 0))
    if not fastest or not calls or forwards <= 0:
        return None
    seconds = sum(float(fastest.get(name, 0.0)) * int(n) for name, n in calls.items()) / forwards
    overhead = PROFILER_OP_OVERHEAD_S * float(share.get("ops_inside_per_call", 0.0))
    return max(0.0, seconds - overhead) * 1e3


def _count_not_work(share: dict[str, Any]) -> dict[str, Any]:
    """Fills, copies and views do no arithmetic and are left out of the library time, unless the
    reference's forward is mostly such ops: then they are its work, and the candidate's count too
    (a `.contiguous()` is no kernel for a problem whose whole job is a copy)."""
    ref_not_work = float(share.get("reference_not_work_ms", 0.0))
    if ref_not_work <= float(share.get("reference_ms", 0.0)):
        return share
    return {
        **share,
        "library_ms": float(share.get("library_ms", 0.0)) + float(share.get("not_work_ms", 0.0)),
        "reference_ms": float(share.get("reference_ms", 0.0)) + ref_not_work,
    }


def _extension_skipped(result: EvalResult, share: dict[str, Any], timing: dict[str, Any]) -> bool:
    """The extension's calls are counted always: a candidate that called it k times per forward
    while profiled and far fewer times while timed runs something else when not watched."""
    profiled_calls, profiled_forwards = int(share.get("ext_calls", 0)), int(share.get("forward_calls", 0))
    timed_calls, timed_forwards = int(timing.get("extension_calls", 0)), int(timing.get("candidate_calls", 0))
    if profiled_calls <= 0 or profiled_forwards <= 0 or timed_forwards <= 0:
        return False
    profiled, timed = profiled_calls / profiled_forwards, timed_calls / timed_forwards
    if timed >= PROFILE_OWN_SHARE_RATIO * profiled:
        return False
    result.speedups.clear()
    result.verdict, result.reason = Verdict.REJECTED, Reason.PROFILE_MISMATCH
    result.message = (
        f"while profiled, each forward called the candidate's extension {profiled:.1f} times; while timed, "
        f"{timed:.2f} times: it runs something else when not watched"
    )
    return True


def _own_work_shrank(result: EvalResult, share: dict[str, Any], timing: dict[str, Any]) -> str | None:
    """On the CPU, the fastest call of each extension function while profiled against while timed
    (the same clock, inside the function only, so profiler overhead around it does not count;
    the fastest call is what a loaded machine cannot inflate). A function that did its work while
    the profiler watched and much less of it when timed (a slice, a stub, not called at all) runs
    something else when not watched. Returns why, or None."""
    profiled = {k: float(v) for k, v in (share.get("extension_fastest_s") or {}).items()}
    timed = {k: float(v) for k, v in (timing.get("extension_fastest_s") or {}).items()}
    # ATen ops called inside the functions are recorded by the profiler, at a cost inside their clock
    overhead = PROFILER_OP_OVERHEAD_S * float(share.get("ops_inside_per_call", 0.0))
    for name, clocked in sorted(profiled.items(), key=lambda kv: -kv[1]):
        seen = clocked - overhead
        if seen < OWN_WORK_MIN_S:
            continue  # too short to tell the work from the call's own overhead
        now = timed.get(name)
        if now is None:
            return f"its extension function {name} took {seen * 1e3:.3f} ms per call while profiled and was never called while timed"
        if now < OWN_WORK_RATIO * seen and seen - now >= OWN_WORK_MIN_S:
            return (
                f"its extension function {name} took at least {seen * 1e3:.3f} ms per call while profiled and as little as "
                f"{now * 1e3:.4f} ms while timed: it does less of its own work when not watched"
            )
    return None


# A baseline timed in the candidate's process this much slower than in the clean process, plus a
# margin, and outside both confidence intervals, disagrees with it. The margin: a launch-bound
# baseline of a few microseconds is timed differently when interleaved with a candidate than
# alone (seen on an H100: eager relu 64x1024 at 9.8 us beside an honest candidate, 4.4 us alone).
BASELINE_SLOWDOWN = 1.5
BASELINE_MARGIN_MS = 0.02


def baselines_slowed(result: EvalResult, clean: dict[str, dict[str, float]]) -> list[str]:
    """The baselines the candidate's process timed far slower than the clean process did."""
    return slowed_baselines(result.timings, clean)


def timed_stats(data: dict[str, Any]) -> dict[str, TimingStats]:
    """Each function's figures from a worker's timing report."""
    return {name: TimingStats.model_validate(fn["stats"]) for name, fn in data["result"]["fns"].items()}


def disagreeing_baselines(timings: dict[str, TimingStats], clean: dict[str, dict[str, float]]) -> list[str]:
    """Baselines timed beside the candidate far from the clean figures, slower or faster (an
    intra-op thread pool on a loaded machine makes either process's eager erratic)."""
    out = slowed_baselines(timings, clean)
    for name, figures in clean.items():
        beside = timings.get(name)
        if beside is None or name in out:
            continue
        if figures["median_ms"] > BASELINE_SLOWDOWN * beside.median_ms + BASELINE_MARGIN_MS and (
            figures["ci_low_ms"] > beside.ci_high_ms
        ):
            out.append(name)
    return out


def slowed_baselines(timings: dict[str, TimingStats], clean: dict[str, dict[str, float]]) -> list[str]:
    slowed = []
    for name, figures in clean.items():
        beside = timings.get(name)
        if beside is None or figures.get("median_ms", 0.0) <= 0:
            continue
        limit = BASELINE_SLOWDOWN * figures["median_ms"] + BASELINE_MARGIN_MS
        if beside.median_ms > limit and beside.ci_low_ms > figures["ci_high_ms"]:
            slowed.append(name)
    return slowed


def judge_baselines(
    result: EvalResult, clean: dict[str, dict[str, float]], slowed: list[str], still_slowed: list[str]
) -> None:
    """`slowed`: baselines slower beside the candidate than in the clean process; `still_slowed`:
    those still slower when both were timed again (a second look beside the candidate, then the
    clean process): only a slowdown that persists is the candidate's doing."""

    def figures(names: list[str]) -> str:
        return ", ".join(
            f"{n} {result.timings[n].median_ms:.4f} ms beside it, {clean[n]['median_ms']:.4f} ms clean" for n in names
        )

    if still_slowed:
        result.speedups.clear()
        result.verdict, result.reason = Verdict.REJECTED, Reason.BASELINE_TAMPERED
        result.message = (
            f"the baselines ran slower in the candidate's process than in a clean one, both timed twice ({figures(still_slowed)}): "
            "the candidate slowed them (a hook, a patch), which inflates its speedup"
        )
        return
    result.speedups.clear()
    note = (
        f"speedups not reported: the baselines timed beside the candidate disagree with the session's clean times "
        f"({figures(slowed)}), and not in a way timing again pinned on the candidate: the machine was busy"
    )
    result.flags.append(Flag(code="baselines_disagree", message=note))
    result.message += f"; {note}"


_HALF_SIGNATURE_WORDS = ("__half", "c10::Half", "__nv_bfloat16", "c10::BFloat16", "__nv_fp8", "half2")


def _reduced_precision_kernels(share: dict[str, Any], analysis: CandidateAnalysis) -> list[str]:
    """Own kernels that ran with half/bf16/fp8 in their signature (template arguments included),
    in a float32 problem: what runs decides, not what the source mentions."""
    if not analysis.fp32:
        return []

    def signature(name: str) -> str:  # template arguments and parameters, not the kernel's own name
        cut = [i for i in (name.find("<"), name.find("(")) if i >= 0]
        return name[min(cut) :] if cut else ""

    return [
        name
        for name in share.get("own_kernels", [])
        if base_name(name) in analysis.half_kernels or any(w in signature(name) for w in _HALF_SIGNATURE_WORDS)
    ]


# A candidate whose timed calls are this much faster than the kernels the profiler saw per call
# is doing something else when it is not watched (profiled device time excludes launch gaps and
# runs with a warm L2, so an honest kernel is timed slower than profiled, not faster).
PROFILE_MISMATCH_RATIO = 0.5
PROFILE_MISMATCH_MIN_MS = {"cuda": 0.005, "cpu": 1.0}  # below this, profiler overhead dominates


# The extension's calls per forward while timed must reach this share of those while profiled.
PROFILE_OWN_SHARE_RATIO = 0.5
# On the CPU: an extension function's fastest timed call must take at least this share of its
# fastest profiled call (honest: about 1; the profiler's overhead on ATen ops the function calls
# inside can lower it, which the absolute floor below absorbs)...
OWN_WORK_RATIO = 0.25
# ...judged only for functions whose fastest profiled call took this long, and only when the
# work missing while timed is at least this much (below it, call overhead and timer noise)...
OWN_WORK_MIN_S = 5e-6
# ...after taking off the profiler's cost of each ATen op called inside (measured 1-3 us on a
# loaded 2-core CPU; counted generously).
PROFILER_OP_OVERHEAD_S = 10e-6


def profiled_ms(share: dict[str, Any]) -> float:
    """A work-share profile's time per call on its shapes (own kernels and library ops)."""
    return float(share.get("own_ms", 0.0)) + float(share.get("library_ms", 0.0))


def profile_slower_than_timed(result: EvalResult, shares: list[dict[str, Any]]) -> bool:
    """Whether the timed median is under PROFILE_MISMATCH_RATIO of the profiled time per call on
    the default shapes: what `judge_profile_consistency` rejects unless a second profile agrees
    with the timing (the harness profiles once more before judging: a busy machine only slows a
    profile down, while a candidate that works less when not watched is slower when profiled
    every time)."""
    cand = result.timings.get("candidate")
    if cand is None or not shares or "error" in shares[0]:
        return False
    profiled = profiled_ms(shares[0])
    return (
        profiled >= PROFILE_MISMATCH_MIN_MS.get(result.device, 1.0)
        and cand.median_ms < PROFILE_MISMATCH_RATIO * profiled
    )


def judge_profile_consistency(
    result: EvalResult, shares: list[dict[str, Any]], timing: dict[str, Any] | None = None
) -> None:
    """The candidate's timed median against its profiled time per call on the default shapes;
    the extension's calls per forward, and on the CPU its functions' fastest calls, while timed
    against while profiled."""
    cand = result.timings.get("candidate")
    if cand is None or not shares or "error" in shares[0]:
        return
    if timing is not None and _extension_skipped(result, shares[0], timing):
        return
    why = _own_work_shrank(result, shares[0], timing) if result.device == "cpu" and timing is not None else None
    if why is not None:
        result.speedups.clear()
        result.verdict, result.reason, result.message = Verdict.REJECTED, Reason.PROFILE_MISMATCH, why
        return
    if not profile_slower_than_timed(result, shares):
        return
    profiled = profiled_ms(shares[0])
    result.speedups.clear()
    result.verdict, result.reason = Verdict.REJECTED, Reason.PROFILE_MISMATCH
    result.message = (
        f"timed at {cand.median_ms:.4f} ms per call, but its profiled calls took {profiled:.4f} ms each: "
        f"under {PROFILE_MISMATCH_RATIO:.0%} of what the profiler saw, so it does other work when not profiled"
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
