"""A candidate's CUDA outputs handed to the reference's process without leaving the device.

Writing a default-size output to a file and reading it back costs about a second per trial at
relu's size (805 MB: device to host, into /dev/shm, out again, host to device), most of a
candidate's correctness phase. Through CUDA's inter-process memory handles the reference's
process copies the output device to device instead (milliseconds).

The driver API (`libcuda.so.1`, always there where CUDA runs) is called through ctypes:
- the candidate's worker exports the allocation that holds a contiguous output
  (`cuIpcGetMemHandle`) and names the output's offset in it; it keeps the tensor alive until the
  harness's next command, so the memory is not handed out again while it is being read;
- the reference's process opens the handle (`cuIpcOpenMemHandle`), checks that the named extent
  lies inside the allocation it got (`cuMemGetAddressRange`), copies it into its own memory and
  closes the handle at once.

Everything the worker sends is untrusted: a forged or stale handle fails to open (`IpcError`, and
the harness falls back to files for the session), an extent outside the allocation is refused.
The handle lets the reference's process read the candidate's memory, never the other way round.
Allocations made through CUDA's virtual memory API (PyTorch's expandable segments) cannot be
exported: the worker then writes the file as before.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import torch

HANDLE_BYTES = 64
LAZY_ENABLE_PEER_ACCESS = 1


class IpcError(RuntimeError):
    """The driver refused to export or open a handle (not available here, or not a handle)."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * HANDLE_BYTES)]


@functools.cache
def _driver() -> Any:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise IpcError(f"the CUDA driver library could not be loaded: {exc}") from exc
    for name, args in {
        "cuIpcGetMemHandle": [ctypes.POINTER(_Handle), ctypes.c_uint64],
        "cuIpcOpenMemHandle_v2": [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint],
        "cuIpcCloseMemHandle": [ctypes.c_uint64],
        "cuMemGetAddressRange_v2": [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64],
        "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    }.items():
        function = getattr(lib, name, None)
        if function is None:
            raise IpcError(f"the CUDA driver has no {name}")
        function.argtypes, function.restype = args, ctypes.c_int
    return lib


def _check(code: int, what: str) -> None:
    if code == 0:
        return
    name = ctypes.c_char_p()
    _driver().cuGetErrorName(code, ctypes.byref(name))
    raise IpcError(f"{what} failed: {(name.value or b'CUDA error').decode()} ({code})")


def export(tensor: torch.Tensor) -> tuple[str, int]:
    """(the allocation's handle as hex, the tensor's byte offset in it) for a contiguous CUDA
    tensor; the caller keeps `tensor` alive until the other process has copied it."""
    if not (tensor.is_cuda and tensor.is_contiguous()):
        raise IpcError("only a contiguous CUDA tensor can be exported")
    lib = _driver()
    torch.cuda.current_stream().synchronize()  # the values are final before anyone reads them
    pointer = tensor.data_ptr()
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _check(lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), pointer), "cuMemGetAddressRange")
    handle = _Handle()
    _check(lib.cuIpcGetMemHandle(ctypes.byref(handle), base.value), "cuIpcGetMemHandle")
    return bytes(handle).hex(), pointer - base.value  # all 64 bytes (`.reserved` stops at a NUL)


class _Span:
    """A device extent in the CUDA array interface: torch reads it without copying."""

    def __init__(self, pointer: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (pointer, False),  # torch refuses the read-only flag; nothing writes through it
            "version": 3,
            "strides": None,
        }


def open_copy(handle_hex: str, offset: int, nbytes: int) -> torch.Tensor:
    """A copy, in this process's memory on the current device, of `nbytes` bytes at `offset` in
    the allocation another process exported as `handle_hex`: IpcError when the handle does not
    open, ValueError when the extent is not inside the allocation."""
    try:
        raw = bytes.fromhex(handle_hex)
    except (TypeError, ValueError) as exc:
        raise ValueError("the handle is not hex") from exc
    if len(raw) != HANDLE_BYTES:
        raise ValueError(f"a handle of {len(raw)} bytes")
    if not (isinstance(offset, int) and isinstance(nbytes, int)) or offset < 0 or nbytes <= 0:
        raise ValueError("a malformed extent")
    lib = _driver()
    torch.cuda.init()
    torch.cuda.current_stream().synchronize()  # makes this thread's context (the primary one) current
    handle = _Handle.from_buffer_copy(raw)
    opened = ctypes.c_uint64()
    _check(lib.cuIpcOpenMemHandle_v2(ctypes.byref(opened), handle, LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle")
    try:
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        _check(
            lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), opened.value), "cuMemGetAddressRange"
        )
        end = opened.value + offset + nbytes
        if end > base.value + size.value:
            raise ValueError(f"{nbytes} bytes at offset {offset} run past the {size.value}-byte allocation")
        view = torch.as_tensor(_Span(opened.value + offset, nbytes), device=torch.device("cuda"))
        copy = view.clone()
        del view
        torch.cuda.current_stream().synchronize()  # copied before the handle closes
        return copy
    finally:
        lib.cuIpcCloseMemHandle(opened.value)
