"""Round-off slack for float16/bfloat16 problems (`fuzz.lowp_slack`, `fuzz.compare_trial`): an honest
kernel that accumulates in float32 and rounds at the end is within the reference's own round-off
(measured against a float32 run of the reference); a kernel wrong on one element or on a tail is
still outside it; an ill-conditioned trial says so and passes only an answer one of the two
references vouches for."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from kernelwright.harness.fuzz import ROUNDOFF_FACTOR, Slack, compare_outputs, compare_trial, lowp_slack
from kernelwright.harness.session import evaluate
from kernelwright.harness.verdicts import Reason
from kernelwright.problems import load_problem_file
from tests.candidates import harness_options, write_case

TOL = 1e-2  # the float16/bfloat16 default atol and rtol


class MatSum(nn.Module):
    """(a @ b).sum(-1): the product is rounded to the low precision before the sum, whose terms cancel."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a @ b).sum(-1)


class SharpSoftmax(nn.Module):
    """softmax(100 x) @ v: the logits are rounded to the low precision, a near tie is decided by that rounding."""

    def forward(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * 100, dim=-1) @ v


class Norm(nn.Module):
    """sqrt(sum x^2): the squares overflow float16 where the norm itself does not."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * x).sum(-1).sqrt()


class HalfOnly(nn.Module):
    """An op the float32 run cannot make (stands for an op without a float32 kernel)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float16:
            raise RuntimeError("this op has no float32 kernel")
        return x.cumsum(-1)


def _matsum_case(dtype: torch.dtype, scale: float) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, Slack]:
    gen = torch.Generator().manual_seed(0)
    inputs = [
        (torch.randn(64, 128, generator=gen) * scale).to(dtype),
        (torch.randn(128, 256, generator=gen) * scale).to(dtype),
    ]
    ref = MatSum()(*inputs)
    honest = (inputs[0].double() @ inputs[1].double()).sum(-1).to(dtype)  # accumulate wide, round once at the end
    return inputs, ref, honest, lowp_slack(MatSum(), inputs, ref, TOL, TOL, None)


def test_honest_bf16_matmul_sum_with_large_values_is_within_the_measured_roundoff() -> None:
    _, ref, honest, slack = _matsum_case(torch.bfloat16, 100.0)
    assert compare_outputs(ref, honest, TOL, TOL).reason == Reason.OUTPUT_MISMATCH  # no slack: rejected
    assert slack.ill == () and slack.note == ""
    [e] = slack.roundoff or [None]
    assert e is not None and e > 0
    result = compare_trial(ref, honest, TOL, TOL, slack)
    assert result.passed, result.detail
    assert result.max_abs_error is not None and result.max_abs_error <= ROUNDOFF_FACTOR * e


@pytest.mark.parametrize("dtype, scale", [(torch.bfloat16, 100.0), (torch.float16, 1.0)])
def test_a_real_error_stays_outside_the_slack(dtype: torch.dtype, scale: float) -> None:
    _, ref, honest, slack = _matsum_case(dtype, scale)
    [e] = slack.roundoff or [None]
    assert e is not None and e > 0
    assert compare_trial(ref, honest, TOL, TOL, slack).passed
    tail = honest.clone()
    tail[-5:] = 0  # rows past the last full block of 16 never written
    missed = compare_trial(ref, tail, TOL, TOL, slack)
    assert missed.reason == Reason.OUTPUT_MISMATCH and not missed.passed
    assert missed.first_mismatches and missed.first_mismatches[0][0] >= 59
    one = honest.clone()
    one[7] += 4 * ROUNDOFF_FACTOR * e + 2 * TOL * float(ref.abs().max())
    wrong = compare_trial(ref, one, TOL, TOL, slack)
    assert wrong.reason == Reason.OUTPUT_MISMATCH and wrong.first_mismatches == ((7,),)


def test_float32_problems_keep_their_comparison() -> None:
    ref = torch.randn(4, 5)
    bad = ref + 1e-3
    plain = compare_outputs(ref, bad, 1e-4, 1e-4, [1e-4])
    assert compare_trial(ref, bad, 1e-4, 1e-4, Slack(roundoff=[1e-4])) == plain
    assert compare_trial(ref, ref + 1e-6, 1e-4, 1e-4, Slack(roundoff=None)) == compare_outputs(
        ref, ref + 1e-6, 1e-4, 1e-4
    )


def _near_tie() -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.full((4, 8), -3.0)
    x[:, 0], x[:, 1] = 10.0, 10.0078125  # 100x: 1000 and 1000.78, which float16 rounds to 1001
    v = torch.zeros(8, 4)
    v[0], v[1] = 1.0, -1.0
    return x.half(), v.half()


def test_a_near_tie_softmax_is_ill_conditioned_and_says_so() -> None:
    x, v = _near_tie()
    ref = SharpSoftmax()(x, v)
    slack = lowp_slack(SharpSoftmax(), [x, v], ref, TOL, TOL, None)
    assert slack.ill == (0,) and slack.higher is not None
    assert slack.ill_note.startswith("ill-conditioned at this precision: the output of the float16 reference")
    assert slack.allowed() == [None]  # no slack where it would pass anything of the right magnitude
    honest = SharpSoftmax()(x.float(), v.float()).half()  # logits kept in float32
    assert not compare_outputs(ref, honest, TOL, TOL).passed
    passed = compare_trial(ref, honest, TOL, TOL, slack)
    assert passed.passed and "matches its float32 run" in passed.detail
    assert compare_trial(ref, ref.clone(), TOL, TOL, slack).passed  # what PyTorch computes at this precision
    between = ((ref.float() + honest.float()) / 2).half()  # matches neither reference
    failed = compare_trial(ref, between, TOL, TOL, slack)
    assert failed.reason == Reason.OUTPUT_MISMATCH
    assert failed.detail.startswith("ill-conditioned at this precision:")
    assert "against its float32 run" in failed.detail
    assert not compare_trial(ref, torch.zeros_like(ref), TOL, TOL, slack).passed


