"""Who launched the candidate's kernels (#28): kernels replayed from a CUDA graph the candidate
captured from its own kernels, and operators it registered itself (`torch.ops.NS.NAME`), count as
its own work in the work-share profile; a graph of PyTorch's kernels, or an operator that wraps
PyTorch's, stays a fallback. Profiler events are synthetic here (on the GPU the attribution reads
names, correlation ids, durations, streams and host spans, as `rounds.read_events` takes them from
the profiler's raw events; on the CPU parents and times, as its FunctionEvents carry them); the
CPU operator test builds a real TORCH_LIBRARY extension. The GPU cases are in
`test_graph_replay_gpu.py`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelwright.harness import judge
from kernelwright.harness.checks import rounds
from kernelwright.harness.checks.dynamic import measure_work_share
from kernelwright.harness.checks.recorder import REGION_PREFIX
from kernelwright.harness.checks.rounds import NOT_WORK, ProfiledEvent
from kernelwright.harness.checks.static.analysis import analyze_candidate
from kernelwright.harness.checks.symbols import KernelMatcher
from kernelwright.harness.phases.context import apply
from kernelwright.harness.result import EvalResult
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.harness.workers.messages import Share
from tests.harness.test_judge_work_share import OWN, _share
from tests.harness.test_static_analysis import cuda_candidate


@dataclass
class Ev:
    """The fields of a torch.profiler FunctionEvent the CPU attribution reads."""

    name: str
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    cpu_parent: Ev | None = None


def _host(name: str, correlation: int, start: int = 0, end: int = 0, thread: int = 1) -> ProfiledEvent:
    return ProfiledEvent(name, False, correlation, thread=thread, start_ns=start, end_ns=end)


def _device(name: str, correlation: int, us: float, stream: int = 7) -> ProfiledEvent:
    return ProfiledEvent(name, True, correlation, device_us=us, stream=stream)


def _graph_round(own_in_graph: bool = True, aten_in_graph: bool = False) -> list[ProfiledEvent]:
    """One forward of an honest graph candidate as the profiler records it: copy_ of the fresh
    input into the static buffer (an ATen copy kernel), then cudaGraphLaunch (correlation 41), whose
    replay runs the captured kernels, all carrying correlation 41."""
    evs = [
        _host("ModelNew.forward", 3, 0, 100),
        _host("aten::copy_", 4, 1, 10),
        _host("cudaMemcpyAsync", 40, 2, 9),
        _device("Memcpy DtoD (Device -> Device)", 40, 2.0),
        _host("cudaGraphLaunch", 41, 20, 30),
    ]
    if own_in_graph:
        evs.append(_device(OWN, 41, 10.0))
    if aten_in_graph:
        evs.append(_device("void at::native::vectorized_elementwise_kernel<4, at::native::relu>", 41, 9.0))
    return evs


def test_graph_launches_are_found_by_their_runtime_call() -> None:
    assert rounds.graph_launch_ids(_graph_round()) == {41}
    driver = [_host("cuGraphLaunch", 9), _host("cudaLaunchKernel", 10), _device(OWN, 9, 1.0)]
    assert rounds.graph_launch_ids(driver) == {9}


def test_own_kernels_replayed_from_a_graph_are_own_and_marked() -> None:
    figures = rounds.attribute_cuda(_graph_round(), KernelMatcher([OWN]), frozenset())
    assert figures.own_kernels == [OWN] and figures.graph_kernels == [OWN]
    assert figures.own_ms == pytest.approx(0.010)
    # launched directly (cudaLaunchKernel): own, not from a graph
    direct = [_host("cudaLaunchKernel", 50), _device(OWN, 50, 10.0)]
    figures = rounds.attribute_cuda(direct, KernelMatcher([OWN]), frozenset())
    assert figures.own_kernels == [OWN] and figures.graph_kernels == []


def test_the_copy_of_the_fresh_input_into_the_graph_is_no_library_work() -> None:
    """Seen on an H200: the honest graph candidate's copy_ in (one cudaMemcpyAsync, no kernel) and
    clone out counted as library ops, 197% of relu's forward at the small size: `rejected`. A
    device-to-device copy does no arithmetic, as ATen's copy kernel does none; a copy from the
    host stays library work (a result computed on the host arrives by one)."""
    figures = rounds.attribute_cuda(_graph_round(), KernelMatcher([OWN]), frozenset())
    assert set(figures.library) == {NOT_WORK} and figures.library[NOT_WORK] == pytest.approx(0.002)
    host = [_host("cudaMemcpyAsync", 60), _device("Memcpy HtoD (Pageable -> Device)", 60, 5.0)]
    assert set(rounds.attribute_cuda(host, KernelMatcher([OWN]), frozenset()).library) == {
        "Memcpy HtoD (Pageable -> Device)"
    }


def test_a_graph_of_pytorch_kernels_is_library_work() -> None:
    figures = rounds.attribute_cuda(
        _graph_round(own_in_graph=False, aten_in_graph=True), KernelMatcher([OWN]), frozenset()
    )
    assert figures.own_kernels == [] and figures.graph_kernels == []
    assert any("relu" in name for name in figures.library)


def test_the_streams_of_a_gpu_round_are_those_of_its_device_work() -> None:
    evs = [*_graph_round(), _device(OWN, 70, 3.0, stream=13), _device(f"{REGION_PREFIX}ext.f", 71, 9.0, stream=21)]
    figures = rounds.attribute_cuda(evs, KernelMatcher([OWN]), frozenset())
    assert figures.streams == {7, 13}  # a mirrored region of our own is no device work


def test_a_kernel_the_reference_launches_too_is_library_work() -> None:
    figures = rounds.attribute_cuda(_graph_round(), KernelMatcher([OWN]), frozenset({OWN}))
    assert figures.own_kernels == [] and figures.disowned == {OWN} and figures.library[OWN] == pytest.approx(0.010)


def test_own_operator_calls_on_the_gpu_are_counted_outermost_only() -> None:
    ops = frozenset({"kw_lib::relu"})
    evs = [
        _host("kw_lib::relu", 1, 0, 100),
        _host("kw_lib::relu", 2, 10, 50),  # called from inside the first: not a new entry
        _host(f"{REGION_PREFIX}ext.relu", 3, 200, 300),
        _host("kw_lib::relu", 4, 210, 250),  # inside an extension region
        _host("kw_lib::relu", 5, 400, 450),
        _host("kw_lib::relu", 6, 410, 440, thread=2),  # another thread: nothing encloses it there
        _host("kw_lib::relu", 7, 600, 700),
        _host("kw_lib::relu", 8, 600, 700),  # the same span: the first one recorded is the outer
    ]
    assert rounds.outermost_own_op_calls(evs, ops) == 4
    assert rounds.outermost_own_op_calls(evs, frozenset()) == 0
    assert rounds.attribute_cuda(evs, KernelMatcher([OWN]), frozenset(), ops).own_op_calls == 4


def _judged(**extra: Any) -> EvalResult:
    share = Share.model_validate(_share(own_ms=0.01, library_ms=0.0, reference_ms=0.01, **extra))
    result = EvalResult(problem="p", candidate="c.py", verdict=Verdict.CORRECT, device="cuda")
    return apply(result, judge.judge_work_share([share], analyze_candidate(cuda_candidate()), "strict", 5))


def test_an_honest_graph_replay_is_the_candidates_work() -> None:
    result = _judged(ext_calls=0, graph_kernels=[OWN])
    assert result.verdict == Verdict.CORRECT, result.message
    assert any(f.code == "graph_replayed_kernels" for f in result.flags)


def test_no_extension_call_and_no_graph_of_own_kernels_is_still_not_launched() -> None:
    result = _judged(ext_calls=0)
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.KERNEL_NOT_LAUNCHED)
    # a graph that replays PyTorch's kernels: no own kernel ran
    aten = Share.model_validate(
        {**_share(own_ms=0.0, library_ms=0.01, reference_ms=0.01), "ext_calls": 0, "own_kernels": []}
    )
    result = EvalResult(problem="p", candidate="c.py", verdict=Verdict.CORRECT, device="cuda")
    apply(result, judge.judge_work_share([aten], analyze_candidate(cuda_candidate()), "strict", 5))
    assert (result.verdict, result.reason) == (Verdict.REJECTED, Reason.KERNEL_NOT_LAUNCHED)


# --- operators the candidate registered itself ---


def test_an_own_operator_is_a_region_of_the_candidates_code_on_the_cpu() -> None:
    forward = Ev("ModelNew.forward")
    op = Ev("kw_lib::relu", cpu_time_total=50.0, cpu_parent=forward)
    empty = Ev("aten::empty_like", self_cpu_time_total=2.0, cpu_parent=op)
    figures = rounds.attribute_cpu([forward, op, empty], own_ops=frozenset({"kw_lib::relu"}))
    assert figures.own_kernels == ["kw_lib::relu"] and figures.own_op_calls == 1
    assert figures.own_ms == pytest.approx(0.050)
    # not registered by the candidate (or not validated): not its code
    figures = rounds.attribute_cpu([forward, op, empty])
    assert figures.own_kernels == [] and figures.own_op_calls == 0 and figures.own_ms == 0.0


def test_an_own_operator_that_wraps_pytorch_leaves_the_work_to_pytorch() -> None:
    forward = Ev("ModelNew.forward")
    op = Ev("kw_lib::relu", cpu_time_total=50.0, cpu_parent=forward)
    relu = Ev("aten::relu", self_cpu_time_total=48.0, cpu_parent=op)
    figures = rounds.attribute_cpu([forward, op, relu], own_ops=frozenset({"kw_lib::relu"}))
    assert figures.own_ms == pytest.approx(0.002) and figures.library["aten::relu"] == pytest.approx(0.048)


def test_an_extension_region_inside_an_own_operator_is_counted_once() -> None:
    op = Ev("kw_custom::relu", cpu_time_total=50.0)
    region = Ev(f"{REGION_PREFIX}kw_ext.relu_forward", cpu_time_total=45.0, cpu_parent=op)
    figures = rounds.attribute_cpu([op, region], own_ops=frozenset({"kw_custom::relu"}))
    assert figures.own_ms == pytest.approx(0.050) and figures.own_kernels == ["kw_custom::relu"]


def test_an_own_operator_called_without_the_extension_is_launched() -> None:
    share = Share.model_validate(
        {**_share(own_ms=0.05, library_ms=0.0, reference_ms=0.05), "ext_calls": 0, "own_op_calls": 40, "device": "cpu"}
    )
    source = (Path(__file__).parents[1] / "candidates" / "torch_library_relu_cpp.py").read_text()
    analysis = analyze_candidate(source)
    result = EvalResult(problem="p", candidate="c.py", verdict=Verdict.CORRECT, device="cpu")
    apply(result, judge.judge_work_share([share], analysis, "strict", 5))
    assert result.verdict == Verdict.CORRECT, result.message
    assert any(f.code == "own_operator" and "kw_lib::relu" in f.message for f in result.flags)
    no_calls = share.model_copy(update={"own_op_calls": 0})
    result = EvalResult(problem="p", candidate="c.py", verdict=Verdict.CORRECT, device="cpu")
    apply(result, judge.judge_work_share([no_calls], analysis, "strict", 5))
    assert result.reason == Reason.KERNEL_NOT_LAUNCHED


TWO_OPS = r"""
#include <torch/extension.h>

