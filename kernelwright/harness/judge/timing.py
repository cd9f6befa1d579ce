"""The timing rules: the timing report turned into figures and speedups (or a rejection: patched
timers, work hidden from the timer; or no figures at all when the timing itself says the machine
could not tell: `device_contended`), and the baselines timed beside the candidate checked
against the same baselines timed in the reference's process, which never ran candidate code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kernelwright.harness.judge.decision import Decision, ending
from kernelwright.harness.result import Flag
from kernelwright.harness.timing.stats import (
    HOST_BOUND_MS,
    MIN_SAMPLES_FOR_CI,
    TRUSTED_SPREAD,
    Speedup,
    TimingStats,
    interval_spread,
    speedup,
)
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.messages import CleanFigures, TimedFunction, TimingReport

# A baseline timed in the candidate's process this much slower than in the clean process, plus a
# margin, and outside both confidence intervals, disagrees with it. The margin: a launch-bound
# baseline of a few microseconds is timed differently when interleaved with a candidate than
# alone (seen on an H100: eager relu 64x1024 at 9.8 us beside an honest candidate, 4.4 us alone).
BASELINE_SLOWDOWN = 1.5
BASELINE_MARGIN_MS = 0.02

# A baseline's median with the configured intra-op threads this many times its median with one
# thread (and this much longer) says the intra-op pool waited for its threads to be scheduled: an
# oversubscribed CPU (`pool_stalled`). Measured on this 2-core machine, 2026-11-26, eager and
# torch.compile of the 9 CPU problems at the small size, each timed as the clean process times
# them (interleaved with a stand-in for the candidate, `time_baselines`) then at one thread:
# - idle, back to back: 2 threads against 1 read 0.54x-1.55x;
# - interleaved, other sessions' builds and tests beside (load average 1.5-2.5) and no stall:
#   1.2x-7.1x (a sleeping pool thread woken per parallel region: layer_norm eager 0.110 vs 0.016
#   ms, mse_loss 0.281 vs 0.074 ms, sum_reduction compile 0.444 vs 0.063 ms); one honest
#   evaluation read mse_loss eager 0.206 vs 0.064 ms (3.2x) with load average ~0.3;
# - stalled (the same load, and 2 busy loops beside): 64x-2578x (eager relu 5.7-56 ms vs 0.02 ms,
#   gemm_bias_relu 7.9 vs 0.056 ms, mse_loss 47.5 vs 0.065 ms); the eager relu 22-42 ms vs
#   0.011 ms; its wrong 84x-235x figures vs eager need eager ~40x its one-thread time or more.
# 10x sits between: above every honest wake-up seen, under every stall.
POOL_STALL_FACTOR = 10.0
POOL_STALL_MARGIN_MS = 0.05

SHORT_CALL_MS = 0.010
"""A candidate call this short is mostly launch and call overhead: at such sizes the speedup says how
thin each side's wrapper is (torch.compile's alone costs tens of microseconds a call on a GPU), not
how fast the kernel is, and it does not carry to real sizes (relu on an H100: 2.43x vs compile at
the small size, 1.00x at the default size). Reported with a flag, never hidden or changed."""

Clean = Mapping[str, CleanFigures]  # the baselines' figures from the reference's process


def short_calls(timings: Mapping[str, TimingStats]) -> Flag | None:
    """The `short_calls` warning when the candidate's median call is under `SHORT_CALL_MS`."""
    cand = timings.get("candidate")
    if cand is None or cand.median_ms >= SHORT_CALL_MS:
        return None
    return Flag(
        code="short_calls",
        message=f"the candidate's call takes {cand.median_ms * 1000:.1f} µs: at this size launch and call overheads, "
        "not the kernel, decide the speedup, and it does not carry to larger inputs (judge at the default size)",
    )


