"""`model extract --region` writes a submodule as a standalone problem whose parameters keep the
model's names, or refuses it in one line saying why."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from kernelwright.cli import main
from kernelwright.ownmodel import extract_region, load_model
from kernelwright.problems import resolve_problem
from kernelwright.problems.instance import materialize
from tests.ownmodel.conftest import EXAMPLE_SPEC


def _same_as_the_submodule(path: Path, submodule: torch.nn.Module) -> None:
    """The file's Model takes the submodule's state_dict strictly and then computes what it does,
    on every input set (default and variants)."""
    inst = materialize(resolve_problem(str(path)))
    model = inst.make_model().eval()
    model.load_state_dict(submodule.state_dict(), strict=True)
    with torch.no_grad():
        for inputs in inst.input_sets():
            torch.testing.assert_close(model(*inputs), submodule(*inputs), rtol=0, atol=0)


def test_cli_extract_region_writes_the_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["model", "extract", EXAMPLE_SPEC, "--region", "up", "--out", str(tmp_path), "--device", "cpu"])
    assert info.value.code == 0
    path = Path(capsys.readouterr().out.strip())
    problem = resolve_problem(str(path))
    assert problem.meta.region == {"kind": "module", "path": "up", "spec": EXAMPLE_SPEC}
    assert "region" in problem.meta.tags and problem.meta.dtype == "float32"
    inst = materialize(problem)
    assert inst.init_inputs == [256, 1024] and [tuple(t.shape) for t in inst.inputs] == [(128, 256)]
    _same_as_the_submodule(path, load_model(EXAMPLE_SPEC, "cpu").module.get_submodule("up"))
    with pytest.raises(SystemExit) as info:
        main(["problems", "show", str(path)])
    assert info.value.code == 0


def test_a_rank_names_a_region_and_norm_keeps_its_arguments(tmp_path: Path) -> None:
    loaded = load_model(EXAMPLE_SPEC, "cpu")
    path = extract_region(loaded, "norm", tmp_path)
    assert "eps=1e-05" in path.read_text()
    _same_as_the_submodule(path, loaded.module.get_submodule("norm"))
    ranked = extract_region(loaded, "1", tmp_path)
    assert ranked.name.startswith("1_region_")
    assert resolve_problem(str(ranked)).id == 1


_NAMED = """
from collections import OrderedDict

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ffn = nn.Sequential(OrderedDict(fc=nn.Linear(16, 32, dtype=torch.float64), act=nn.GELU("tanh")))

    def forward(self, x):
        return self.ffn(x) + self.ffn(x[:2]).sum()   # called twice, at two shapes

def make():
    return Block(), (torch.randn(6, 16, dtype=torch.float64),)
"""


def test_a_named_sequential_keeps_its_names_dtype_and_other_shapes(
    model_file: Callable[[str], Path], tmp_path: Path
) -> None:
    loaded = load_model(f"{model_file(_NAMED)}:make", "cpu")
    path = extract_region(loaded, "ffn", tmp_path)
    text = path.read_text()
    assert "OrderedDict([('fc', nn.Linear(in_features_fc, out_features_fc, bias=True, dtype=torch.float64))" in text
    problem = resolve_problem(str(path))
    assert problem.meta.dtype == "float64"
    inst = materialize(problem)
    assert [[tuple(t.shape) for t in s] for s in inst.input_sets()] == [[(6, 16)], [(2, 16)]]
    _same_as_the_submodule(path, loaded.module.get_submodule("ffn"))


_REFUSED = """
class Scale(nn.Module):
    def forward(self, x):
        return x * 2

class MyLinear(nn.Linear):
    pass

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = Scale()
        self.mine = MyLinear(8, 8)
        self.relu = nn.ReLU(inplace=True)
        self.bn = nn.BatchNorm1d(8)
        self.unused = nn.Linear(8, 8)

    def forward(self, x):
        return self.bn(self.relu(self.mine(self.scale(x))))

def make():
    return Block().eval(), (torch.randn(4, 8),)
"""


@pytest.mark.parametrize(
    ("region", "expected"),
    [
        ("nope", "has no submodule of that path"),
        ("scale", "a class of the model's own"),
        ("mine", "a subclass of nn.Linear"),
        ("relu", "writes into its inputs"),
        ("bn", "holds buffers"),
        ("unused", "never called"),
        ("99", "the profile ranks"),
    ],
)
def test_a_region_that_cannot_be_extracted_is_one_line_and_exit_2(
    model_file: Callable[[str], Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    region: str,
    expected: str,
) -> None:
    path, out = model_file(_REFUSED), tmp_path / "out"
    with pytest.raises(SystemExit) as info:
        main(["model", "extract", f"{path}:make", "--region", region, "--out", str(out), "--device", "cpu"])
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], lines
    assert not out.exists()


@pytest.mark.parametrize("flags", [[], ["--op", "1", "--region", "up"]])
def test_one_of_op_and_region(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["model", "extract", EXAMPLE_SPEC, *flags, "--device", "cpu"])
    assert info.value.code == 2
    assert "give one of --op and --region" in capsys.readouterr().err


def test_a_number_that_names_a_sequential_s_child_is_that_child(
    model_file: Callable[[str], Path], tmp_path: Path
) -> None:
    source = "def make():\n    return nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 4)), (torch.randn(2, 8),)\n"
    loaded = load_model(f"{model_file(source)}:make", "cpu")
    child = extract_region(loaded, "1", tmp_path)
    assert resolve_problem(str(child)).meta.region == {"kind": "module", "path": "1", "spec": loaded.spec}
    _same_as_the_submodule(child, loaded.module.get_submodule("1"))
    ranked = extract_region(loaded, "#1", tmp_path)
    assert ranked.name.startswith("1_region_")
