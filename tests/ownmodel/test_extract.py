"""`extract_op` writes a ranked op as a problem file the loader takes and whose reference is the op."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from kernelwright.cli import main
from kernelwright.ownmodel import extract_op, load_model
from kernelwright.problems import resolve_problem
from kernelwright.problems.instance import materialize
from tests.ownmodel.conftest import EXAMPLE_SPEC


def _reference_matches_the_op(path: Path, op: torch._ops.OpOverload) -> None:
    """On every input set of the file (default and variants), its Model gives what `op` gives."""
    inst = materialize(resolve_problem(str(path)))
    model = inst.make_model()
    for inputs in inst.input_sets():
        torch.testing.assert_close(model(*inputs), op(*inputs), rtol=0, atol=0)


def test_the_top_op_becomes_a_problem_the_loader_accepts(model_file: Callable[[str], Path], tmp_path: Path) -> None:
    # One matmul that dwarfs everything else, so rank 1 is the same op however busy the CPU is.
    path = model_file("def make():\n    return nn.Linear(512, 512, bias=False), (torch.randn(256, 512),)\n")
    loaded = load_model(f"{path}:make", "cpu")
    written = extract_op(loaded, "1", tmp_path)
    problem = resolve_problem(str(written))
    assert problem.id == 1 and problem.name == "mm" and "extracted" in problem.meta.tags
    inst = materialize(problem)
    assert [tuple(t.shape) for t in inst.inputs] == [(256, 512), (512, 512)]
    _reference_matches_the_op(written, torch.ops.aten.mm.default)


def test_addmm_keeps_its_shapes_and_the_other_linear_as_a_variant(tmp_path: Path) -> None:
    path = extract_op(load_model(EXAMPLE_SPEC, "cpu"), "addmm", tmp_path)
    inst = materialize(resolve_problem(str(path)))
    shapes = [[tuple(t.shape) for t in inputs] for inputs in inst.input_sets()]
    assert sorted(shapes) == sorted([[(1024,), (128, 256), (256, 1024)], [(256,), (128, 1024), (1024, 256)]])
    _reference_matches_the_op(path, torch.ops.aten.addmm.default)


def test_gelu_and_layer_norm_references_equal_the_ops(tmp_path: Path) -> None:
    loaded = load_model(EXAMPLE_SPEC, "cpu")
    gelu = extract_op(loaded, "aten::gelu", tmp_path)
    _reference_matches_the_op(gelu, torch.ops.aten.gelu.default)
    norm = extract_op(loaded, "native_layer_norm", tmp_path)
    inst = materialize(resolve_problem(str(norm)))
    x, w, b = inst.inputs
    expected = torch.ops.aten.native_layer_norm.default(x, [1024], w, b, 1e-05)
    for got, want in zip(inst.make_model()(*inst.inputs), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("source", "op", "expected"),
    [
        (
            "def make():\n    return nn.Linear(4, 3), (torch.randn(2, 4),)\n",
            "linear",
            "a composite op, not seen below autograd",
        ),
        ("def make():\n    return nn.Linear(4, 3), (torch.randn(2, 4),)\n", "softmax", "no such op"),
        ("def make():\n    return nn.Linear(4, 3), (torch.randn(2, 4),)\n", "99", "ranks"),
        (
            "class M(nn.Module):\n    def forward(self, x):\n        return x.clone().add_(1)\n"
            "def make():\n    return M(), (torch.randn(64, 64),)\n",
            "add_",
            "writes into its inputs",
        ),
        (
            "class M(nn.Module):\n    def forward(self, x):\n        return x * x.sum().item()\n"
            "def make():\n    return M(), (torch.randn(64, 64),)\n",
            "_local_scalar_dense",
            "not tensors",
        ),
    ],
)
def test_an_op_that_cannot_be_extracted_is_one_line_and_exit_2(
    model_file: Callable[[str], Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source: str,
    op: str,
    expected: str,
) -> None:
    path = model_file(source)
    with pytest.raises(SystemExit) as info:
        main(["model", "extract", f"{path}:make", "--op", op, "--out", str(tmp_path / "out"), "--device", "cpu"])
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], lines


def test_cli_extract_writes_a_file_problems_show_takes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["model", "extract", EXAMPLE_SPEC, "--op", "gelu", "--out", str(tmp_path), "--device", "cpu"])
    assert info.value.code == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.parent == tmp_path and path.name.endswith("_gelu.py")
    with pytest.raises(SystemExit) as info:
        main(["problems", "show", str(path)])
    assert info.value.code == 0


_LISTS_AND_INDICES = """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)

    def forward(self, idx, y):
        e = self.emb(idx)
        return torch.cat([e, y], dim=-1)

def make():
    return M(), (torch.arange(64).reshape(4, 16), torch.randn(4, 16, 8))
"""


def test_a_tensor_list_and_integer_indices_are_written_faithfully(
    model_file: Callable[[str], Path], tmp_path: Path
) -> None:
    loaded = load_model(f"{model_file(_LISTS_AND_INDICES)}:make", "cpu")
    cat = materialize(resolve_problem(str(extract_op(loaded, "cat", tmp_path))))
    assert [tuple(t.shape) for t in cat.inputs] == [(4, 16, 32), (4, 16, 8)]
    torch.testing.assert_close(cat.make_model()(*cat.inputs), torch.cat(cat.inputs, -1), rtol=0, atol=0)
    emb = resolve_problem(str(extract_op(loaded, "embedding", tmp_path)))
    assert emb.meta.input_constraints == {1: "indices:64"}  # the range the trace saw: 0 to 63
    inst = materialize(emb)
    weight, idx = inst.inputs
    assert idx.dtype == torch.int64 and int(idx.min()) >= 0 and int(idx.max()) < 64
    torch.testing.assert_close(inst.make_model()(weight, idx), weight[idx], rtol=0, atol=0)
