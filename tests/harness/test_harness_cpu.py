"""The whole harness on the CPU: real C++ builds, real fuzzing, real reward-hack checks.

Every relu case is evaluated in ONE harness call (one reference run, parallel builds, one shared
extension build), then each case's verdict and reason are asserted separately.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kernelwright.errors import ProblemError
from kernelwright.harness.options import EvalOptions
from kernelwright.harness.result import EvalResult
from kernelwright.harness.session import evaluate
from kernelwright.problems import load_problem_file, resolve_problem
from tests.candidates import harness_options, write_case
from tests.candidates.cpu_kit import CASES, CORRECT, TIMING_CASES, TINY_PROBLEM, ZEROS_FOR_TINY, Case, _model

pytestmark = pytest.mark.slow


def _opts(home: Path, **kw: object) -> EvalOptions:
    return harness_options(home, "cpu", **kw)


def _write(folder: Path, case: Case) -> Path:
    return write_case(folder, case.name, case.source())


@pytest.fixture(scope="session")
def relu_results(tmp_path_factory: pytest.TempPathFactory, shared_home: Path) -> dict[str, EvalResult]:
    folder = tmp_path_factory.mktemp("relu-cases")
    paths = [_write(folder, case) for case in CASES]
    results = evaluate(resolve_problem("relu"), paths, _opts(shared_home))
    return {Path(r.candidate).stem: r for r in results}


@pytest.mark.xdist_group("relu_cases")  # one worker evaluates the shared batch
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_relu_case_gets_its_verdict(relu_results: dict[str, EvalResult], case: Case) -> None:
    result = relu_results[case.name]
    assert case.accepts(result.verdict.value, result.reason.value if result.reason else None), result.message
    assert result.message  # a readable reason for the agent and the user
    if case.verdict == "correct":
        assert len(result.trials) >= 7 and all(t.passed for t in result.trials)
        assert any(t.reused_addresses for t in result.trials)  # address reuse exercised
        assert not any(f.severity == "reject" for f in result.flags)
    if case.reason == "compile_error":  # the compiler's own error line, not only torch's summary
        assert re.search(r"main\.cpp:\d+: error: expected primary-expression", result.message), result.message


@pytest.mark.xdist_group("relu_timed")  # builds CORRECT first: the next test finds it cached
def test_timing_phase_hacks_get_their_verdicts(tmp_path: Path, shared_home: Path) -> None:
    """With timing on: a candidate that cheats only inside the timed loop, and one that patches
    the harness's timing code, are rejected with the reasons that name what they did."""
    paths = [_write(tmp_path, case) for case in [CORRECT, *TIMING_CASES]]
    results = evaluate(resolve_problem("relu"), paths, _opts(shared_home, timing=True))
    assert results[0].verdict.value == "correct" and results[0].limits["timed_outputs_checked"] == 4
    for case, result in zip(TIMING_CASES, results[1:], strict=True):
        assert case.accepts(result.verdict.value, result.reason.value if result.reason else None), (
            case.name,
            result.message,
        )


def test_engineering_policy_accepts_library_work_beside_an_own_kernel(tmp_path: Path, shared_home: Path) -> None:
    """`--policy engineering`: PyTorch may do part of the work when the candidate's own kernel is
    on the hot path (the library share is reported); a kernel run on one element beside PyTorch's
    op is still a fallback."""
    library_then_own = Case(
        "library_then_own", _model("        return kit.scale_forward(torch.relu(x), 1.0)"), "correct", None
    )
    token_kernel = next(c for c in CASES if c.name == "torch_does_the_work")
    paths = [_write(tmp_path, library_then_own), _write(tmp_path, token_kernel)]
    # 4M elements: enough work that a call's fixed cost does not pass for a kernel's share.
    problem_file = tmp_path / "relu_4m.py"
    problem_file.write_text(TINY_PROBLEM.replace("x * 1e-7", "torch.relu(x)").replace("(32, 64)", "(2048, 2048)"))
    problem = load_problem_file(problem_file)
    mixed, token = evaluate(problem, paths, _opts(shared_home, policy="engineering", trials=3))
    assert (mixed.verdict.value, mixed.policy) == ("correct", "engineering"), mixed.message
    assert mixed.library_share is not None and 0.0 < mixed.library_share < 0.95
    assert "library share" in mixed.message
    assert (token.verdict.value, token.reason.value if token.reason else None) == ("rejected", "torch_fallback")
    assert "policy engineering" in token.message


def test_constant_output_is_caught_when_the_reference_is_near_zero(tmp_path: Path, shared_home: Path) -> None:
    problem_file = tmp_path / "tiny.py"
    problem_file.write_text(TINY_PROBLEM)
    [result] = evaluate(load_problem_file(problem_file), [_write(tmp_path, ZEROS_FOR_TINY)], _opts(shared_home))
    assert (result.verdict.value, result.reason) == ("incorrect", "constant_output"), result.message


@pytest.mark.xdist_group("relu_timed")  # after the timing hacks, which built the same source
def test_correct_candidate_is_timed_against_eager_and_cached(tmp_path: Path, shared_home: Path) -> None:
    path = _write(tmp_path, CORRECT)
    [result] = evaluate(resolve_problem("relu"), [path], _opts(shared_home, timing=True))
    assert result.verdict.value == "correct", result.message
    assert result.build_cached is True  # the session's earlier build of the same source was reused
    assert set(result.timings) == {"candidate", "eager"}
    assert result.timings["candidate"].n >= 10 and result.timings["candidate"].median_ms > 0
    speedup = result.speedups["eager"]
    assert speedup.ci_low <= speedup.ratio <= speedup.ci_high
    assert result.phase_seconds["timing"] > 0 and result.versions["torch"]


