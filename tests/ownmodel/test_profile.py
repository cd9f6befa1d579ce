"""`profile_model` ranks the example's aten ops by self time, with the roofline where computable."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.hardware_specs.ceilings import Ceilings
from kernelwright.ownmodel import ModelProfile, load_model, profile_model
from kernelwright.ownmodel.timing import time_model
from tests.ownmodel.conftest import CEILINGS, EXAMPLE_SPEC


@pytest.fixture(scope="module")
def report() -> ModelProfile:
    return profile_model(load_model(EXAMPLE_SPEC, "cpu"), repeats=3, compile=False, ceilings=CEILINGS)


def test_the_example_s_kernels_are_ranked(report: ModelProfile) -> None:
    names = [op.name for op in report.ops]
    for name in ("aten::addmm", "aten::native_layer_norm", "aten::gelu"):
        assert name in names
    assert [op.rank for op in report.ops] == list(range(1, len(report.ops) + 1))
    assert [op.time_s for op in report.ops] == sorted((op.time_s for op in report.ops), reverse=True)
    assert 0 < sum(op.share for op in report.ops) <= 1 + 1e-9
    # The two Linear layers are two addmm rows (two shapes), each once per forward.
    addmms = [op for op in report.ops if op.name == "aten::addmm"]
    assert {tuple(op.inputs[1].shape) for op in addmms} == {(128, 256), (128, 1024)}
    assert all(op.calls == 1 and op.op == "aten.addmm.default" for op in addmms)


def test_the_roofline_is_computed_where_it_can_be(report: ModelProfile) -> None:
    addmm = next(op for op in report.ops if op.name == "aten::addmm")
    assert addmm.flops == 2 * 128 * 256 * 1024
    assert addmm.bound == "compute" and addmm.sol_s == pytest.approx(addmm.flops / 100e9)
    assert addmm.room == pytest.approx(addmm.call_s / addmm.sol_s)
    gelu = next(op for op in report.ops if op.name == "aten::gelu")
    assert gelu.flops == 0 and gelu.bound == "memory"
    assert gelu.bytes == 2 * 128 * 1024 * 4 and gelu.sol_s == pytest.approx(gelu.bytes / 10e9)
    untraced = [op for op in report.ops if op.op is None]
    assert untraced and all(op.room is None and op.roofline_note.startswith("n/a") for op in untraced)


def test_no_ceilings_means_n_a_not_a_guess() -> None:
    empty = Ceilings(device="cpu", name="unknown", bandwidth=CEILINGS.bandwidth.__class__(None))
    report = profile_model(load_model(EXAMPLE_SPEC, "cpu"), repeats=1, compile=False, ceilings=empty)
    assert all(op.room is None and op.roofline_note.startswith("n/a") for op in report.ops)


def test_json_validates_and_eager_is_timed(report: ModelProfile) -> None:
    again = ModelProfile.model_validate_json(report.model_dump_json())
    assert again == report
    assert report.eager is not None and report.eager.repeats == 3
    assert report.eager.min_s <= report.eager.median_s <= report.eager.max_s
    assert report.compiled is None and "--no-compile" in report.compile_note


def test_compiled_is_timed_beside_eager(model_file: Callable[[str], Path]) -> None:
    path = model_file("def make():\n    return nn.Sequential(nn.Linear(8, 8), nn.ReLU()), (torch.randn(4, 8),)\n")
    eager, compiled, note = time_model(load_model(f"{path}:make"), repeats=2, warmup=1)
    assert eager.repeats == 2
    # A machine without a C++ compiler cannot compile on the CPU: then it says why, never silently.
    assert (compiled is not None and compiled.repeats == 2) or note.startswith("torch.compile failed")


def test_cli_profile_prints_the_table_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixed_ceilings: Ceilings
) -> None:
    out = tmp_path / "profile.json"
    with pytest.raises(SystemExit) as info:
        main(
            [
                "model",
                "profile",
                EXAMPLE_SPEC,
                "--device",
                "cpu",
                "--no-compile",
                "--repeats",
                "2",
                "--json",
                str(out),
                "--top",
                "3",
            ]
        )
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "addmm" in text and "eager: median" in text
    report = ModelProfile.model_validate(json.loads(out.read_text()))
    assert report.device == "cpu" and len(report.ops) > 3


def test_an_op_inside_another_names_its_host_and_extract_points_there(
    model_file: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = model_file("def make():\n    return nn.Conv1d(8, 8, 3), (torch.randn(2, 8, 32),)\n")
    report = profile_model(load_model(f"{path}:make"), repeats=1, compile=False, ceilings=CEILINGS)
    by_name = {op.name: op for op in report.ops}
    assert by_name["aten::convolution"].op == "aten.convolution.default"
    assert by_name["aten::conv1d"].inside is None and "composite" in by_name["aten::conv1d"].roofline_note
    nested = [op for op in report.ops if op.inside == "aten::convolution"]
    assert nested and all(op.room is None for op in nested)  # _convolution, the backend's kernel, ...
    with pytest.raises(SystemExit) as info:
        main(["model", "extract", f"{path}:make", "--op", nested[0].name, "--out", str(tmp_path), "--device", "cpu"])
    assert info.value.code == 2
    assert "runs inside aten::convolution" in capsys.readouterr().err
