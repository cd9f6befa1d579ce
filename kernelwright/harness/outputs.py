"""A candidate's outputs on their way to the reference's process: written as raw tensor data by
the candidate's worker, read back as data only.

The file format carries no code and no pickle: a magic line, the header's length, a JSON header
describing the value (tensors with dtype, shape, offset and length; lists, tuples and scalars),
then each tensor's bytes at a 64-byte aligned offset. The writer is the candidate's process, so
the reader treats every byte as hostile: a regular file of the worker's own (no link), read
through the descriptor it opened (no second lookup of the path), its size bounded, the header
bounded and validated (dtypes from an allow-list, shapes whose bytes match their extent, extents
inside the file, nesting bounded), tensors made as views of a private read-only mapping and
copied once, straight to the device that compares them. Compared with `torch.save`/`torch.load`
(what this replaced), nothing is unpickled and a large output is not copied three times.

On CUDA an output whose tensors all live on the device can instead be handed over in place
(`share_output`): the file then holds only the description, each tensor an `ipc` entry naming a
CUDA memory handle and an extent (`cuda_ipc`), and the reader copies it device to device.
"""

from __future__ import annotations

import json
import mmap
import os
import stat
import struct
import warnings
from pathlib import Path
from typing import Any, BinaryIO

import torch

from kernelwright.harness import cuda_ipc

MAX_OUTPUT_BYTES = 64 << 30  # the worker's RLIMIT_FSIZE: no honest output file is larger
MAX_HEADER_BYTES = 1 << 20
MAX_ITEMS = 10_000
ALIGN = 64
MAGIC = b"KWOUT1\n"
_LENGTH = struct.Struct("<Q")
MAX_DEPTH = 4
_SCALARS = (int, float, bool, type(None))
DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.complex64,
        torch.complex128,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.bool,
        torch.float8_e4m3fn,
        torch.float8_e5m2,
    )
}


class UnsafeOutput(ValueError):
    """A candidate's output file that is not plain tensor data in this format."""


# -- writing (the candidate's worker) --------------------------------------------------------------
def _plain(value: torch.Tensor) -> tuple[torch.Tensor, str]:
    """The tensor's data as a plain tensor (a subclass is judged elsewhere), and its dtype's name."""
    tensor = value.detach()
    if type(tensor) is not torch.Tensor:
        tensor = tensor.as_subclass(torch.Tensor)
    return tensor, str(tensor.dtype).removeprefix("torch.")


def _head(description: dict[str, Any]) -> bytes:
    """The file's opening: the magic line, the header's length, the JSON header."""
    header = json.dumps(description).encode()
    return MAGIC + _LENGTH.pack(len(header)) + header


