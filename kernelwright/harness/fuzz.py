"""Correctness fuzzing: which trials to run, how to draw their inputs, and how to compare outputs.

Inputs are drawn from a seed in each process that needs them, on its own device (`draw_inputs`):
the same seed, shapes and device give the same values in the reference's process and in the
candidate's, so nothing is shipped between them, and a candidate learns a trial's seed only when
that trial runs. Outputs are compared (`compare_outputs`) on the device of the expected values,
with a round-off slack measured on the reference itself (`roundoff_of` for float32 problems,
`lowp_slack` for float16/bfloat16 ones; `compare_trial` applies it).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from kernelwright.errors import ProblemError
from kernelwright.harness.options import TrialPlan
from kernelwright.harness.verdicts import Reason
from kernelwright.problems.instance import ProblemInstance, Size, materialize
from kernelwright.problems.model import InputConstraint, Problem, ProblemMeta

# A candidate may be this many times as far from the exact result as PyTorch's own fp32 reference
# (different summation orders round differently); real bugs are orders of magnitude beyond it.
# The same factor serves low-precision problems (`lowp_slack`): there the scale is the reference's
# distance from its float32 run.
ROUNDOFF_FACTOR = 16.0
LOW_PRECISION = (torch.float16, torch.bfloat16)
# The float32 run of a low-precision reference holds a float32 copy of the model, of the inputs and
# of the outputs (about twice their low-precision bytes) beside the low-precision ones, plus the
# copy the model is cast from: it is made only when that fits in this share of the memory free.
# The float64 run a trial needs when it is ill-conditioned is bounded the same way (twice again).
HIGHER_RUN_SHARE = 0.5


def _draw_float(template: torch.Tensor, dist: str, gen: torch.Generator) -> torch.Tensor:
    shape, dtype, dev = template.shape, template.dtype, gen.device
    if dist == "uniform":
        x = torch.rand(shape, generator=gen, device=dev)
    elif dist == "normal":
        x = torch.randn(shape, generator=gen, device=dev)
    elif dist == "large":
        x = torch.randn(shape, generator=gen, device=dev) * 100.0
    elif dist == "tiny":
        x = torch.randn(shape, generator=gen, device=dev) * 1e-3
    elif dist == "signed":
        x = (torch.rand(shape, generator=gen, device=dev) * 2 - 1) * 4.0
    else:
        raise ValueError(f"unknown distribution {dist!r}")
    return x.to(dtype)


def needs_values(template: Any, constraint: InputConstraint, bound: int | None) -> bool:
    """Whether drawing an input like `template` reads its values (a fixed input, integer data
    without a declared bound), so a shape-only (meta) template will not do."""
    if not isinstance(template, torch.Tensor) or template.dtype == torch.bool:
        return False
    if constraint == InputConstraint.FIXED:
        return True
    if constraint == InputConstraint.MASK:
        return False
    if not template.dtype.is_floating_point or constraint == InputConstraint.INDICES:
        return bound is None
    return False


def draw_input(template: Any, constraint: InputConstraint, bound: int | None, dist: str, gen: torch.Generator) -> Any:
    """A fresh value shaped like `template`, respecting the problem's declared constraint, on the
    generator's device."""
    dev = gen.device
    if not isinstance(template, torch.Tensor) or constraint == InputConstraint.FIXED:
        return template.clone().to(dev) if isinstance(template, torch.Tensor) else template
    shape, dtype = template.shape, template.dtype
    if dtype == torch.bool or constraint == InputConstraint.MASK:
        mask = torch.rand(shape, generator=gen, device=dev) < 0.5
        return mask if dtype == torch.bool else mask.to(dtype)
    if not dtype.is_floating_point or constraint == InputConstraint.INDICES:
        if constraint != InputConstraint.INDICES and bound is None:
            return template.clone().to(dev)  # integer data we know nothing about: keep it
        high = bound if bound is not None else int(template.max().item()) + 1 if template.numel() else 1
        return torch.randint(0, max(high, 1), shape, generator=gen, dtype=dtype, device=dev)
    if constraint == InputConstraint.UNIT:
        return torch.rand(shape, generator=gen, device=dev).to(dtype)
    if constraint == InputConstraint.DISTRIBUTION:
        return torch.softmax(torch.randn(shape, generator=gen, device=dev) * 2, dim=-1).to(dtype)
    x = _draw_float(template, dist, gen)
    if constraint == InputConstraint.POSITIVE:
        floor = 1e-3 if dist == "tiny" else 0.1
        return x.abs() + floor
    if constraint == InputConstraint.NONNEGATIVE:
        return x.abs()
    return x


