"""The fuzzer's pieces: trial plans, constrained input draws, output comparison."""

from __future__ import annotations

import math

import pytest
import torch

from kernelwright.harness.fuzz import (
    compare_outputs,
    draw_input,
    draw_inputs,
    is_constant,
    make_noncontiguous,
)
from kernelwright.harness.options import DISTRIBUTIONS, TrialPlan, plan_trials
from kernelwright.harness.verdicts import Reason
from kernelwright.problems.model import InputConstraint, ProblemMeta


def test_plan_covers_distributions_variants_and_strides() -> None:
    plan = plan_trials(5, n_variants=2, base_seed=7)
    assert {t.distribution for t in plan} == set(DISTRIBUTIONS)
    assert [t.variant for t in plan if t.variant is not None] == [0, 1]
    assert any(not t.contiguous for t in plan)
    assert len({t.seed for t in plan}) == len(plan)
    assert len(plan_trials(12, 0, 7)) == 13


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_positive_and_unit_constraints_hold_for_every_distribution(dist: str) -> None:
    gen = torch.Generator().manual_seed(0)
    template = torch.zeros(64, 64)
    assert bool((draw_input(template, InputConstraint.POSITIVE, None, dist, gen) > 0).all())
    assert bool((draw_input(template, InputConstraint.NONNEGATIVE, None, dist, gen) >= 0).all())
    unit = draw_input(template, InputConstraint.UNIT, None, dist, gen)
    assert bool(((unit >= 0) & (unit < 1)).all())
    dist_rows = draw_input(template, InputConstraint.DISTRIBUTION, None, dist, gen)
    assert torch.allclose(dist_rows.sum(-1), torch.ones(64), atol=1e-5)


def test_indices_masks_and_fixed_inputs() -> None:
    gen = torch.Generator().manual_seed(0)
    idx = draw_input(torch.zeros(1000, dtype=torch.long), InputConstraint.INDICES, 10, "normal", gen)
    assert idx.dtype == torch.long and int(idx.min()) >= 0 and int(idx.max()) < 10
    mask = draw_input(torch.zeros(100, dtype=torch.bool), InputConstraint.ANY, None, "normal", gen)
    assert mask.dtype == torch.bool and 0 < int(mask.sum()) < 100
    fixed = torch.arange(5.0)
    assert torch.equal(draw_input(fixed, InputConstraint.FIXED, None, "large", gen), fixed)
    assert draw_input(3.5, InputConstraint.ANY, None, "large", gen) == 3.5


def test_draws_are_reproducible_and_respect_the_problem_meta() -> None:
    meta = ProblemMeta(input_constraints={1: "indices:4"})
    templates = [torch.zeros(8, 4), torch.zeros(8, dtype=torch.long)]
    spec = TrialPlan(index=0, seed=123, distribution="large")
    a, b = draw_inputs(templates, meta, spec), draw_inputs(templates, meta, spec)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert float(a[0].abs().max()) > 10  # large magnitudes
    assert int(a[1].max()) < 4


def test_noncontiguous_view_keeps_values() -> None:
    x = torch.randn(4, 6)
    y = make_noncontiguous(x)
    assert not y.is_contiguous() and torch.equal(y, x)


def test_compare_reports_errors_indices_and_reasons() -> None:
    ref = torch.ones(4, 4)
    ok = compare_outputs(ref, ref + 1e-6, 1e-4, 1e-4)
    assert ok.passed and ok.max_abs_error is not None and ok.max_abs_error < 1e-5
    bad = ref.clone()
    bad[2, 3] = 2.0
    result = compare_outputs(ref, bad, 1e-4, 1e-4)
    assert not result.passed and result.reason == Reason.OUTPUT_MISMATCH
    assert result.first_mismatches[0] == (2, 3) and math.isclose(result.mismatch_fraction or 0, 1 / 16)
    assert "expected 1" in result.detail
    assert compare_outputs(ref, torch.ones(4, 5), 1e-4, 1e-4).reason == Reason.SHAPE_MISMATCH
    assert compare_outputs(ref, ref.double(), 1e-4, 1e-4).reason == Reason.DTYPE_MISMATCH
    nan = ref.clone()
    nan[0, 0] = float("nan")
    assert compare_outputs(ref, nan, 1e-4, 1e-4).reason == Reason.NONFINITE_OUTPUT
    assert compare_outputs(nan, nan.clone(), 1e-4, 1e-4).passed  # NaN where the reference has NaN
    assert compare_outputs((ref, ref), (ref,), 1e-4, 1e-4).reason == Reason.SHAPE_MISMATCH


def test_non_finite_values_take_the_careful_path_with_the_same_figures() -> None:
    """Finite outputs are compared without the NaN/Inf bookkeeping; a NaN or Inf anywhere, in
    either output, takes the careful path, and what both agree on changes none of the figures."""
    torch.manual_seed(0)
    ref = torch.randn(64, 33)
    got = ref + 1e-5 * torch.randn(64, 33)
    got[5, 7] = ref[5, 7] + 3.0  # one real mismatch
    plain = compare_outputs(ref, got, 1e-4, 1e-4, [1e-6])
    for special in (float("nan"), float("inf"), -float("inf")):
        r, g = ref.clone(), got.clone()
        r[60, 1] = g[60, 1] = special  # agreed on: not an error
        careful = compare_outputs(r, g, 1e-4, 1e-4, [1e-6])
        assert (careful.passed, careful.reason, careful.first_mismatches) == (
            plain.passed,
            plain.reason,
            plain.first_mismatches,
        )
        assert careful.max_abs_error == plain.max_abs_error and careful.max_rel_error == plain.max_rel_error
        g[60, 1] = 0.0  # the reference's NaN/Inf not reproduced: a mismatch at that place
        missed = compare_outputs(r, g, 1e-4, 1e-4)
        assert (60, 1) in missed.first_mismatches and missed.max_rel_error == math.inf
    for special in (float("nan"), float("inf")):
        g = got.clone()
        g[3, 3] = special  # only the candidate's: caught whichever maximum saw it
        assert compare_outputs(ref, g, 1e-4, 1e-4).reason == Reason.NONFINITE_OUTPUT
    empty = torch.empty(0, 4)
    assert compare_outputs(empty, empty.clone(), 1e-4, 1e-4).passed


def test_is_constant() -> None:
    assert is_constant(torch.zeros(3, 3))
    assert not is_constant(torch.arange(4.0))
