"""One shape's work-share profile inside a candidate's worker: the reference's forward and the
candidate's on the same inputs, under the profiler, with the candidate's extension calls counted
and clocked by its recorder. What `CandidateSession` sends back for each shape (`Share`); the
rules that read it are `judge/work_share.py`."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from kernelwright.harness.checks.recorder import ExtensionRecorder
from kernelwright.harness.options import TrialPlan
from kernelwright.harness.workers.jobs import WorkShareRequest
from kernelwright.harness.workers.messages import Share

_perf_counter = time.perf_counter  # captured before any candidate is imported


def profile_shape(
    model: Callable[..., Any],
    reference: Callable[..., Any],
    inputs: list[Any],
    plan: TrialPlan,
    request: WorkShareRequest,
    recorder: ExtensionRecorder,
    device: str,
) -> tuple[Share, Any]:
    """The share of one shape (its `file` unset: the caller hands the output over) and the last
    profiled call's output; a failed profile is a share with its error and no output (profiling
    is evidence, not a verdict)."""
    import torch

    from kernelwright.harness.checks import dynamic as dynamic_checks
    from kernelwright.harness.checks.symbols import KernelMatcher

    calls_before = sum(recorder.calls.values())
    counts_before = dict(recorder.calls)
    kept: list[Any] = [None, 0, 0.0]  # the last output, how many forwards ran, their host seconds

    def call() -> None:
        start = _perf_counter()
        kept[0] = model(*inputs)
        kept[2] += _perf_counter() - start
        kept[1] += 1

    try:
        with torch.no_grad():
            ref_share = dynamic_checks.measure_work_share(
                functools.partial(reference, *inputs), device=device, own=KernelMatcher()
            )
            recorder.profiling = True
            recorder.clear_fastest()
            ext_before = recorder.seconds
            share = dynamic_checks.measure_work_share(
                call,
                device=device,
                own=KernelMatcher(request.own_exact, request.own_names),
                not_own=frozenset(ref_share.kernels),
                while_profiled=recorder.window,
                own_ops=frozenset(request.own_ops),
            )
    except Exception as exc:  # candidate code, or the profiler: the share says it failed
        return Share(plan=plan, error=f"{type(exc).__name__}: {exc}"), None
    finally:
        recorder.profiling = False
    profiled = Share(
        plan=plan,
        own_ms=share.own_ms,
        library_ms=share.library_ms,
        own_fraction=share.own_fraction,
        reference_ms=ref_share.library_ms,
        not_work_ms=share.not_work_ms,
        streams=sorted(share.streams),
        reference_streams=sorted(ref_share.streams),
        reference_not_work_ms=ref_share.not_work_ms,
        top_library_ops=share.top_library_ops,
        own_kernels=share.own_kernels,
        disowned_kernels=share.disowned,
        ext_calls=sum(recorder.calls.values()) - calls_before,
        ext_calls_by_function={
            name: n - counts_before.get(name, 0) for name, n in recorder.calls.items() if n > counts_before.get(name, 0)
        },
        forward_calls=kept[1],
        forward_s=kept[2],
        extension_s=recorder.seconds - ext_before,
        extension_fastest_s=dict(recorder.fastest),
        ops_inside_per_call=share.ops_inside_per_call,
        output_pass_ms=dynamic_checks.output_pass_ms(kept[0], device),
        device=share.device,
        calls_per_round=share.calls_per_round,
        reference_calls_per_round=ref_share.calls_per_round,
        graph_kernels=share.graph_kernels,
        own_op_calls=share.own_op_calls,
    )
    return profiled, kept[0]