def make_noncontiguous(x: Any) -> Any:
    """The same values in a strided view (every other element of a wider buffer)."""
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or not x.dtype.is_floating_point:
        return x
    wide = torch.zeros((*x.shape[:-1], x.shape[-1] * 2), dtype=x.dtype, device=x.device)
    view = wide[..., ::2]
    view.copy_(x)
    return view


def draw_inputs(templates: Sequence[Any], meta: ProblemMeta, spec: TrialPlan, device: str = "cpu") -> list[Any]:
    """The trial's inputs, drawn on `device` from its seed (the same values in every process)."""
    gen = torch.Generator(device=device).manual_seed(spec.seed)
    values = []
    for i, template in enumerate(templates):
        constraint, bound = meta.constraint(i)
        value = draw_input(template, constraint, bound, spec.distribution, gen)
        values.append(value if spec.contiguous else make_noncontiguous(value))
    return values


def instance_for_drawing(problem: Problem, size: Size, seed: int) -> ProblemInstance:
    """The problem at `size` with input templates to draw from: shapes only (meta tensors) when
    no input's values are needed (`needs_values`), else the problem's own inputs."""
    try:
        inst = materialize(problem, size, seed=seed, shapes_only=True)
    except ProblemError:  # an input function that needs real values (`.item()`, numpy): run it for real
        return materialize(problem, size, seed=seed)
    for templates in inst.input_sets():
        for i, template in enumerate(templates):
            if needs_values(template, *problem.meta.constraint(i)) or (
                isinstance(template, torch.Tensor) and template.device.type != "meta"
            ):
                return materialize(problem, size, seed=seed, module=inst.module)
    return inst


@dataclass(frozen=True)
class Comparison:
    passed: bool
    reason: Reason | None
    detail: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatch_fraction: float | None = None
    first_mismatches: tuple[tuple[int, ...], ...] = ()


def roundoff_of(model: torch.nn.Module, inputs: Sequence[Any], reference: Any) -> list[float | None] | None:
    """Per output: max |fp32 reference - fp64 run of the same model|, or None where the model
    cannot run in fp64 (an op without a double kernel) or the output is not float32."""
    try:
        doubled = copy.deepcopy(model).double()
        args = [v.double() if isinstance(v, torch.Tensor) and v.dtype == torch.float32 else v for v in inputs]
        with torch.no_grad():
            exact = doubled(*args)
    except Exception:  # the reference's ops may not all have fp64 kernels: no slack then
        return None
    out: list[float | None] = []
    for r, e in zip(_as_list(reference), _as_list(exact), strict=False):
        if (
            isinstance(r, torch.Tensor)
            and isinstance(e, torch.Tensor)
            and r.dtype == torch.float32
            and r.shape == e.shape
        ):
            diff = (r.double() - e).abs()
            finite = diff[torch.isfinite(diff)]
            out.append(float(finite.max()) if finite.numel() else None)
        else:
            out.append(None)
    return out


def _as_list(output: Any) -> list[Any]:
    return list(output) if isinstance(output, list | tuple) else [output]