def _describe(value: Any, blobs: list[torch.Tensor], offset: list[int], depth: int = 0) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        tensor, name = _plain(value)
        tensor = tensor.to("cpu").contiguous()
        if name not in DTYPES or tensor.layout != torch.strided:
            return {"t": "unsupported", "type": f"{tensor.dtype} {tensor.layout} tensor"}
        nbytes = tensor.numel() * tensor.element_size()
        start = -(-offset[0] // ALIGN) * ALIGN
        offset[0] = start + nbytes
        blobs.append(tensor)
        return {"t": "tensor", "dtype": name, "shape": list(tensor.shape), "offset": start, "nbytes": nbytes}
    if isinstance(value, list | tuple) and depth < MAX_DEPTH:
        items = [_describe(v, blobs, offset, depth + 1) for v in value]
        return {"t": "list" if isinstance(value, list) else "tuple", "items": items}
    if isinstance(value, _SCALARS):
        return {"t": "scalar", "v": value}
    if isinstance(value, complex):
        return {"t": "complex", "re": value.real, "im": value.imag}
    return {"t": "unsupported", "type": type(value).__name__}


def save_output(value: Any, path: Path) -> None:
    """Write an output (tensors, lists or tuples of them, scalars) in the raw format. Offsets in
    the header count from the start of the data section, which begins at a 64-byte boundary."""
    blobs: list[torch.Tensor] = []
    extent = [0]
    head = _head({"value": _describe(value, blobs, extent)})
    data_start = -(-len(head) // ALIGN) * ALIGN
    with open(path, "wb") as out:
        out.write(head + b"\0" * (data_start - len(head)))
        position = 0
        for tensor in blobs:
            start = -(-position // ALIGN) * ALIGN
            out.write(b"\0" * (start - position))
            if tensor.numel():
                out.write(tensor.reshape(-1).view(torch.uint8).numpy().data)
            position = start + tensor.numel() * tensor.element_size()


def _describe_shared(value: Any, kept: list[torch.Tensor], depth: int = 0) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        tensor, name = _plain(value)
        if name not in DTYPES or tensor.layout != torch.strided or not tensor.is_cuda:
            raise cuda_ipc.IpcError(f"a {tensor.device} {tensor.dtype} {tensor.layout} tensor")
        tensor = tensor.contiguous()
        nbytes = tensor.numel() * tensor.element_size()
        node: dict[str, Any] = {"t": "ipc", "dtype": name, "shape": list(tensor.shape), "nbytes": nbytes}
        if nbytes:
            node["handle"], node["offset"] = cuda_ipc.export(tensor)
            kept.append(tensor)
        return node
    if isinstance(value, list | tuple) and depth < MAX_DEPTH:
        items = [_describe_shared(v, kept, depth + 1) for v in value]
        return {"t": "list" if isinstance(value, list) else "tuple", "items": items}
    return _describe(value, [], [0], depth)


def share_output(value: Any, path: Path) -> list[torch.Tensor] | None:
    """Write `value`'s description with its CUDA tensors as memory handles (no data in the
    file): the tensors to keep alive until the reference's process has copied them, or None
    when the value cannot be handed over so (a tensor off the device, memory the driver cannot
    export), and nothing was written: then `save_output` it."""
    kept: list[torch.Tensor] = []
    try:
        head = _head({"value": _describe_shared(value, kept)})
    except cuda_ipc.IpcError:
        return None
    with open(path, "wb") as out:
        out.write(head)
    return kept


# -- reading (the reference's process) -------------------------------------------------------------
class _Reader:
    def __init__(self, buffer: memoryview, data_start: int, device: str, counts: dict[str, int]) -> None:
        self.buffer, self.data_start, self.device, self.counts = buffer, data_start, device, counts
        self.items = 0

    def value(self, node: Any, depth: int = 0) -> Any:
        self.items += 1
        if self.items > MAX_ITEMS or depth > MAX_DEPTH or not isinstance(node, dict):
            raise UnsafeOutput("the output's description is not a bounded tree of values")
        kind = node.get("t")
        if kind == "tensor":
            return self.tensor(node)
        if kind == "ipc":
            return self.shared(node)
        if kind in ("list", "tuple"):
            items = node.get("items")
            if not isinstance(items, list):
                raise UnsafeOutput("a list without items")
            values = [self.value(item, depth + 1) for item in items]
            return values if kind == "list" else tuple(values)
        if kind == "scalar":
            value = node.get("v")
            if not isinstance(value, _SCALARS):
                raise UnsafeOutput(f"unexpected {type(value).__name__} in the output")
            return value
        if kind == "complex":
            re, im = node.get("re"), node.get("im")
            if not (isinstance(re, float | int) and isinstance(im, float | int)):
                raise UnsafeOutput("a malformed complex number")
            return complex(re, im)
        if kind == "unsupported":
            raise UnsafeOutput(f"unexpected {str(node.get('type'))[:60]} in the output")
        raise UnsafeOutput(f"unknown entry {str(kind)[:30]!r} in the output")

    def _kind(self, node: dict[str, Any]) -> tuple[torch.dtype, list[int], int]:
        """A tensor entry's dtype, shape and byte count, validated."""
        dtype = DTYPES.get(str(node.get("dtype")))
        shape, nbytes = node.get("shape"), node.get("nbytes")
        if dtype is None:
            raise UnsafeOutput(f"tensor of dtype {str(node.get('dtype'))[:30]!r}")
        if not (
            isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        ):
            raise UnsafeOutput("a tensor's shape is not a list of sizes")
        numel = 1
        for d in shape:
            numel *= d
        itemsize = torch.empty((), dtype=dtype).element_size()
        if not isinstance(nbytes, int) or nbytes != numel * itemsize or nbytes > MAX_OUTPUT_BYTES:
            raise UnsafeOutput(f"a tensor of shape {shape[:8]} does not take {nbytes} bytes")
        return dtype, shape, nbytes

    def shared(self, node: dict[str, Any]) -> torch.Tensor:
        """A tensor handed over as a CUDA memory handle: copied device to device."""
        dtype, shape, nbytes = self._kind(node)
        if self.device != "cuda":
            raise UnsafeOutput("a CUDA memory handle where the outputs are compared on the CPU")
        if nbytes == 0:
            return torch.empty(shape, dtype=dtype, device=self.device)
        handle, offset = node.get("handle"), node.get("offset")
        if not isinstance(handle, str) or not isinstance(offset, int) or isinstance(offset, bool):
            raise UnsafeOutput("a CUDA memory handle without its extent")
        try:
            raw = cuda_ipc.open_copy(handle, offset, nbytes)
        except ValueError as exc:
            raise UnsafeOutput(f"a CUDA memory handle's extent: {exc}") from exc
        self.counts["ipc"] = self.counts.get("ipc", 0) + 1
        return raw.view(dtype).view(shape)

    def tensor(self, node: dict[str, Any]) -> torch.Tensor:
        dtype, shape, nbytes = self._kind(node)
        offset = node.get("offset")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0 or offset % ALIGN:
            raise UnsafeOutput("a tensor's extent is malformed")
        start = self.data_start + offset
        if start + nbytes > len(self.buffer):
            raise UnsafeOutput("a tensor's bytes run past the end of the file")
        if nbytes == 0:
            return torch.empty(shape, dtype=dtype, device=self.device)
        with warnings.catch_warnings():  # the mapping is read-only; nothing writes through this view
            warnings.simplefilter("ignore", UserWarning)
            raw = torch.frombuffer(self.buffer, dtype=torch.uint8, count=nbytes, offset=start)
        view = raw.view(dtype).view(shape)
        # One copy, straight to where it is compared; nothing keeps a view of the mapping.
        return view.to(self.device, copy=True)


def _read(handle: BinaryIO, size: int, device: str, counts: dict[str, int]) -> Any:
    if size > MAX_OUTPUT_BYTES:
        raise UnsafeOutput(f"the file is {size} bytes")
    opening = handle.read(len(MAGIC) + _LENGTH.size)
    if not opening.startswith(MAGIC) or len(opening) < len(MAGIC) + _LENGTH.size:
        raise UnsafeOutput("not an output file of kernelwright's worker")
    (length,) = _LENGTH.unpack(opening[len(MAGIC) :])
    if length > MAX_HEADER_BYTES or len(opening) + length > size:
        raise UnsafeOutput(f"a header of {length} bytes")
    try:
        header = json.loads(handle.read(length))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UnsafeOutput(f"the header is not JSON: {exc}") from exc
    if not isinstance(header, dict) or "value" not in header:
        raise UnsafeOutput("the header describes no value")
    data_start = -(-(len(opening) + length) // ALIGN) * ALIGN
    if size == 0:
        raise UnsafeOutput("an empty file")
    with mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        try:
            return _Reader(view, data_start, device, counts).value(header["value"])
        finally:
            view.release()


def load_output(path: Path, device: str = "cpu", counts: dict[str, int] | None = None) -> tuple[Any, str | None]:
    """(the output, None), or (None, why it is not an output): a regular file of the worker's own
    (no link, one name), at most MAX_OUTPUT_BYTES, in the raw format, with tensors copied to
    `device`. A CUDA memory handle the driver does not open raises `cuda_ipc.IpcError` (handing
    over in place does not work here, or the handle is forged: the caller falls back to files).
    `counts["ipc"]` counts the tensors copied from memory handles."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                raise UnsafeOutput(f"{path.name} is not a regular file of the worker's own")
            return _read(handle, info.st_size, device, {} if counts is None else counts), None
    except (OSError, UnsafeOutput, RuntimeError, ValueError, struct.error) as exc:
        return None, f"its saved output could not be read as tensor data: {type(exc).__name__}: {exc}"
