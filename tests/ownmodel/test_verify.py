"""`model verify`: the whole model against itself with a region replaced by its candidate, judged
by the harness (the path `kernelwright eval` takes), so a wrong candidate is caught there."""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from kernelwright.agent.nodes.coder import extract_code
from kernelwright.agent.scripts import mlp_region_cpu
from kernelwright.cli import main
from kernelwright.errors import UsageError
from kernelwright.harness.checks.static.analysis import analyze_candidate
from kernelwright.harness.options import TimingPlan
from kernelwright.ownmodel import RegionCandidate, load_model, write_verify
from kernelwright.problems import resolve_problem
from kernelwright.problems.execution import exec_as_module
from kernelwright.problems.instance import materialize
from kernelwright.tools import evaluate
from tests.ownmodel.conftest import EXAMPLE


def _candidates() -> tuple[Path, Path]:
    """The shipped `region_up-cpu` session's Linear kernel (correct: one dot product per output
    element plus the bias, parameters drawn as nn.Linear draws them and named as it names them),
    and the same kernel with the bias skipped (wrong), as files (paths the parametrised cases name)."""
    folder = Path(tempfile.mkdtemp(prefix="kw-test-verify-"))
    atexit.register(shutil.rmtree, folder, True)
    source, _ = extract_code(mlp_region_cpu.LINEAR, None)
    assert source is not None
    wrong = source.replace("acc + b[j];", "acc;  // wrong: the bias is skipped").replace(
        '"kw_mlp_region_linear"', '"kw_test_region_linear_no_bias"'
    )
    assert wrong.count("bias is skipped") == 1 and "kw_test_region_linear_no_bias" in wrong
    (folder / "linear_cpp.py").write_text(source)
    (folder / "linear_no_bias.py").write_text(wrong)
    return folder / "linear_cpp.py", folder / "linear_no_bias.py"


CORRECT, NO_BIAS = _candidates()

# The MLP example at a size that keeps the harness's trials and timing short on a CPU.
_SMALL_MLP = f"""
import sys
sys.path.insert(0, {str(EXAMPLE.parent)!r})
from mlp_block import mlp_block

def small():
    return mlp_block(batch=64, dim=128, hidden=256)

def broken():
    return mlp_block(batch=64, dim=128, hidden=256)[0], (torch.randn(64, 129),)
"""


@pytest.fixture
def small_mlp(model_file: Callable[[str, str], Path]) -> str:
    return f"{model_file(_SMALL_MLP, 'small_mlp.py')}:small"


def test_the_written_problem_is_the_model_and_the_candidate_passes_the_static_checks(
    small_mlp: str, tmp_path: Path
) -> None:
    loaded = load_model(small_mlp, "cpu")
    files = write_verify(loaded, [RegionCandidate("up", CORRECT)], tmp_path / "verify")
    inst = materialize(resolve_problem(str(files.problem)))
    torch.manual_seed(42)
    model = inst.make_model().eval()
    assert model.get_submodule("model").state_dict().keys() == loaded.module.state_dict().keys()
    with torch.no_grad():
        torch.testing.assert_close(model(*inst.inputs), loaded.module(*inst.inputs))
    source = files.candidate.read_text()
    assert "class _KwRegion0(nn.Module):" in source and "_KwRegion0(*[128, 256])" in source
    analysis = analyze_candidate(source)
    assert analysis.backend == "cpp" and not analysis.rejections, analysis.rejections
    region_problem, candidate = files.regions["up"]
    assert resolve_problem(str(region_problem)).meta.region == {"kind": "module", "path": "up", "spec": small_mlp}
    assert candidate == CORRECT


