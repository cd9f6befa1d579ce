"""The harness on a GPU: CUDA and Triton candidates, CUDA reward hacks, crash containment, the
CUDA oracles, and timing against eager and torch.compile. Marked `gpu` (skipped without one)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from kernelwright.harness.options import EvalOptions
from kernelwright.harness.result import EvalResult
from kernelwright.harness.session import evaluate
from kernelwright.problems import resolve_problem
from kernelwright.problems.solutions_index import all_solutions
from tests.candidates import harness_options, write_case
from tests.candidates.cpu_kit import Case
from tests.candidates.gpu_kit import CASES, CORRECT_CUDA, GEMM_WITH_OWN_EPILOGUE, SIDE_STREAM, SPIN

pytestmark = pytest.mark.gpu


def _opts(home: Path, **kw: object) -> EvalOptions:
    return harness_options(home, "cuda", **kw)


def _write(folder: Path, case: Case) -> Path:
    return write_case(folder, case.name, case.source())


@pytest.fixture(scope="module")
def gpu_results(tmp_path_factory: pytest.TempPathFactory, shared_home: Path) -> dict[str, EvalResult]:
    folder = tmp_path_factory.mktemp("gpu-cases")
    # Timing on: some cases cheat only inside the timed loop.
    results = evaluate(resolve_problem("relu"), [_write(folder, c) for c in CASES], _opts(shared_home, timing=True))
    return {Path(r.candidate).stem: r for r in results}


@pytest.mark.xdist_group("gpu_cases")  # one worker evaluates the shared batch
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gpu_case_gets_its_verdict(gpu_results: dict[str, EvalResult], case: Case) -> None:
    result = gpu_results[case.name]
    assert case.accepts(result.verdict.value, result.reason.value if result.reason else None), result.message


def test_hidden_side_stream_is_rejected_at_default_size(tmp_path: Path, shared_home: Path) -> None:
    [result] = evaluate(
        resolve_problem("relu"),
        [_write(tmp_path, SIDE_STREAM)],
        _opts(shared_home, size="default", timing=True, trials=1),
    )
    assert (result.verdict.value, result.reason) == ("rejected", "side_stream"), result.message
    assert not result.speedups  # the baselines timed beside it are not trusted either


def test_spinning_kernel_times_out_and_the_next_candidate_runs(tmp_path: Path, shared_home: Path) -> None:
    results = evaluate(
        resolve_problem("relu"),
        [_write(tmp_path, SPIN), _write(tmp_path, CORRECT_CUDA)],
        _opts(shared_home, run_timeout_s=40),
    )
    # Our timeout, or (where the driver runs a watchdog) the GPU aborting the kernel: contained either way.
    assert (results[0].verdict.value, results[0].reason) in {
        ("timeout", "correctness_timeout"),
        ("crashed", "launch_failure"),
    }, results[0].message
    assert results[1].verdict.value == "correct", results[1].message


def test_correct_cuda_kernel_is_timed_against_eager_and_compile(tmp_path: Path, shared_home: Path) -> None:
    [result] = evaluate(
        resolve_problem("relu"),
        [_write(tmp_path, CORRECT_CUDA)],
        _opts(shared_home, size="default", timing=True, baselines=("eager", "compile")),
    )
    assert result.verdict.value == "correct", result.message
    assert result.outputs_handed_over == "cuda-ipc"  # device to device, no files (`cuda_ipc`)
    assert {"candidate", "eager", "compile"} <= set(result.timings)
    # Run it alone: beside other GPU tests the device is shared, and the harness then rightly
    # withholds the speedups (device_contended / baselines_disagree) instead of reporting them.
    assert set(result.speedups) >= {"eager", "compile"}, (result.message, [f.code for f in result.flags])
    for name in ("eager", "compile"):
        s = result.speedups[name]
        assert 0.3 < s.ratio < 3.0 and s.ci_low <= s.ratio <= s.ci_high  # a plain relu is about as fast as PyTorch's
    assert result.timings["candidate"].rel_ci_halfwidth < 0.05
    assert result.compile_time_s is not None and result.hardware["name"]


_CUDA_ORACLES: dict[str, list] = defaultdict(list)
for _e in all_solutions():
    if _e.backend == "cuda":
        _CUDA_ORACLES[_e.problem].append(_e)


@pytest.mark.parametrize("problem_name", sorted(_CUDA_ORACLES))
def test_cuda_oracles_get_their_expected_verdicts(problem_name: str, shared_home: Path) -> None:
    entries = _CUDA_ORACLES[problem_name]
    results = evaluate(resolve_problem(problem_name), [e.path for e in entries], _opts(shared_home))
    for entry, result in zip(entries, results, strict=True):
        got = (result.verdict.value, result.reason.value if result.reason else None)
        assert got == (entry.expected, entry.reason), f"{entry.path.name}: {result.message}"


def test_a_library_gemm_with_an_own_epilogue_under_each_policy(tmp_path: Path, shared_home: Path) -> None:
    """At the problem's default size (4096^3): strict rejects it (cuBLAS does the main work);
    engineering accepts it and reports the library share."""
    path = tmp_path / "gemm_epilogue.py"
    path.write_text(GEMM_WITH_OWN_EPILOGUE)
    problem = resolve_problem("gemm_bias_relu")
    for policy, verdict in (("strict", "rejected"), ("engineering", "correct")):
        [result] = evaluate(problem, [path], _opts(shared_home, size="default", trials=2, policy=policy))
        assert result.verdict.value == verdict, (policy, result.message)
        assert result.library_share is not None and result.library_share > 0.5, result.message