def untrusted_timing(timed: Mapping[str, TimedFunction], speedups: Mapping[str, Speedup]) -> str | None:
    """Why no figure of this timing is trusted, or None. Two ways the timing itself says the
    machine could not tell: it stopped at its cap before some function had the calls a 95% interval
    of its median needs (`MIN_SAMPLES_FOR_CI`; a run that stops at its cap with more calls is only
    flagged `not_converged`: honest CPU runs mostly do, and their intervals are still honest), or a
    speedup's interval spans more than `TRUSTED_SPREAD` (the figure would be noise with a decimal
    point: 100x [2.79, 697] was seen for an honest relu on a loaded CPU). Never a rejection: the
    correctness verdict stands and no speedup is reported, so a kernel gains nothing by it."""
    few = [f"{name} {fn.stats.n}" for name, fn in timed.items() if not fn.converged and fn.stats.n < MIN_SAMPLES_FOR_CI]
    if few:
        return (
            f"timing not trusted: it stopped at its time cap with too few timed calls for a 95% interval "
            f"({', '.join(few)}; at least {MIN_SAMPLES_FOR_CI} each); rerun on an idle machine"
        )
    wide = [(name, s) for name, s in speedups.items() if interval_spread(s) > TRUSTED_SPREAD]
    if not wide:
        return None
    parts = ", ".join(
        f"{name} {s.ratio:.2f}x [{s.ci_low:.2f}, {s.ci_high:.2f}], a {interval_spread(s):.0f}-fold range"
        for name, s in wide
    )
    stopped = [name for name, fn in timed.items() if not fn.converged]
    why = f"; {', '.join(stopped)} did not converge (stopped at the cap)" if stopped else ""
    return (
        f"timing not trusted: the speedup's 95% interval is wider than {TRUSTED_SPREAD:g}-fold ({parts}){why}: "
        "the timing could not tell a 2x speedup from none (a busy machine); rerun on an idle machine"
    )


def pool_stalled(configured_ms: float, one_thread_ms: float) -> bool:
    """Whether a baseline's median with the configured threads is so far above its median with one
    thread that its calls waited for the intra-op pool's threads (`POOL_STALL_FACTOR`)."""
    return configured_ms > POOL_STALL_FACTOR * one_thread_ms and configured_ms - one_thread_ms > POOL_STALL_MARGIN_MS


def stalled_baselines(
    timed: Mapping[str, TimedFunction], one_thread: Mapping[str, TimingStats], threads: int = 0
) -> str | None:
    """Why no figure of this timing is trusted, or None: on the CPU, a baseline timed far slower
    with the configured intra-op threads than with one thread right after, in the same process.
    The pool's other threads waited to be scheduled on an oversubscribed CPU, and a process stays
    in that mode across a whole timing (honest candidates read 84x-235x vs eager that way, with
    narrow intervals, reproduced in a fresh process: both processes' eager stalled). Never a
    rejection: the correctness verdict stands and no speedup is reported. A candidate that slowed
    its baselines only with several threads gains nothing by it; one that slows them at one thread
    too reads no stall here and meets the baselines' cross-check."""
    stalled = [
        (name, timed[name].stats.median_ms, one.median_ms)
        for name, one in one_thread.items()
        if name in timed and name != "candidate" and pool_stalled(timed[name].stats.median_ms, one.median_ms)
    ]
    if not stalled:
        return None
    with_threads = f"{threads} threads" if threads > 1 else "the configured threads"
    parts = ", ".join(
        f"{name} {many:.4f} ms a call with {with_threads}, {one:.4f} ms with one" for name, many, one in stalled
    )
    return (
        f"timing not trusted: the baselines ran far slower with several intra-op threads than with one, timed right "
        f"after in the same process ({parts}; more than {POOL_STALL_FACTOR:g}x): the thread pool waited for its threads "
        "to be scheduled, so the CPU is oversubscribed and the speedups would be the pool's waits, not the kernel's; "
        "rerun on an idle machine (or with one intra-op thread, `batch --threads 1`)"
    )


