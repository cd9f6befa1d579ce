"""Turning worker reports into a verdict: the rules a sceptical kernel engineer would apply.

Every rule is a pure function: typed reports (`workers/messages.py`) and the candidate's static
analysis in, a `Decision` out (or None: nothing to decide); the phases (`harness/phases/`) apply
decisions to the result. `correctness.py`: before and during the trials; `work_share.py`: whose
kernels did the work, and whether the profiled calls are the timed ones; `timing.py`: speedups
and the baselines' cross-check; `one_thread.py`: the CPU's one-thread look before a timed-vs-
profiled rejection on times.
"""

from kernelwright.harness.judge.correctness import (
    build_failure,
    forged_channel,
    judge_measured_outputs,
    judge_sandbox,
    judge_trials,
    needs_comparison,
    raised,
    run_failure,
    static_rejection,
    static_rejection_verdict,
    trial_result,
    unreadable_report,
)
from kernelwright.harness.judge.decision import Decision, PhaseEnd, ending
from kernelwright.harness.judge.timing import (
    agree_at_one_thread,
    disagreeing_baselines,
    judge_baselines,
    judge_timing,
    short_calls,
    slowed_baselines,
    stalled_baselines,
)
from kernelwright.harness.judge.work_share import (
    fallback_within_noise,
    faster_profile,
    judge_profile_consistency,
    judge_work_share,
    profile_disagrees_with_timing,
    profile_slower_than_timed,
    profiled_ms,
    with_second_profile,
)

__all__ = [
    "Decision",
    "PhaseEnd",
    "agree_at_one_thread",
    "build_failure",
    "disagreeing_baselines",
    "ending",
    "fallback_within_noise",
    "faster_profile",
    "forged_channel",
    "judge_baselines",
    "judge_measured_outputs",
    "judge_profile_consistency",
    "judge_sandbox",
    "judge_timing",
    "judge_trials",
    "judge_work_share",
    "needs_comparison",
    "profile_disagrees_with_timing",
    "profile_slower_than_timed",
    "profiled_ms",
    "raised",
    "run_failure",
    "short_calls",
    "slowed_baselines",
    "stalled_baselines",
    "static_rejection",
    "static_rejection_verdict",
    "trial_result",
    "unreadable_report",
    "with_second_profile",
]