@pytest.mark.slow  # a C++ build and the harness's workers
def test_a_correct_candidate_is_correct_in_place_with_speedups(
    small_mlp: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The harness's timing as it is, with a shorter cap: a busy CI machine would spend 20 s on
    # each of the timing and the clean baselines before giving up on converging. One intra-op
    # thread, as every CPU harness test (tests/candidates.harness_options): on a 2-core machine
    # running other tests, a two-thread OpenMP region waits for a descheduled thread in every call,
    # and a profile that fell in such a window read 18 ms per call against 4.2 ms timed (a false
    # profile_mismatch, docs/harness.md: the noise models).
    short = functools.partial(
        evaluate.eval_options, timing_plan=TimingPlan(time_cap_s=3.0, max_reps=100), num_threads=1
    )
    monkeypatch.setattr(evaluate, "eval_options", short)
    args = ["model", "verify", small_mlp, "--region", f"up={CORRECT}", "--device", "cpu", "--baselines", "eager"]
    with pytest.raises(SystemExit) as info:
        main([*args, "--out", str(tmp_path / "verify"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    result = doc["result"]
    assert info.value.code == 0, result["message"]
    assert result["verdict"] == "correct" and result["policy"] == "engineering"
    assert set(result["timings"]) == {"candidate", "eager"} and result["timings"]["candidate"]["n"] > 0
    # A speedup with its interval, or the harness's word for a machine too busy to tell (as in
    # tests/harness/test_session.py): never a number it does not trust.
    withheld = {f["code"] for f in result["flags"]} & {"baselines_disagree", "device_contended"}
    eager = result["speedups"].get("eager")
    assert (eager is not None and eager["ci_low"] <= eager["ratio"] <= eager["ci_high"]) or withheld, result


@pytest.mark.slow  # a C++ build and the harness's workers
def test_a_candidate_that_skips_the_bias_is_incorrect_in_place_and_alone(
    small_mlp: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["model", "verify", small_mlp, "--region", f"up={NO_BIAS}", "--device", "cpu", "--no-timing", "--each"]
    with pytest.raises(SystemExit) as info:
        main([*args, "--out", str(tmp_path / "verify")])
    assert info.value.code == 1
    text = capsys.readouterr().out
    assert "end to end: incorrect (output_mismatch)" in text
    assert "region up: incorrect (output_mismatch)" in text


@pytest.mark.parametrize(
    ("factory", "regions", "expected"),
    [
        ("small", ["up"], "must be PATH=CANDIDATE.py"),
        ("small", ["up=missing.py"], "does not exist"),
        ("small", [f"nope={CORRECT}"], "has no submodule of that path"),
        ("small", [f"up={CORRECT}", f"up={CORRECT}"], "given twice"),
        ("broken", [f"up={CORRECT}"], "do not fit the module"),
        ("nofactory", [f"up={CORRECT}"], "has no 'nofactory'"),
    ],
)
def test_a_bad_verify_is_one_line_and_exit_2(
    model_file: Callable[[str, str], Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    factory: str,
    regions: list[str],
    expected: str,
) -> None:
    spec = f"{model_file(_SMALL_MLP, 'small_mlp.py')}:{factory}"
    flags = [arg for region in regions for arg in ("--region", region)]
    with pytest.raises(SystemExit) as info:
        main(["model", "verify", spec, *flags, "--device", "cpu", "--out", str(tmp_path / "verify")])
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], lines


def test_two_regions_share_one_copy_of_a_candidate_and_two_files_are_renamed_apart(
    small_mlp: str, tmp_path: Path
) -> None:
    loaded = load_model(small_mlp, "cpu")
    same = write_verify(loaded, [RegionCandidate("up", CORRECT), RegionCandidate("down", CORRECT)], tmp_path / "a")
    source = same.candidate.read_text()
    assert source.count("class _KwRegion0(") == 1 and "_KwRegion1" not in source
    assert "_KwRegion0(*[128, 256])" in source and "_KwRegion0(*[256, 128])" in source
    # Run in this process (the fast form builds in a second): the model with both Linears replaced
    # computes what the model computes.
    module = exec_as_module(source, same.candidate, "kernelwright_test_verify_candidate")
    torch.manual_seed(42)
    patched = module.ModelNew().eval()
    x = torch.randn(64, 128)
    with torch.no_grad():
        torch.testing.assert_close(patched(x), patched.model(x), rtol=1e-4, atol=1e-4)
        assert patched.model.up.forward.__func__ is torch.nn.Linear.forward  # put back after the call
    two = write_verify(loaded, [RegionCandidate("up", CORRECT), RegionCandidate("down", NO_BIAS)], tmp_path / "b")
    source = two.candidate.read_text()
    assert "_kw0_lib = load_kernels(" in source and "_kw1_lib = load_kernels(" in source
    analysis = analyze_candidate(source)
    assert len(analysis.extensions) == 2 and not analysis.rejections, analysis.rejections


def test_nested_regions_are_refused(model_file: Callable[[str, str], Path], tmp_path: Path) -> None:
    source = "def make():\n    return nn.Sequential(nn.Sequential(nn.Linear(8, 8), nn.GELU())), (torch.randn(2, 8),)\n"
    loaded = load_model(f"{model_file(source, 'nested.py')}:make", "cpu")
    with pytest.raises(UsageError, match=r"'0\.0' is inside --region '0'"):
        write_verify(loaded, [RegionCandidate("0", CORRECT), RegionCandidate("0.0", CORRECT)], tmp_path)