def judge_timing(report: TimingReport) -> Decision:
    """The timings, speedups and flags of a timing run, or its rejection."""
    for code, message in report.rejections:
        return ending(Verdict.REJECTED, Reason(code), message)
    if report.patched_timers:
        message = f"timing functions were replaced: {', '.join(report.patched_timers)}"
        return ending(Verdict.REJECTED, Reason.PATCHED_TIMER, message)
    timed = report.result.fns
    timings: dict[str, TimingStats] = {}
    walls: dict[str, float] = {}
    flags: list[Flag] = []
    for name, fn in timed.items():
        timings[name] = fn.stats
        if fn.wall_median_ms is not None:
            walls[name] = fn.wall_median_ms
        if not fn.converged:
            flags.append(
                Flag(
                    code="not_converged",
                    message=f"{name}: timing stopped at its cap before the median's CI reached the target",
                )
            )
    cand = timings["candidate"]
    short = short_calls(timings)
    if short is not None:
        flags.append(short)
    speedups: dict[str, Speedup] = {name: speedup(name, s, cand) for name, s in timings.items() if name != "candidate"}
    updates: dict[str, object] = {"timings": timings, "wall_median_ms": walls, "compile_time_s": report.compile_time_s}
    hidden = timed["candidate"].hidden_work
    busy = [name for name, fn in timed.items() if name != "candidate" and fn.hidden_work]
    if hidden and busy:
        # The baselines' synchronised calls were slowed too, and PyTorch's ops leave no hidden work: the
        # device was shared (another process), or the candidate keeps it busy between calls. Either way
        # no number from this run is trusted; the verdict from the correctness phase stands.
        note = (
            f"timing not trusted: the synchronised wall times of the candidate and of {', '.join(busy)} "
            "were all far above their event times (another process on the GPU, or work left running "
            "between calls); rerun on an idle GPU"
        )
        flags.append(Flag(code="device_contended", message=note))
        return Decision(note=f"; {note}", flags=tuple(flags), updates={**updates, "speedups": {}})
    for name in busy:  # a baseline alone: its event median is too low, so that speedup is understated
        flags.append(Flag(code="baseline_wall_mismatch", message=f"{name}: {timed[name].hidden_work}"))
    if hidden:  # the baselines timed beside it are then not trustworthy either: no speedup is reported
        updates["speedups"] = {}
        return Decision(Verdict.REJECTED, Reason.SIDE_STREAM, hidden, flags=tuple(flags), updates=updates)
    # After every rejection above: a kernel cannot trade one for "not trusted" by making its timing noisy.
    untrusted = stalled_baselines(timed, report.one_thread, report.threads) or untrusted_timing(timed, speedups)
    if untrusted is not None:  # the verdict from the correctness phase stands; no figure is reported
        flags.append(Flag(code="device_contended", message=untrusted))
        return Decision(note=f"; {untrusted}", flags=tuple(flags), updates={**updates, "speedups": {}})
    parts = [f"{name} {s.ratio:.2f}x [{s.ci_low:.2f}, {s.ci_high:.2f}]" for name, s in speedups.items()]
    note = f"; speedup vs {', '.join(parts)}" if parts else ""
    floored = [name for name, s in speedups.items() if s.floor_factor > 1.0]
    if floored:
        factor = max(speedups[name].floor_factor for name in floored)
        note += (
            f" (intervals at least x/÷{factor:g}: calls under {HOST_BOUND_MS:g} ms are decided by per-call "
            "overheads that differ between processes)"
        )
    return Decision(note=note, flags=tuple(flags), updates={**updates, "speedups": speedups})


def disagreeing_baselines(timings: Mapping[str, TimingStats], clean: Clean) -> list[str]:
    """Baselines timed beside the candidate far from the clean figures, slower or faster (an
    intra-op thread pool on a loaded machine makes either process's eager erratic)."""
    out = slowed_baselines(timings, clean)
    for name, figures in clean.items():
        beside = timings.get(name)
        if beside is None or name in out:
            continue
        if figures.median_ms > BASELINE_SLOWDOWN * beside.median_ms + BASELINE_MARGIN_MS and (
            figures.ci_low_ms > beside.ci_high_ms
        ):
            out.append(name)
    return out


def slowed_baselines(timings: Mapping[str, TimingStats], clean: Clean) -> list[str]:
    """The baselines timed beside the candidate far slower than the clean process timed them."""
    slowed = []
    for name, figures in clean.items():
        beside = timings.get(name)
        if beside is None or figures.median_ms <= 0:
            continue
        limit = BASELINE_SLOWDOWN * figures.median_ms + BASELINE_MARGIN_MS
        if beside.median_ms > limit and beside.ci_low_ms > figures.ci_high_ms:
            slowed.append(name)
    return slowed


def agree_at_one_thread(
    names: Sequence[str], looks: Sequence[Mapping[str, TimingStats]], clean: Clean
) -> dict[str, str]:
    """Of `names` (baselines slower beside the candidate than in the clean process in every look
    with the configured threads), those that agree with the clean process at one intra-op thread
    in some look, each with its one-thread figures as text (`looks`: the candidate's process's
    one-thread figures, one mapping per timing; the clean side's are `clean[name].one_thread`).

    On an oversubscribed CPU a process's intra-op pool can stall every parallel call for seconds
    (the issue's relu: eager 16 ms beside an honest candidate in every look, 0.054 ms in the clean
    process); one thread has no pool to wait for. A candidate that slows its baselines (a hook, a
    patch) slows them whatever the thread count: slower at one thread too, in every look, it is
    not here. Each baseline answers for itself: another baseline that agrees (slowed by the load,
    not by the candidate) explains nothing about this one (an aten::relu override sleeping 20 ms
    must stay `baseline_tampered` when torch.compile happens to read slow beside it). A baseline
    without one-thread figures on either side (one thread configured, the GPU, a call over
    `timing.run.ONE_THREAD_MAX_MS`) is not here either: its configured threads' figures decide.
    What this buys a candidate that slows its baselines only while torch has several threads: no
    rejection, and no speedup reported either (`judge_baselines`)."""
    agreeing: dict[str, str] = {}
    for name in names:
        figures = clean.get(name)
        alone = figures.one_thread if figures is not None else None
        if alone is None:
            continue
        for look in looks:
            beside = look.get(name)
            if beside is not None and not slowed_baselines({name: beside}, {name: alone}):
                agreeing[name] = f"{name} {beside.median_ms:.4f} ms beside it, {alone.median_ms:.4f} ms clean"
                break
    return agreeing