def compare_outputs(
    reference: Any, candidate: Any, atol: float, rtol: float, roundoff: Sequence[float | None] | None = None
) -> Comparison:
    """Compare every output tensor: structure, shape, dtype, NaN/Inf, then values with
    |c - r| <= atol + rtol * |r| + ROUNDOFF_FACTOR * e, where e is the largest difference between
    the fp32 reference and the same model run in fp64 (the reference's own round-off: sums whose
    terms cancel are only that exact). NaN where the reference has NaN counts as equal."""
    refs, cands = _as_list(reference), _as_list(candidate)
    if len(refs) != len(cands):
        return Comparison(False, Reason.SHAPE_MISMATCH, f"{len(cands)} outputs, the reference returns {len(refs)}")
    worst_abs = worst_rel = 0.0
    worst_frac = 0.0
    for k, (r, c) in enumerate(zip(refs, cands, strict=True)):
        name = f"output {k}" if len(refs) > 1 else "output"
        if not isinstance(r, torch.Tensor):
            if r != c:
                return Comparison(False, Reason.OUTPUT_MISMATCH, f"{name}: {c!r} != reference {r!r}")
            continue
        if not isinstance(c, torch.Tensor):
            return Comparison(False, Reason.SHAPE_MISMATCH, f"{name} is a {type(c).__name__}, not a tensor")
        if c.shape != r.shape:
            return Comparison(
                False, Reason.SHAPE_MISMATCH, f"{name} has shape {list(c.shape)}, the reference {list(r.shape)}"
            )
        if c.dtype != r.dtype:
            return Comparison(False, Reason.DTYPE_MISMATCH, f"{name} has dtype {c.dtype}, the reference {r.dtype}")
        r64 = r.detach().to(torch.float64)
        c64 = c.detach().to(r.device, torch.float64)
        ref_abs = r64.abs()
        diff = (c64 - r64).abs()
        # Both outputs finite everywhere (the usual case, read off maxima this needs anyway: a NaN
        # or Inf in either makes one of them non-finite): no NaN/Inf bookkeeping, the same figures
        # in half the passes over the output.
        top = float(diff.max()) if diff.numel() else 0.0
        finite = diff.numel() > 0 and math.isfinite(float(ref_abs.max())) and math.isfinite(top)
        if not finite:
            r_finite, c_finite = torch.isfinite(r64), torch.isfinite(c64)
            bad_nonfinite = r_finite & ~c_finite
            if bool(bad_nonfinite.any()):
                idx = bad_nonfinite.nonzero()[:5].tolist()
                return Comparison(
                    False,
                    Reason.NONFINITE_OUTPUT,
                    f"{name} has NaN/Inf where the reference is finite, first at {idx}",
                    first_mismatches=tuple(tuple(i) for i in idx),
                )
            nonfinite_agree = (~r_finite) & (~c_finite) & ((r64 == c64) | (r64.isnan() & c64.isnan()))
            diff = torch.where(nonfinite_agree, torch.zeros_like(diff), diff)
            diff = torch.where(~r_finite & ~nonfinite_agree, torch.full_like(diff, math.inf), diff)
        slack = (roundoff[k] if roundoff is not None and k < len(roundoff) else None) or 0.0
        allowed = (
            atol
            + ROUNDOFF_FACTOR * float(slack)
            + rtol * (ref_abs if finite else ref_abs.nan_to_num(posinf=0.0, neginf=0.0))
        )
        bad = diff > allowed
        abs_err = top if finite else (float(diff.max()) if diff.numel() else 0.0)
        rel = diff / ref_abs.clamp_min(atol)
        if not finite:  # where the reference is NaN/Inf: 0 where agreed, else infinitely off (not NaN)
            rel = torch.where(r_finite, rel, torch.where(nonfinite_agree, 0.0, math.inf))
        rel_err = float(rel.max()) if rel.numel() else 0.0
        frac = float(bad.float().mean()) if bad.numel() else 0.0
        worst_abs, worst_rel, worst_frac = max(worst_abs, abs_err), max(worst_rel, rel_err), max(worst_frac, frac)
        if bool(bad.any()):
            idx = bad.nonzero()[:5].tolist()
            first = tuple(idx[0])
            detail = (
                f"{name}: {int(bad.sum())} of {bad.numel()} values differ (max abs err {abs_err:.3g}, "
                f"max rel err {rel_err:.3g}); first at {list(first)}: got {float(c64[first]):.6g}, "
                f"expected {float(r64[first]):.6g}"
            )
            return Comparison(
                False, Reason.OUTPUT_MISMATCH, detail, abs_err, rel_err, frac, tuple(tuple(i) for i in idx)
            )
    return Comparison(True, None, "", worst_abs, worst_rel, worst_frac)


