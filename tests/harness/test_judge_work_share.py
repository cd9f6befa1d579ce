"""The work-share verdict on recorded profiler figures: the policies, kernels named like the
reference's, and reduced precision judged on the kernels that ran. The rules are pure (typed
reports in, a decision out); these tests apply each decision as the phases do."""

from __future__ import annotations

from typing import Any

import pytest

from kernelwright.harness import judge
from kernelwright.harness.checks.static.analysis import analyze_candidate
from kernelwright.harness.phases.context import apply
from kernelwright.harness.result import EvalResult
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.messages import CleanFigures, Share, TimedRun, TimingReport
from tests.harness.test_static_analysis import CPP_OMP, CUDA_SRC, cuda_candidate

OWN = "relu_kernel(float const*, float*, int)"
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32"


PLAN = {"index": 0, "seed": 1, "distribution": "normal", "variant": None}


def _share(own_ms: float, library_ms: float, reference_ms: float, **extra: Any) -> dict[str, Any]:
    return {
        "plan": PLAN,
        "own_ms": own_ms,
        "library_ms": library_ms,
        "reference_ms": reference_ms,
        "own_kernels": [OWN] if own_ms else [],
        "top_library_ops": [(GEMM, library_ms)] if library_ms else [],
        "ext_calls": 4,
        "device": "cuda",
        "output_pass_ms": 0.05,
        **extra,
    }


def _judge(shares: list[dict[str, Any]], policy: str = "strict", source: str | None = None) -> EvalResult:
    result = EvalResult(problem="p", candidate="c.py", verdict=Verdict.CORRECT, device="cuda")
    typed = [Share.model_validate(s) for s in shares]
    return apply(result, judge.judge_work_share(typed, analyze_candidate(source or cuda_candidate()), policy, 0))


def test_strict_rejects_a_library_gemm_with_an_own_epilogue() -> None:
    result = _judge([_share(own_ms=0.15, library_ms=0.85, reference_ms=1.0)])
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.TORCH_FALLBACK)
    assert result.library_share == pytest.approx(0.85)


def test_engineering_accepts_it_and_reports_the_library_share() -> None:
    result = _judge([_share(own_ms=0.15, library_ms=0.85, reference_ms=1.0)], policy="engineering")
    assert result.verdict == Verdict.CORRECT and result.policy == "engineering"
    assert result.library_share == pytest.approx(0.85)
    assert "library share 85%" in result.message


@pytest.mark.parametrize("variant_own", [0.001, 0.0])
def test_engineering_still_needs_own_kernels_on_the_hot_path_of_every_shape(variant_own: float) -> None:
    shares = [
        _share(own_ms=0.3, library_ms=0.7, reference_ms=1.0),
        {**_share(own_ms=variant_own, library_ms=0.7, reference_ms=0.7), "plan": {**PLAN, "variant": 0}},
    ]
    result = _judge(shares, policy="engineering")
    assert result.verdict == Verdict.REJECTED
    assert result.reason in (Reason.TORCH_FALLBACK, Reason.KERNEL_NOT_LAUNCHED)
    assert "variant 0" in result.message


def test_own_kernel_named_like_the_references_counts_as_library() -> None:
    share = _share(own_ms=0.0, library_ms=1.0, reference_ms=1.0, disowned_kernels=["kernel"])
    result = _judge([share], policy="engineering")
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.KERNEL_NOT_LAUNCHED)
    assert "named like the reference's" in result.message


def test_a_half_kernel_that_runs_in_a_float32_problem_is_a_downgrade() -> None:
    half_kernel = "__global__ void relu_half(const __half* x, __half* y, int n) { }\n"
    source = cuda_candidate(
        cuda_src=CUDA_SRC.replace("torch::Tensor relu_cuda", half_kernel + "torch::Tensor relu_cuda")
    )
    ran = {
        **_share(own_ms=1.0, library_ms=0.0, reference_ms=1.0),
        "own_kernels": ["relu_half(__half const*, __half*, int)"],
    }
    result = _judge([ran], source=source)
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.PRECISION_DOWNGRADE)
    not_ran = _share(own_ms=1.0, library_ms=0.0, reference_ms=1.0)
    assert _judge([not_ran], source=source).verdict == Verdict.CORRECT


