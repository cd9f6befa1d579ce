"""Module regions: the largest submodules whose ops form one fusible chain, ranked by their time."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.hardware_specs.ceilings import Ceilings
from kernelwright.ownmodel import ModelReport, load_model, rank_regions
from kernelwright.ownmodel.regions import find_regions, fusible, trace_modules
from tests.ownmodel.conftest import EXAMPLE_SPEC

ATTENTION_SPEC = f"{Path(EXAMPLE_SPEC.rpartition(':')[0]).parent / 'attention_block.py'}:attention_block"


def test_the_mlp_s_regions_are_its_layers_ranked_by_time() -> None:
    # The block has two matmuls, so it is no region itself; each of its layers is one.
    rows = rank_regions(load_model(EXAMPLE_SPEC, "cpu"), iterations=2)
    by_path = {r.path: r for r in rows}
    assert set(by_path) == {"up", "norm", "act", "down"}
    assert by_path["up"].ops == ["addmm"] and by_path["up"].matmuls == 1 and by_path["up"].module == "Linear"
    assert by_path["norm"].ops == ["native_layer_norm"] and by_path["norm"].matmuls == 0
    assert by_path["up"].inputs[0].shape == [128, 256] and by_path["down"].inputs[0].shape == [128, 1024]
    assert [r.rank for r in rows] == [1, 2, 3, 4]
    assert [r.time_s for r in rows] == sorted((r.time_s for r in rows), reverse=True)
    assert all(r.time_s > 0 and r.calls == 1 and r.standalone_note == "" for r in rows)
    assert 0 < sum(r.share for r in rows) <= 1 + 1e-9


_CHAIN = """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ffn = nn.Sequential(nn.Linear(32, 64), nn.GELU())   # one matmul and its epilogue: fusible
        self.head = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 8))  # two matmuls: each layer is a region
        self.scale = Scale()

    def forward(self, x):
        return self.scale(self.head(self.ffn(x)))

class Scale(nn.Module):
    def forward(self, x):
        return x * 2

def make():
    return Block(), (torch.randn(4, 32),)
"""


def test_a_chain_is_one_region_and_two_matmuls_are_not(model_file: Callable[[str], Path]) -> None:
    loaded = load_model(f"{model_file(_CHAIN)}:make", "cpu")
    traces = trace_modules(loaded)
    assert fusible(traces["ffn"].calls) and not fusible(traces["head"].calls) and not fusible(traces[""].calls)
    assert [t.path for t in find_regions(traces)] == ["ffn", "head.0", "head.1", "scale"]
    rows = {r.path: r for r in rank_regions(loaded, iterations=1)}
    assert rows["ffn"].module == "Sequential(Linear, GELU)" and rows["ffn"].ops == ["addmm", "gelu"]
    assert rows["ffn"].standalone_note == ""
    assert "a class of the model's own" in rows["scale"].standalone_note


def test_the_attention_example_has_no_attention_region() -> None:
    rows = {r.path: r for r in rank_regions(load_model(ATTENTION_SPEC, "cpu"), iterations=1)}
    # SDPA is two matmuls fused already: the block is no region; its projections and norm are.
    assert set(rows) == {"norm", "qkv", "out"}
    assert rows["out"].module == "Sequential(Linear, Dropout)" and rows["qkv"].inputs[0].shape == [2, 64, 128]


def test_cli_profile_shows_regions_and_writes_them_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixed_ceilings: Ceilings
) -> None:
    out = tmp_path / "profile.json"
    args = ["model", "profile", EXAMPLE_SPEC, "--device", "cpu", "--no-compile", "--repeats", "1", "--json", str(out)]
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 0
    assert "module regions" in capsys.readouterr().out
    report = ModelReport.model_validate(json.loads(out.read_text()))
    assert {r.path for r in report.regions} == {"up", "norm", "act", "down"} and report.ops