@dataclass(frozen=True)
class Slack:
    """What a trial's comparison allows beyond atol + rtol * |ref|, measured on the reference.

    `roundoff`: per output, the scale of the reference's own round-off (ROUNDOFF_FACTOR times it is
    allowed); None where there is none. `ill`: the outputs the reference computes no better than the
    tolerance at this precision (they get no slack; `compare_trial` says what passes instead), with
    `higher` (the float32 run's outputs) and `higher_roundoff` (that run's own fp64 round-off) kept
    for them. `ill_note` and `unavailable` are the sentences the trial's detail carries."""

    roundoff: list[float | None] | None = None
    ill: tuple[int, ...] = ()
    higher: Any = None
    higher_roundoff: list[float | None] | None = None
    ill_note: str = ""
    unavailable: str = ""
    notes: list[str] = field(default_factory=list)

    def allowed(self) -> list[float | None] | None:
        """The round-off scale per output as `compare_outputs` takes it: none for an ill-conditioned one."""
        if self.roundoff is None:
            return None
        return [None if k in self.ill else e for k, e in enumerate(self.roundoff)]

    @property
    def note(self) -> str:
        return "; ".join(n for n in (self.ill_note, self.unavailable, *self.notes) if n)


def _widen(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in LOW_PRECISION:
        return value.float()
    if isinstance(value, list | tuple):
        return type(value)(_widen(v) for v in value)
    return value


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(_bytes(v) for v in value)
    return 0


def lowp_slack(
    model: torch.nn.Module, inputs: Sequence[Any], reference: Any, atol: float, rtol: float, free_bytes: int | None
) -> Slack:
    """The round-off slack of a float16/bfloat16 reference: the same model run on the whole problem
    with its parameters and floating inputs cast to float32 (exact), and per output the scale
    e = max |ref - fp32 run| over the positions where both are finite. A candidate may then differ
    from the reference by atol + rtol * |ref| + ROUNDOFF_FACTOR * e, as in the float32 case (there
    against fp64): the fp32 run is 2^13 (fp16) to 2^16 (bf16) times more exact than the reference,
    so e is the reference's own round-off, and an honest kernel that keeps or rounds intermediates
    differently errs by a small multiple of it. The model is never split: chunks would cut across a
    normalisation or a reduction.

    An output is ill-conditioned at this precision when e exceeds the tolerance at the output's
    largest value (atol + rtol * max |fp32 run|), or the reference is Inf/NaN where its fp32 run,
    rounded to the output's dtype, is finite: the reference cannot tell answers apart to the
    problem's tolerance, and 16 e would pass any answer of the right magnitude. Such an output gets
    no slack; its fp32 run (and that run's fp64 round-off) are kept for `compare_trial`.

    No slack at all (`unavailable` says why) when the fp32 run does not fit (`HIGHER_RUN_SHARE` of
    `free_bytes`) or fails (an op without a float32 kernel)."""
    refs = _as_list(reference)
    if not any(isinstance(r, torch.Tensor) and r.dtype.is_floating_point for r in refs):
        return Slack()
    weights = sum(_bytes(t) for t in (*model.parameters(), *model.buffers()))
    need = 3 * weights + 2 * (_bytes(list(inputs)) + _bytes(refs))
    if free_bytes is not None and need > HIGHER_RUN_SHARE * free_bytes:
        why = f"its float32 run would need about {need / 2**20:.0f} MiB, more than half of the {free_bytes / 2**20:.0f} MiB free"
        return Slack(unavailable=f"no round-off slack: {why}")
    try:
        higher_model = copy.deepcopy(model).float()
        args = [_widen(v) for v in inputs]
        with torch.no_grad():
            higher = _as_list(higher_model(*args))
    except Exception as exc:  # an op without a float32 kernel, or out of device memory: no slack then
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return Slack(
            unavailable=f"no round-off slack: the reference cannot run in float32 ({type(exc).__name__}: {first})"
        )
    roundoff: list[float | None] = []
    ill: list[int] = []
    notes: list[str] = []  # the outputs without slack
    ill_notes: list[str] = []
    for k, (r, h) in enumerate(zip(refs, higher, strict=False)):
        name = f"output {k}" if len(refs) > 1 else "the output"
        usable = isinstance(r, torch.Tensor) and isinstance(h, torch.Tensor) and r.shape == h.shape
        if not usable or r.dtype not in (*LOW_PRECISION, torch.float32) or h.dtype != torch.float32:
            if usable and r.dtype in LOW_PRECISION:
                notes.append(f"no round-off slack for {name}: its float32 run returns {_name(h.dtype)}")
            roundoff.append(None)
            continue
        r64, h64 = r.detach().double(), h.detach().double()
        both, h_finite = torch.isfinite(r64) & torch.isfinite(h64), torch.isfinite(h64)
        e = float((r64 - h64).abs()[both].max()) if bool(both.any()) else 0.0
        tol = atol + rtol * (float(h64.abs()[h_finite].max()) if bool(h_finite.any()) else 0.0)
        overflow = int((~torch.isfinite(r64) & torch.isfinite(h.detach().to(r.dtype))).sum())
        roundoff.append(e)
        what = f"{name} of the {_name(r.dtype)} reference"
        if e > tol:
            ill.append(k)
            ill_notes.append(
                f"{what} differs from its float32 run by up to {e:.3g}, beyond the tolerance at its largest value ({tol:.3g})"
            )
        elif overflow:
            ill.append(k)
            ill_notes.append(f"{what} is Inf/NaN at {overflow} positions where its float32 run is finite")
    if not ill:
        return Slack(roundoff=roundoff, notes=notes)
    fits = free_bytes is None or 2 * need <= HIGHER_RUN_SHARE * free_bytes  # the fp64 run: twice the fp32 one
    higher_roundoff = roundoff_of(higher_model, args, higher) if fits else None
    ill_note = "ill-conditioned at this precision: " + "; ".join(ill_notes)
    return Slack(roundoff, tuple(ill), higher, higher_roundoff, ill_note, notes=notes)


def compare_trial(reference: Any, candidate: Any, atol: float, rtol: float, slack: Slack) -> Comparison:
    """`compare_outputs` with the trial's slack; a note of the slack's limits in the detail.

    An ill-conditioned output (`lowp_slack`) passes when it matches the low-precision reference
    within the plain tolerance, or its float32 run as a float32 problem's output would match (the
    tolerance plus ROUNDOFF_FACTOR times that run's fp64 round-off): the first is what PyTorch
    computes at this precision, the second the more exact answer, and both are bounded, so a kernel
    wrong beyond them still fails. One that matches neither is an `output_mismatch` whose detail
    opens with "ill-conditioned at this precision: ..." and gives both distances: at this precision
    the reference cannot settle it, and a trial that cannot be settled is not passed."""
    first = compare_outputs(reference, candidate, atol, rtol, slack.allowed())
    if first.passed and not slack.ill:
        return first
    if first.passed:
        return replace(first, detail=f"{slack.ill_note}; the output matches the reference")
    if not slack.ill or slack.higher is None or first.reason != Reason.OUTPUT_MISMATCH:
        return replace(first, detail=f"{first.detail} ({slack.note})" if slack.note else first.detail)
    refs, cands, allowed = _as_list(reference), _as_list(candidate), slack.allowed() or []
    higher, higher_roundoff = _as_list(slack.higher), slack.higher_roundoff or []
    wide_refs, wide_cands, wide_allowed = [], [], []
    for k, (r, c) in enumerate(zip(refs, cands, strict=True)):
        ill = k in slack.ill
        wide_refs.append(higher[k] if ill else _widen(r))
        wide_cands.append(_widen(c))
        pool = higher_roundoff if ill else allowed
        wide_allowed.append(pool[k] if k < len(pool) else None)
    second = compare_outputs(wide_refs, wide_cands, atol, rtol, wide_allowed)
    if second.passed:
        return replace(second, detail=f"{slack.ill_note}; the output matches its float32 run")
    detail = f"{slack.note}; against the reference: {first.detail}; against its float32 run: {second.detail}"
    return replace(first, detail=detail)


def is_constant(output: Any) -> bool:
    """All elements of every output tensor are equal (a candidate returning zeros, say)."""
    tensors = [t for t in _as_list(output) if isinstance(t, torch.Tensor) and t.numel() > 1]
    return bool(tensors) and all(bool((t == t.reshape(-1)[0]).all()) for t in tensors)
