"""The raw output format between a candidate's worker and the reference's process: what round
trips (every dtype of the allow-list, strided and empty tensors, nested lists and tuples, scalars),
and hostile files the reader refuses without reading outside them or trusting their header."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch

from kernelwright.harness import outputs


@pytest.mark.parametrize("dtype", list(outputs.DTYPES.values()), ids=list(outputs.DTYPES))
def test_every_allowed_dtype_round_trips(tmp_path: Path, dtype: torch.dtype) -> None:
    value = (torch.randn(5, 7) * 10).to(dtype)
    path = tmp_path / "o.out"
    outputs.save_output(value, path)
    got, why = outputs.load_output(path)
    assert why is None and got.dtype == dtype and got.shape == value.shape
    assert torch.equal(got.view(torch.uint8), value.contiguous().view(torch.uint8))  # bit for bit (NaNs too)


def test_structures_strided_and_empty_tensors_round_trip(tmp_path: Path) -> None:
    value = [torch.arange(12.0).view(3, 4).t(), (torch.empty(0, 3), [1, 2.5, None, True, 1 - 2j]), torch.tensor(3.0)]
    path = tmp_path / "o.out"
    outputs.save_output(value, path)
    got, why = outputs.load_output(path)
    assert why is None
    assert torch.equal(got[0], value[0]) and got[0].is_contiguous()
    assert isinstance(got[1], tuple) and got[1][0].shape == (0, 3) and got[1][1] == [1, 2.5, None, True, 1 - 2j]
    assert got[2].shape == () and float(got[2]) == 3.0


def _forge(path: Path, header: object, data: bytes = b"", length: int | None = None) -> Path:
    text = json.dumps(header).encode()
    head = outputs.MAGIC + struct.pack("<Q", len(text) if length is None else length) + text
    pad = -len(head) % outputs.ALIGN
    path.write_bytes(head + b"\0" * pad + data)
    return path


@pytest.mark.parametrize(
    ("header", "data", "why"),
    [
        (
            {"value": {"t": "tensor", "dtype": "float32", "shape": [4], "offset": 0, "nbytes": 16}},
            b"\0" * 8,
            "past the end",
        ),
        (
            {"value": {"t": "tensor", "dtype": "float32", "shape": [4], "offset": 0, "nbytes": 8}},
            b"\0" * 16,
            "does not take",
        ),
        ({"value": {"t": "tensor", "dtype": "object", "shape": [1], "offset": 0, "nbytes": 8}}, b"\0" * 8, "dtype"),
        ({"value": {"t": "tensor", "dtype": "float32", "shape": [-4], "offset": 0, "nbytes": 16}}, b"\0" * 16, "shape"),
        ({"value": {"t": "tensor", "dtype": "float32", "shape": [1], "offset": 4, "nbytes": 4}}, b"\0" * 64, "extent"),
        (
            {"value": {"t": "tensor", "dtype": "float32", "shape": [1], "offset": -64, "nbytes": 4}},
            b"\0" * 64,
            "extent",
        ),
        ({"value": {"t": "pickle", "payload": "..."}}, b"", "unknown entry"),
        ({"value": {"t": "scalar", "v": {"a": 1}}}, b"", "unexpected dict"),
        ({"nothing": 1}, b"", "no value"),
        (
            {
                "value": {
                    "t": "list",
                    "items": [
                        {
                            "t": "list",
                            "items": [
                                {
                                    "t": "list",
                                    "items": [
                                        {"t": "list", "items": [{"t": "list", "items": [{"t": "list", "items": []}]}]}
                                    ],
                                }
                            ],
                        }
                    ],
                }
            },
            b"",
            "bounded tree",
        ),
    ],
    ids=[
        "past-the-end",
        "wrong-bytes",
        "bad-dtype",
        "negative-shape",
        "unaligned",
        "negative-offset",
        "unknown-kind",
        "dict-scalar",
        "no-value",
        "too-deep",
    ],
)
def test_hostile_files_are_refused(tmp_path: Path, header: object, data: bytes, why: str) -> None:
    value, problem = outputs.load_output(_forge(tmp_path / "o.out", header, data))
    assert value is None and problem is not None and why in problem, problem


def test_a_header_longer_than_its_file_or_the_limit_is_refused(tmp_path: Path) -> None:
    assert "header" in str(outputs.load_output(_forge(tmp_path / "a.out", {"value": None}, length=1 << 40))[1])
    path = tmp_path / "b.out"
    path.write_bytes(b"KWOUT1\n" + b"\x05")
    assert outputs.load_output(path)[1] is not None
    (tmp_path / "c.out").write_bytes(b"")
    assert outputs.load_output(tmp_path / "c.out")[1] is not None


def test_a_hard_link_or_a_folder_is_not_an_output(tmp_path: Path) -> None:
    good = tmp_path / "good.out"
    outputs.save_output(torch.ones(3), good)
    (tmp_path / "linked.out").hardlink_to(good)
    assert "regular file of the worker's own" in str(outputs.load_output(good)[1])  # two names now
    (tmp_path / "dir.out").mkdir()
    assert outputs.load_output(tmp_path / "dir.out")[1] is not None


def test_the_writer_is_watched_by_the_tamper_check() -> None:
    from kernelwright.harness.checks import tamper

    assert "kernelwright.harness.outputs" in tamper.WATCHED_MODULES
    before = tamper.harness_snapshot()
    real = outputs.save_output
    try:
        outputs.save_output = lambda value, path: None  # type: ignore[assignment]
        changes = tamper.harness_changes(before, tamper.harness_snapshot())
    finally:
        outputs.save_output = real  # type: ignore[assignment]
    assert changes and "kernelwright.harness.outputs.save_output" in changes[0][1]


def test_a_memory_handle_entry_is_refused_where_outputs_are_compared_on_the_cpu(tmp_path: Path) -> None:
    """A CUDA memory handle (`cuda_ipc`) is only ever opened for a CUDA comparison; a malformed one
    is refused before the driver sees it."""
    node = {"t": "ipc", "dtype": "float32", "shape": [4], "nbytes": 16, "handle": "00" * 64, "offset": 0}
    _, why = outputs.load_output(_forge(tmp_path / "a.out", {"value": node}, b""))
    assert why is not None and "compared on the CPU" in why
    bad = dict(node, nbytes=15)
    _, why = outputs.load_output(_forge(tmp_path / "b.out", {"value": bad}, b""), "cuda")
    assert why is not None and "does not take 15 bytes" in why
    assert outputs.share_output(torch.ones(3), tmp_path / "c.out") is None  # on the CPU: files
    assert not (tmp_path / "c.out").exists()
