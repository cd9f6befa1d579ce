"""CUDA outputs handed from a candidate's worker to the reference's process as memory handles
(`harness/cuda_ipc.py`): another process exports, this one copies. Forged handles and extents
past the allocation are refused. Marked gpu: skipped without CUDA."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kernelwright.harness import cuda_ipc, outputs

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

EXPORTER = """
import json, sys, torch
from pathlib import Path
from kernelwright.harness import cuda_ipc, outputs
base = torch.arange(1000, device="cuda", dtype=torch.float32)
part = base[100:]  # contiguous, 400 bytes into its allocation
handle, offset = cuda_ipc.export(part)
half = torch.full((3, 5), 2.5, device="cuda", dtype=torch.float16)
kept = outputs.share_output((half, 7, [part.view(30, 30)]), Path(sys.argv[1]))
print(json.dumps({"handle": handle, "offset": offset, "nbytes": part.numel() * 4, "kept": len(kept or [])}), flush=True)
sys.stdin.read()  # alive (and so the memory) until the test is done
"""


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[tuple[dict, Path]]:
    path = tmp_path / "shared.out"
    proc = subprocess.Popen(
        [sys.executable, "-c", EXPORTER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    assert line, "the exporting process printed nothing"
    yield json.loads(line), path
    proc.stdin.close()
    proc.wait(timeout=30)


def test_another_process_s_tensor_is_copied_device_to_device(exporter: tuple[dict, Path]) -> None:
    info, _ = exporter
    got = cuda_ipc.open_copy(info["handle"], info["offset"], info["nbytes"]).view(torch.float32)
    assert got.is_cuda and torch.equal(got, torch.arange(100, 1000, device="cuda", dtype=torch.float32))
    assert info["offset"] == 400
    # Opened and closed each time: a second copy works the same.
    again = cuda_ipc.open_copy(info["handle"], info["offset"], info["nbytes"]).view(torch.float32)
    assert torch.equal(again, got)


def test_a_forged_handle_or_an_extent_past_the_allocation_is_refused(exporter: tuple[dict, Path]) -> None:
    info, _ = exporter
    forged = bytes(b ^ 0x5A for b in bytes.fromhex(info["handle"])).hex()
    with pytest.raises(cuda_ipc.IpcError):
        cuda_ipc.open_copy(forged, 0, 16)
    with pytest.raises(ValueError, match="run past"):
        cuda_ipc.open_copy(info["handle"], info["offset"], 1 << 40)
    with pytest.raises(ValueError):
        cuda_ipc.open_copy("zz", 0, 4)


def test_an_output_file_of_handles_loads_as_the_values(exporter: tuple[dict, Path]) -> None:
    info, path = exporter
    assert info["kept"] == 2  # the scalar travels in the description
    counts: dict[str, int] = {}
    value, why = outputs.load_output(path, "cuda", counts)
    assert why is None and counts["ipc"] == 2
    half, seven, [square] = value
    assert half.dtype == torch.float16 and half.shape == (3, 5) and bool((half == 2.5).all())
    assert seven == 7 and square.shape == (30, 30) and float(square[0, 0]) == 100.0
    # The same file read for a CPU comparison is refused, not misread.
    _, why = outputs.load_output(path, "cpu")
    assert why is not None and "CUDA memory handle" in why


def test_a_tensor_off_the_device_is_not_handed_over(tmp_path: Path) -> None:
    assert outputs.share_output((torch.ones(3, device="cuda"), torch.ones(2)), tmp_path / "x.out") is None
    assert not (tmp_path / "x.out").exists()