def test_torch_compile_baseline_is_timed_and_its_compile_time_reported(tmp_path: Path, shared_home: Path) -> None:
    [result] = evaluate(
        resolve_problem("relu"),
        [_write(tmp_path, CORRECT)],
        _opts(shared_home, timing=True, baselines=("eager", "compile")),
    )
    assert result.verdict.value == "correct", result.message
    assert "compile" in result.timings and result.compile_time_s is not None and result.compile_time_s > 0


def test_suspicious_speedup_is_reverified_and_a_process_dependent_kernel_fails(
    tmp_path: Path, shared_home: Path
) -> None:
    honest = _write(tmp_path, CORRECT)
    # Workers share no writable folder any more (the build and compile caches are the harness's):
    # the process tells itself apart by its own job file's folder instead.
    cheat = Case(
        "correct_only_in_first_process",
        _model(
            "        out = kit.relu_forward(x)\n        return out if FIRST else out + 1.0",
            extra="import os, sys\nFIRST = 'reverify-' not in os.path.abspath(sys.argv[-1])\n",
        ),
        "rejected",
        "unverified_speedup",
    )
    results = evaluate(
        resolve_problem("relu"),
        [honest, _write(tmp_path, cheat)],
        _opts(shared_home, timing=True, suspicious_speedup=0.0),
    )
    # The honest kernel stays correct; on a loaded machine its small re-timed speedup may not
    # reproduce within 2x, and then the fresh process's figures are what is reported.
    assert results[0].verdict.value == "correct" and results[0].suspicious, results[0].message
    assert any(f.code in ("suspicious_speedup", "speedup_not_reproduced") for f in results[0].flags)
    # Under load the timing beside the cheat may be one the machine could not tell (the baselines
    # disagree with their clean times, or the interval is too wide): then no speedup is reported,
    # so nothing asks for a re-verification. The cheat gains no number that way; it is judged
    # again until a timing stands (CI once withheld it: eager 0.076 ms beside, 0.039 ms clean).
    cheated = results[1]
    for _ in range(2):
        withheld = {f.code for f in cheated.flags} & {"baselines_disagree", "device_contended"}
        if cheated.verdict.value != "correct" or not withheld:
            break
        assert cheated.speedups == {}, cheated.message
        [cheated] = evaluate(
            resolve_problem("relu"), [Path(cheated.candidate)], _opts(shared_home, timing=True, suspicious_speedup=0.0)
        )
    assert (cheated.verdict.value, cheated.reason) == ("rejected", "unverified_speedup"), cheated.message


def test_infinite_loop_times_out_and_the_next_candidate_still_runs(tmp_path: Path, shared_home: Path) -> None:
    hang = Case(
        "hangs",
        _model(
            "        out = kit.relu_forward(x)\n        while out.numel() > 0:\n            pass\n        return out"
        ),
        "timeout",
        "correctness_timeout",
    )
    paths = [_write(tmp_path, hang), _write(tmp_path, CORRECT)]
    results = evaluate(resolve_problem("relu"), paths, _opts(shared_home, run_timeout_s=15))
    assert (results[0].verdict.value, results[0].reason) == ("timeout", "correctness_timeout")
    assert results[1].verdict.value == "correct"


def test_stale_build_lock_does_not_block_the_next_build(tmp_path: Path, shared_home: Path) -> None:
    cache = tmp_path / "cache"
    path = _write(tmp_path, CORRECT)
    [first] = evaluate(resolve_problem("relu"), [path], _opts(shared_home, build_cache=cache))
    assert first.build_cached is False
    locks = list(cache.rglob("*.so"))
    assert locks
    (locks[0].parent / "lock").write_text("left by a killed build")  # torch's FileBaton file
    [second] = evaluate(resolve_problem("relu"), [path], _opts(shared_home, build_cache=cache, build_timeout_s=120))
    assert second.verdict.value == "correct" and second.build_cached is True
    assert not (locks[0].parent / "lock").exists()


def test_evidence_folder_holds_source_log_and_result(tmp_path: Path, shared_home: Path) -> None:
    out = tmp_path / "evidence"
    path = _write(tmp_path, CORRECT)
    evaluate(resolve_problem("relu"), [path], _opts(shared_home, out_dir=out))
    folder = out / CORRECT.name
    assert (folder / "candidate.py").read_text() == path.read_text()
    assert EvalResult.load(folder / "result.json").verdict.value == "correct"
    assert (folder / "build-and-run.log").exists()
    assert os.path.getsize(folder / "result.json") > 100


def test_a_reference_that_fails_is_a_problem_error_not_a_verdict(tmp_path: Path, shared_home: Path) -> None:
    problem_file = tmp_path / "broken_forward.py"
    problem_file.write_text(TINY_PROBLEM.replace("return x * 1e-7", "raise ValueError('reference bug')"))
    with pytest.raises(ProblemError, match="the reference itself failed"):
        evaluate(load_problem_file(problem_file), [_write(tmp_path, CORRECT)], _opts(shared_home))
