"""The real-size own-model flow's parts (scripts/gpu_ownmodel.sh): the transformer block example
offers its `mlp.act_norm` region (GELU then LayerNorm) as a standalone problem, the scripted
sessions `region_mlp_act_norm-cuda` / `-cpu` are found by that problem's name and pass the static
checks for a bfloat16 problem, and their kernels compute the module (the C++ one here, built in a
second or two; the CUDA one on a GPU, at row lengths and alignments the harness's trials at the
recorded shape never reach)."""

from __future__ import annotations

import ctypes
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from kernelwright import fastext
from kernelwright.agent.batch import script_for
from kernelwright.agent.nodes.coder import extract_code
from kernelwright.agent.scripts import SCRIPTS, act_norm_region
from kernelwright.harness.checks.static.analysis import analyze_candidate
from kernelwright.ownmodel.export.inline import to_load_inline
from kernelwright.ownmodel.loading import load_model
from kernelwright.ownmodel.region_problem import extract_region
from kernelwright.ownmodel.regions import find_regions, standalone_note, trace_modules
from kernelwright.problems.candidate.loader import load_candidate
from kernelwright.problems.loader import load_problem_file
from tests.ownmodel.conftest import EXAMPLE

SPEC = f"{EXAMPLE.with_name('transformer_block.py')}:transformer_block"


def candidate_source(name: str) -> str:
    [reply] = SCRIPTS[name]().script["coder"]
    assert isinstance(reply, str)
    source, why = extract_code(reply, None)
    assert source is not None, why
    return source


def reference(n: int, device: str = "cpu") -> nn.Module:
    """The region as the model builds it, its LayerNorm's affine away from ones and zeros."""
    module = nn.Sequential(nn.GELU(), nn.LayerNorm(n, dtype=torch.bfloat16)).to(device).eval()
    with torch.no_grad():
        module[1].weight.add_(0.3 * torch.randn_like(module[1].weight))
        module[1].bias.add_(0.3 * torch.randn_like(module[1].bias))
    return module


def load_winner(name: str, tmp_path: Path) -> Any:
    path = tmp_path / f"{name}.py"
    path.write_text(candidate_source(name))
    return load_candidate(path, tmp_path / "cache")


def test_the_transformer_block_offers_its_act_norm_region_standalone(tmp_path: Path) -> None:
    loaded = load_model(SPEC)
    traces = trace_modules(loaded)
    regions = {t.path for t in find_regions(traces)}
    assert regions == {"norm1", "qkv", "proj", "norm2", "mlp.fc1", "mlp.act_norm", "mlp.fc2"}, regions
    assert standalone_note(traces["mlp.act_norm"]) == ""
    problem = load_problem_file(extract_region(loaded, "mlp.act_norm", tmp_path))
    assert problem.name == act_norm_region.PROBLEM and problem.meta.dtype == "bfloat16"
    assert "nn.GELU(approximate='none'), nn.LayerNorm(normalized_shape_1, eps=1e-05" in problem.source


@pytest.mark.parametrize(("device", "name"), [("cuda", act_norm_region.NAME_CUDA), ("cpu", act_norm_region.NAME_CPU)])
def test_the_session_is_found_by_the_problem_s_name_and_passes_the_static_checks(device: str, name: str) -> None:
    assert script_for(act_norm_region.PROBLEM, device) == name
    session = SCRIPTS[name]()
    assert session.expected_verdicts == ["correct"]
    assert len(session.script["planner"]) == len(session.script["reviewer"]) == 1
    source = candidate_source(name)
    analysis = analyze_candidate(source, problem_dtype="bfloat16")
    assert analysis.backend == ("cuda" if device == "cuda" else "cpp") and not analysis.rejections
    # The fast form's launch on the stream it is handed is the one flag (as the relu demo's).
    assert {f.code for f in analysis.findings} <= {"side_stream"}, analysis.findings
    exported = to_load_inline(source, name)  # what `export` writes: plain load_inline
    assert "load_inline(" in exported and "import kernelwright" not in exported and "from kernelwright" not in exported


def test_the_cpu_kernel_computes_the_module(tmp_path: Path) -> None:
    winner = load_winner(act_norm_region.NAME_CPU, tmp_path)
    torch.manual_seed(0)
    for shape in [(2, 3, 40), (5, 512), (1, 7)]:
        ref = reference(shape[-1])
        new = winner.ModelNew([shape[-1]])
        new.load_state_dict(ref.state_dict(), strict=True)  # the model's names: 1.weight, 1.bias
        x = torch.randn(shape, dtype=torch.bfloat16) * 3
        with torch.no_grad():
            torch.testing.assert_close(new(x), ref(x), atol=2e-2, rtol=2e-2)
    with pytest.raises(ValueError, match="bfloat16 rows of 7 values"):
        new(torch.randn(2, 8, dtype=torch.bfloat16))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (compiles without a GPU)")
def test_the_cuda_kernel_compiles_with_nvcc_and_exports_its_entry_point(tmp_path: Path) -> None:
    library = fastext.compile_library(tmp_path, "kw_act_norm_cuda", act_norm_region.CUDA_SOURCE, "cuda", (), "sm_90a")
    lib = ctypes.CDLL(str(library))  # loads without a GPU: the runtime is only reached at a call
    assert hasattr(lib, "gelu_layer_norm")


@pytest.mark.gpu
def test_the_cuda_kernel_computes_the_module_at_any_row_length_and_alignment(tmp_path: Path) -> None:
    winner = load_winner(act_norm_region.NAME_CUDA, tmp_path)
    torch.manual_seed(0)
    # 16-byte path (n % 8 == 0), scalar path, a row past 48 KiB of shared memory, the real size.
    for shape in [(4, 77, 1000), (3, 1001), (2, 3), (6, 20000), (8, 1024, 4096)]:
        ref = reference(shape[-1], "cuda")
        new = winner.ModelNew([shape[-1]]).cuda()
        new.load_state_dict(ref.state_dict(), strict=True)
        x = torch.randn(shape, dtype=torch.bfloat16, device="cuda") * 3
        with torch.no_grad():
            torch.testing.assert_close(new(x), ref(x), atol=2e-2, rtol=2e-2)
            # A row not 16-byte aligned takes the scalar path.
            base = torch.randn(shape[-1] * 2 + 1, dtype=torch.bfloat16, device="cuda")
            x1, y1 = (
                base[1 : shape[-1] + 1].view(1, -1),
                torch.empty(1, shape[-1] + 1, dtype=torch.bfloat16, device="cuda"),
            )
            w, b = new.get_submodule("1").weight, new.get_submodule("1").bias
            winner.lib.gelu_layer_norm(x1, w, b, y1[:, 1:], 1, shape[-1], 1e-5)
            torch.testing.assert_close(y1[:, 1:], ref(x1), atol=2e-2, rtol=2e-2)
    torch.cuda.synchronize()