at::Tensor relu_own(const at::Tensor& x) {
    auto xc = x.contiguous();
    auto out = at::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}

at::Tensor relu_wrap(const at::Tensor& x) { return at::relu(x); }

TORCH_LIBRARY(kw_prof_test, m) {
    m.def("relu_own(Tensor x) -> Tensor");
    m.def("relu_wrap(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(kw_prof_test, CPU, m) {
    m.impl("relu_own", &relu_own);
    m.impl("relu_wrap", &relu_wrap);
}
"""


@pytest.mark.slow
def test_a_real_torch_library_operator_in_the_cpu_profile(tmp_path: Path) -> None:
    """A C++ extension registering two TORCH_LIBRARY operators, one with its own loop and one
    that wraps at::relu, profiled as the work share profiles a candidate: the first is own work,
    the second's time is aten::relu's (library)."""
    from torch.utils.cpp_extension import load_inline

    load_inline(
        name="kw_prof_test_ops",
        cpp_sources=TWO_OPS,
        is_python_module=False,
        build_directory=str(tmp_path),
        verbose=False,
    )
    x = torch.randn(256, 1024)
    ops = frozenset({"kw_prof_test::relu_own", "kw_prof_test::relu_wrap"})
    own = measure_work_share(lambda: torch.ops.kw_prof_test.relu_own(x), device="cpu", own=KernelMatcher(), own_ops=ops)
    assert own.own_op_calls > 0 and own.own_kernels == ["kw_prof_test::relu_own"]
    assert own.own_ms > 0 and own.library_ms < 0.5 * own.own_ms, (own.own_ms, own.library_ms, own.top_library_ops)
    wrap = measure_work_share(
        lambda: torch.ops.kw_prof_test.relu_wrap(x), device="cpu", own=KernelMatcher(), own_ops=ops
    )
    assert wrap.own_op_calls > 0
    assert wrap.library_ms > wrap.own_ms and any("relu" in name for name, _ in wrap.top_library_ops), wrap
    # the operator not registered by the candidate: no region, its time is nobody's own
    unknown = measure_work_share(lambda: torch.ops.kw_prof_test.relu_own(x), device="cpu", own=KernelMatcher())
    assert unknown.own_op_calls == 0 and unknown.own_ms == 0.0


@pytest.mark.slow
def test_a_torch_library_candidate_is_judged_correct_on_the_cpu(tmp_path: Path, shared_home: Path) -> None:
    """The bundled honest TORCH_LIBRARY ReLU (no pybind functions: forward calls torch.ops.kw_lib.relu)
    was `kernel_not_launched` at the work share; its operator's calls are now its own work. The
    same file with the operator's body replaced by at::relu stays rejected."""
    from kernelwright.harness.session import evaluate
    from kernelwright.problems import resolve_problem
    from tests.candidates import harness_options, write_case

    source = (Path(__file__).parents[1] / "candidates" / "torch_library_relu_cpp.py").read_text()
    start, end = source.index("    auto xc = x.contiguous();"), source.index("    return out;\n}")
    wrapper = (source[:start] + "    auto out = at::relu(x);\n" + source[end:]).replace("kw_lib", "kw_lib_wrap")
    paths = [write_case(tmp_path, "torch_library_relu", source), write_case(tmp_path, "torch_library_wrap", wrapper)]
    honest, wrap = evaluate(resolve_problem("relu"), paths, harness_options(shared_home, "cpu", timing=True))
    assert honest.verdict == Verdict.CORRECT, honest.message
    assert any(f.code == "own_operator" for f in honest.flags)
    # Timed: a speedup, unless the harness withheld it because this shared machine was busy
    # (seen once in CI on the 2-core machine; withholding is the right answer to contention).
    withheld = {f.code for f in honest.flags} & {"baselines_disagree", "device_contended"}
    assert "candidate" in honest.timings and ("eager" in honest.speedups or withheld), honest.message
    assert wrap.verdict == Verdict.REJECTED and wrap.reason in (Reason.KERNEL_NOT_LAUNCHED, Reason.TORCH_FALLBACK)


def test_the_gpu_graph_candidates_pass_static_analysis() -> None:
    """The honest and the stale graph candidates of the GPU test are not rejected before they run
    (the stale one must be caught by its outputs, as a graph over stale inputs always is)."""
    from tests.harness.test_graph_replay_gpu import HONEST_GRAPH, STALE_GRAPH

    for source in (HONEST_GRAPH, STALE_GRAPH):
        analysis = analyze_candidate(source)
        assert analysis.rejections == (), [(f.code, f.message) for f in analysis.rejections]
        assert any(f.code == "cuda_graph_replay" for f in analysis.findings)