def test_a_template_instantiated_on_half_is_a_downgrade() -> None:
    share = {
        **_share(own_ms=1.0, library_ms=0.0, reference_ms=1.0),
        "own_kernels": ["void k<c10::Half>(c10::Half const*)"],
    }
    assert _judge([share]).reason == Reason.PRECISION_DOWNGRADE


def test_fills_and_copies_are_no_library_work_unless_the_reference_only_copies() -> None:
    """torch::zeros for the output is allocation, not PyTorch doing the work; but for a problem
    whose reference is a copy, a candidate's `.contiguous()` is the whole job done by PyTorch."""
    zeros_then_own = {**_share(own_ms=1.0, library_ms=0.0, reference_ms=1.0), "not_work_ms": 0.8}
    assert _judge([zeros_then_own]).verdict == Verdict.CORRECT
    copy_problem = {
        **_share(own_ms=0.01, library_ms=0.0, reference_ms=0.0),
        "not_work_ms": 1.0,
        "reference_not_work_ms": 1.0,
    }
    assert _judge([copy_problem]).reason == Reason.TORCH_FALLBACK


def test_kernels_on_a_stream_the_reference_does_not_use_are_a_side_stream() -> None:
    """The profiler sees every stream: work hidden from the timer's events is found by stream."""
    share = {**_share(own_ms=0.02, library_ms=0.0, reference_ms=0.02), "streams": [7, 13], "reference_streams": [7]}
    result = _judge([share], policy="engineering")
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.SIDE_STREAM)
    assert "[13]" in result.message
    same = {**share, "streams": [7]}
    assert _judge([same]).verdict == Verdict.CORRECT


def _timed(median_ms: float) -> dict[str, Any]:
    return {
        "n": 50, "median_ms": median_ms, "mean_ms": median_ms, "min_ms": median_ms, "max_ms": median_ms,
        "q25_ms": median_ms, "q75_ms": median_ms, "iqr_ms": 0.0, "ci_low_ms": median_ms * 0.98,
        "ci_high_ms": median_ms * 1.02, "rel_ci_halfwidth": 0.02, "samples_ms": [median_ms],
    }  # fmt: skip


def _timing(**figures: Any) -> TimingReport:
    return TimingReport(result=TimedRun(fns={}), **figures)


def _consistency(result: EvalResult, share: dict[str, Any], timing: TimingReport) -> EvalResult:
    decision = judge.judge_profile_consistency(result.timings, result.device, [Share.model_validate(share)], timing)
    return apply(result, decision)


def test_baselines_slower_beside_the_candidate_than_in_a_clean_process() -> None:
    from kernelwright.harness.timing.stats import TimingStats

    def result_with(eager_ms: float) -> EvalResult:
        result = EvalResult(problem="p", candidate="c.py", verdict=Verdict.CORRECT, device="cpu")
        result.timings["eager"] = TimingStats.model_validate(_timed(eager_ms))
        return result

    clean = {"eager": CleanFigures(median_ms=1.0, ci_low_ms=0.98, ci_high_ms=1.02)}
    assert judge.slowed_baselines(result_with(1.2).timings, clean) == []
    slowed = result_with(3.0)
    assert judge.slowed_baselines(slowed.timings, clean) == ["eager"]
    # still fast when re-timed: tampering
    apply(slowed, judge.judge_baselines(slowed.timings, clean, ["eager"], ["eager"]))
    assert (slowed.verdict, slowed.reason) == (Verdict.REJECTED, Reason.BASELINE_TAMPERED)
    busy = result_with(3.0)
    apply(busy, judge.judge_baselines(busy.timings, clean, ["eager"], []))  # slow in the clean process too
    assert busy.verdict == Verdict.CORRECT and not busy.speedups
    assert any(f.code == "baselines_disagree" for f in busy.flags)
    launch_bound = {"eager": CleanFigures(median_ms=0.0044, ci_low_ms=0.0043, ci_high_ms=0.0045)}
    assert judge.slowed_baselines(result_with(0.0098).timings, launch_bound) == []  # within the margin


