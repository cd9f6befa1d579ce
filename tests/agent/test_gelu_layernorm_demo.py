"""The GPU demo (issue #29): `gelu_layernorm_bf16` at its default size with the scripted session
`gelu_layernorm_bf16-cuda`; the CPU demo stays relu at the small size. Without a GPU: the demo's
configuration per device, the session's registration, its candidates' forward against the problem
(the kernels replaced by recorders that check every argument) and every CUDA source it holds
compiled with nvcc for sm_90, both through scripts/check_cuda_sources.py. On a GPU: the demo end
to end."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelwright.agent.batch import script_for
from kernelwright.agent.demo import demo_config, is_demo_problem
from kernelwright.agent.nodes.coder import extract_code
from kernelwright.agent.scripts import SCRIPTS, act_norm_region, gelu_layernorm_cuda
from kernelwright.config import load_settings
from kernelwright.errors import UsageError
from kernelwright.problems import resolve_problem
from tests.agent.helpers import run_cli

CHECKER = Path(__file__).resolve().parents[2] / "scripts" / "check_cuda_sources.py"
VERDICTS = ["correct", "build_error", "correct", "rejected", "correct", "correct"]


@pytest.fixture(scope="module")
def checker() -> types.ModuleType:
    """scripts/check_cuda_sources.py, imported as a module."""
    spec = importlib.util.spec_from_file_location("check_cuda_sources", CHECKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def candidate_files(folder: Path) -> list[Path]:
    """The session's six candidates as the coder's replies make them (edits applied to the draft)."""
    draft: str | None = None
    files = []
    for index, reply in enumerate(SCRIPTS[gelu_layernorm_cuda.NAME]().script["coder"], start=1):
        assert isinstance(reply, str)
        source, why = extract_code(reply, draft)
        assert source is not None, why
        draft = source
        files.append(folder / f"{index:03d}.py")
        files[-1].write_text(source)
    return files


def test_on_a_gpu_the_demo_runs_gelu_layernorm_at_the_default_size_and_on_a_cpu_relu_small() -> None:
    settings = load_settings()
    gpu = demo_config(settings, "cuda")
    assert (gpu.problem, gpu.size, gpu.scripted, gpu.backend) == (
        "gelu_layernorm_bf16",
        "default",
        "gelu_layernorm_bf16-cuda",
        "cuda",
    )
    assert gpu.num_threads is None and (gpu.target, gpu.max_rounds, gpu.coder_retries) == (1.0, 4, 1)
    cpu = demo_config(settings, "cpu")
    assert (cpu.problem, cpu.size, cpu.scripted, cpu.backend, cpu.num_threads) == (
        "relu",
        "small",
        "relu-cpu",
        "cpp",
        1,
    )
    assert resolve_problem(gpu.problem).meta.dtype == "bfloat16"
    assert is_demo_problem("level2/17_gelu_layernorm_bf16", "cuda") and not is_demo_problem("relu", "cuda")
    assert is_demo_problem("1_relu", "cpu") and not is_demo_problem("level1/6_leaky_relu", "cpu")
    with pytest.raises(UsageError, match="no scripted demo session for tpu"):
        demo_config(settings, "tpu")


def test_the_session_is_registered_under_its_problem_s_name_and_scripts_the_demo_s_rounds() -> None:
    assert script_for(gelu_layernorm_cuda.PROBLEM, "cuda") == gelu_layernorm_cuda.NAME
    session = SCRIPTS[gelu_layernorm_cuda.NAME]()
    assert session.name == "gelu_layernorm_bf16-cuda (scripted)" and session.expected_verdicts == VERDICTS
    assert [r["decision"] for r in session.script["reviewer"]] == ["iterate", "iterate", "abandon", "iterate"]
    # The fused kernel is the own-model session's, byte for byte (its GPU test covers every row length).
    assert gelu_layernorm_cuda.SOURCES["fused"] == act_norm_region.CUDA_SOURCE


def test_every_candidate_s_forward_calls_its_kernel_as_the_c_function_declares(
    checker: types.ModuleType, tmp_path: Path
) -> None:
    """At the problem's small size on the CPU (default inputs and both variants), each candidate
    holds the Model's parameters under the same seed, passes contiguous bf16 tensors for every
    `__nv_bfloat16*` and ints and a float for the rest, and returns the Model's shape and dtype."""
    for path in candidate_files(tmp_path):
        report = checker.FileReport(path.name)
        problems: list[str] = []
        module = checker.load_file(path, report, problems)
        assert module is not None and report.errors == [], (path.name, report.errors)
        [capture] = report.captures
        assert capture.functions == {"gelu_layer_norm": "ptr, ptr, ptr, ptr, i64, i64, f32, stream"}
        assert checker.check_forward(module, gelu_layernorm_cuda.PROBLEM, None, problems) == [], path.name
        calls = module.lib.gelu_layer_norm.calls
        assert calls == 3, (path.name, calls)  # once per input set: the kernel is always launched


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (compiles without a GPU)")
def test_every_cuda_source_of_the_session_compiles_for_sm_90_but_the_scripted_build_error(
    checker: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELWRIGHT_CUDA_ARCH", "sm_90")  # fastext's nvcc command reads it
    captures = {}
    for path in candidate_files(tmp_path):
        report = checker.FileReport(path.name)
        checker.load_file(path, report, [])
        [capture] = report.captures
        captures.setdefault(capture.source, capture)  # the hack and its repair hold round 2's source
    assert set(captures) == set(gelu_layernorm_cuda.SOURCES.values())
    with ThreadPoolExecutor(2) as pool:
        compiled = pool.map(lambda capture: checker.compile_capture(capture, tmp_path), captures.values())
        errors = dict(zip(captures, compiled, strict=True))
    broken = errors.pop(gelu_layernorm_cuda.SOURCES["broken"])
    assert broken is not None and 'identifier "lane" is undefined' in broken, broken
    assert list(errors.values()) == [None, None, None], errors


@pytest.mark.gpu
@pytest.mark.slow
def test_the_cuda_demo_runs_as_scripted_at_the_default_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = tmp_path / "events.jsonl"
    code = run_cli(["demo", "--device", "cuda", "--events-json", str(events)])
    shown = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert code == 0, shown
    assert "(gelu_layernorm_bf16, --size default)" in shown and "the demo ran as scripted" in shown
    assert "torch_fallback" in shown
    [run_dir] = list((tmp_path / "runs").iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["scripted"] == gelu_layernorm_cuda.NAME and summary["accepted"]
    assert [c["verdict"] for c in summary["candidates"]] == VERDICTS
    assert (run_dir / "best.py").read_text() == (run_dir / "candidates" / "006.py").read_text()
    first = json.loads(events.read_text().splitlines()[0])
    assert first["kind"] == "run_started" and first["scripted"] == gelu_layernorm_cuda.NAME