def test_an_overflowing_reference_is_ill_conditioned_and_the_exact_answer_passes() -> None:
    x = (torch.randn(8, 64, generator=torch.Generator().manual_seed(1)) * 300).half()
    ref = Norm()(x)
    assert bool(torch.isinf(ref).all())
    slack = lowp_slack(Norm(), [x], ref, TOL, TOL, None)
    assert slack.ill == (0,) and "Inf/NaN at 8 positions" in slack.ill_note
    assert compare_trial(ref, Norm()(x.float()).half(), TOL, TOL, slack).passed
    halved = (Norm()(x.float()) / 2).half()
    assert compare_trial(ref, halved, TOL, TOL, slack).reason == Reason.OUTPUT_MISMATCH


def test_without_a_float32_run_there_is_no_slack_and_the_detail_says_why() -> None:
    x = torch.randn(4, 256, generator=torch.Generator().manual_seed(2)).half()
    ref = HalfOnly()(x)
    slack = lowp_slack(HalfOnly(), [x], ref, TOL, TOL, None)
    assert slack.roundoff is None and "cannot run in float32 (RuntimeError" in slack.unavailable
    off = ref.clone()
    off[0, -1] += 1.0
    result = compare_trial(ref, off, TOL, TOL, slack)
    assert result.reason == Reason.OUTPUT_MISMATCH and "no round-off slack" in result.detail
    inputs, ref, _, _ = _matsum_case(torch.bfloat16, 100.0)
    tight = lowp_slack(MatSum(), inputs, ref, TOL, TOL, free_bytes=64 << 10)  # the float32 run needs ~0.2 MiB
    assert tight.roundoff is None and "more than half of the" in tight.unavailable


# One bfloat16 problem through the whole harness (real worker processes, one real C++ build): CPU
# bfloat16 matmul and sum are supported, and the rounded product makes the sum's terms cancel, so an
# honest kernel that accumulates in float32 differs from the reference by more than atol + rtol |ref|
# on some rows of most trials.
PROBLEM = """import torch
import torch.nn as nn

PROBLEM = {"dtype": "bfloat16", "description": "Row sums of a bfloat16 matrix product."}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return (a @ b).sum(-1)


def get_inputs():
    return [torch.randn(69, 128, dtype=torch.bfloat16), torch.randn(128, 256, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
"""

KERNEL = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <vector>

// y[m] = sum_k a[m, k] * (sum_n b[k, n]), in float32, rounded to bfloat16 once.
// full_blocks_only: rows past the last full block of 16 are left at zero (the bug under test).
torch::Tensor matsum(torch::Tensor a, torch::Tensor b, bool full_blocks_only) {
    TORCH_CHECK(a.scalar_type() == torch::kBFloat16 && b.scalar_type() == torch::kBFloat16, "bfloat16 only");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    const int64_t M = ac.size(0), K = ac.size(1), N = bc.size(1);
    auto out = torch::zeros({M}, ac.options());
    const at::BFloat16* pa = ac.data_ptr<at::BFloat16>();
    const at::BFloat16* pb = bc.data_ptr<at::BFloat16>();
    at::BFloat16* po = out.data_ptr<at::BFloat16>();
    std::vector<float> bsum(K, 0.f);
    for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n) bsum[k] += static_cast<float>(pb[k * N + n]);
    const int64_t rows = full_blocks_only ? M / 16 * 16 : M;
    for (int64_t m = 0; m < rows; ++m) {
        float acc = 0.f;
        for (int64_t k = 0; k < K; ++k) acc += static_cast<float>(pa[m * K + k]) * bsum[k];
        po[m] = static_cast<at::BFloat16>(acc);
    }
    return out;
}
"""

ext = load_inline(name="kw_lowp_matsum", cpp_sources=source, functions=["matsum"], extra_cflags=["-O2"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.matsum(a, b, FULL_BLOCKS_ONLY)
'''


@pytest.mark.slow
def test_bf16_problem_end_to_end_honest_is_correct_and_a_missing_tail_is_not(tmp_path: Path, shared_home: Path) -> None:
    problem_file = tmp_path / "matsum_bf16.py"
    problem_file.write_text(PROBLEM)
    honest = write_case(tmp_path, "honest_fp32_accumulate", KERNEL.replace("FULL_BLOCKS_ONLY", "False"))
    tail = write_case(tmp_path, "wrong_tail", KERNEL.replace("FULL_BLOCKS_ONLY", "True"))
    opts = harness_options(shared_home, "cpu", trials=5)
    good, bad = evaluate(load_problem_file(problem_file), [honest, tail], opts)
    assert good.verdict.value == "correct", good.message
    # Far beyond rtol on some row: only the round-off slack lets it pass (without it, 4 of 6 trials
    # failed when this was written).
    assert max(t.max_rel_error or 0.0 for t in good.trials) > 10 * TOL
    assert (bad.verdict.value, bad.reason) == ("incorrect", "output_mismatch"), bad.message
    assert "differ" in bad.message