def test_an_extension_called_while_profiled_but_not_while_timed_is_a_profile_mismatch() -> None:
    from kernelwright.harness.timing.stats import TimingStats

    result = EvalResult(problem="p", candidate="c.py", verdict=Verdict.CORRECT, device="cuda")
    result.timings["candidate"] = TimingStats.model_validate(_timed(0.003))
    share = {**_share(own_ms=0.003, library_ms=0.0, reference_ms=0.003), "ext_calls": 40, "forward_calls": 40}
    _consistency(result, share, _timing(extension_calls=0, candidate_calls=500))
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.PROFILE_MISMATCH)
    honest = EvalResult(problem="p", candidate="c.py", verdict=Verdict.CORRECT, device="cuda")
    honest.timings["candidate"] = TimingStats.model_validate(_timed(0.003))
    _consistency(honest, share, _timing(extension_calls=500, candidate_calls=500))
    assert honest.verdict == Verdict.CORRECT


def test_an_extension_doing_less_work_while_timed_is_a_profile_mismatch_on_the_cpu() -> None:
    """The fastest call of each extension function, profiled against timed: a function that did
    its work while profiled and ran on a slice while timed is caught; honest figures (timed a bit
    faster, profiler overhead on ATen ops inside) and microsecond functions are not."""
    from kernelwright.harness.timing.stats import TimingStats

    def judged(profiled: dict[str, float], timed: dict[str, float], ops_inside: float = 0.0) -> EvalResult:
        result = EvalResult(problem="p", candidate="c.py", verdict=Verdict.CORRECT, device="cpu")
        result.timings["candidate"] = TimingStats.model_validate(_timed(0.02))
        share = {
            **_share(own_ms=0.02, library_ms=0.0, reference_ms=0.02),
            "ext_calls": 40,
            "forward_calls": 40,
            "extension_fastest_s": profiled,
            "ops_inside_per_call": ops_inside,
        }
        return _consistency(result, share, _timing(extension_calls=70, candidate_calls=70, extension_fastest_s=timed))

    cheat = judged({"k.relu": 64e-6}, {"k.relu": 2.2e-6})
    assert (cheat.verdict, cheat.reason) == (Verdict.REJECTED, Reason.PROFILE_MISMATCH)
    assert "k.relu" in cheat.message and not cheat.speedups
    gone = judged({"k.relu": 64e-6, "k.other": 30e-6}, {"k.relu": 60e-6})
    assert gone.reason == Reason.PROFILE_MISMATCH and "never called while timed" in gone.message
    assert judged({"k.relu": 27e-6}, {"k.relu": 11.7e-6}).verdict == Verdict.CORRECT  # measured, honest
    assert judged({"k.relu": 330e-6}, {"k.relu": 65e-6}, ops_inside=30).verdict == Verdict.CORRECT  # profiler cost
    assert judged({"k.relu": 4e-6}, {"k.relu": 0.5e-6}).verdict == Verdict.CORRECT  # too short to judge


def test_engineering_on_the_cpu_counts_the_fastest_calls_not_their_fixed_costs() -> None:
    """A token call on one element beside PyTorch's op can look like 0.2 ms of profiled own time
    on a loaded CPU (region and wake-up costs); its fastest call says 5 us: still a fallback.
    A real epilogue's fastest calls carry its work and it stays accepted."""

    def cpu_share(own_ms: float, fastest_s: float, calls: int = 4, ops_inside: float = 1.0) -> dict[str, Any]:
        return _share(
            own_ms=own_ms,
            library_ms=3.0,
            reference_ms=3.0,
            device="cpu",
            output_pass_ms=2.0,
            forward_calls=calls,
            ext_calls_by_function={"kit.relu_forward": calls},
            extension_fastest_s={"kit.relu_forward": fastest_s},
            ops_inside_per_call=ops_inside,
        )

    token = _judge([cpu_share(own_ms=0.2, fastest_s=15e-6)], policy="engineering", source=CPP_OMP)
    assert (token.verdict, token.reason) == (Verdict.REJECTED, Reason.TORCH_FALLBACK), token.message
    assert "0.0050 ms per call" in token.message  # 15 us less 10 us of profiler cost for its one ATen op
    epilogue = _judge([cpu_share(own_ms=1.2, fastest_s=1.0e-3)], policy="engineering", source=CPP_OMP)
    assert epilogue.verdict == Verdict.CORRECT, epilogue.message
    no_data = _share(own_ms=0.2, library_ms=3.0, reference_ms=3.0, device="cpu", output_pass_ms=2.0)
    assert _judge([no_data], policy="engineering", source=CPP_OMP).verdict == Verdict.CORRECT  # as before