def judge_baselines(
    timings: Mapping[str, TimingStats],
    clean: Clean,
    slowed: Sequence[str],
    still_slowed: Sequence[str],
    one_thread_agrees: Mapping[str, str] | None = None,
    one_thread_looks: Sequence[Mapping[str, TimingStats]] = (),
) -> Decision:
    """`slowed`: baselines slower beside the candidate than in the clean process; `still_slowed`:
    those still slower when both were timed again (a second look beside the candidate, then the
    clean process): only a slowdown that persists is the candidate's doing, and (on the CPU) only
    one that persists at one intra-op thread: `one_thread_agrees` (`agree_at_one_thread`) names
    those of `still_slowed` that agree at one thread, with their figures: the pool's waits, no
    rejection, no speedup reported; `one_thread_looks` (the candidate's process's one-thread
    figures, one mapping per timing) are named in a rejection's message as its evidence."""
    agrees = dict(one_thread_agrees or {})
    tampered = [name for name in still_slowed if name not in agrees]

    def figures(names: Sequence[str]) -> str:
        return ", ".join(
            f"{n} {timings[n].median_ms:.4f} ms beside it, {clean[n].median_ms:.4f} ms clean" for n in names
        )

    if tampered:
        message = (
            f"the baselines ran slower in the candidate's process than in a clean one, both timed twice "
            f"({figures(tampered)}): the candidate slowed them (a hook, a patch), which inflates its speedup"
        )
        message += f"; fastest calls: {fastest_text(tampered, timings, clean)}"
        if one_thread_looks:
            message += f"; with one intra-op thread too ({one_thread_text(tampered, one_thread_looks, clean)})"
        return ending(Verdict.REJECTED, Reason.BASELINE_TAMPERED, message, clear_speedups=True)
    if agrees:
        names = [name for name in still_slowed if name in agrees]
        note = (
            f"speedups not reported: the baselines ran slower beside the candidate than in the clean process in every "
            f"look ({figures(names)}), but timed with one intra-op thread they agreed ({', '.join(agrees.values())}): "
            "the thread pool waited for its threads on an oversubscribed CPU, in the candidate's process and not in "
            "the clean one; that is no tampering, and the speedups would be the pool's waits"
        )
    else:
        note = (
            f"speedups not reported: the baselines timed beside the candidate disagree with the session's clean times "
            f"({figures(slowed)}), and not in a way timing again pinned on the candidate: the machine was busy"
        )
    return Decision(note=f"; {note}", flags=(Flag(code="baselines_disagree", message=note),), clear_speedups=True)


def one_thread_text(names: Sequence[str], looks: Sequence[Mapping[str, TimingStats]], clean: Clean) -> str:
    """The one-thread figures of `names` in every look beside the candidate and in the clean
    process, as text ("-" where a look has none)."""
    parts = []
    for name in names:
        beside = ", ".join(f"{look[name].median_ms:.4f}" if name in look else "-" for look in looks)
        alone = clean[name].one_thread if name in clean else None
        parts.append(f"{name} {beside} ms beside it, {f'{alone.median_ms:.4f} ms' if alone else 'none'} clean")
    return "; ".join(parts)


def fastest_text(names: Sequence[str], timings: Mapping[str, TimingStats], clean: Clean) -> str:
    """The fastest call of each of `names` beside the candidate and in the clean process, as text."""
    parts = []
    for name in names:
        alone = clean[name].min_ms if name in clean else None
        beside = f"{timings[name].min_ms:.4f} ms" if name in timings else "-"
        parts.append(f"{name} {beside} beside it, {f'{alone:.4f} ms' if alone is not None else '-'} clean")
    return ", ".join(parts)
