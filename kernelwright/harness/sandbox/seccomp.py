"""A seccomp filter a worker installs on itself: no socket reaches anything outside the process,
and no io_uring.

The network namespace takes away every network, and Landlock scopes abstract Unix sockets, but a
pathname Unix socket is reached through the file system, where Landlock (up to ABI 7) does not
govern `connect(2)` or a datagram's destination: a candidate could talk to the Docker daemon's
socket, an SSH agent, a desktop session bus, the journal. A kernel has no use for any of them,
so every way of naming a peer is refused with EACCES: `connect(2)`, `sendto(2)` with an address,
and `sendmsg(2)`/`sendmmsg(2)` (whose address the filter cannot see). Creating a socket stays
allowed: the CUDA driver creates a Unix socket as it starts and fails with CUDA_ERROR_OPERATING_SYSTEM
(304) if it cannot, but carries on when the connect that follows is refused (measured on an H100,
driver 580). What is left is `socketpair` and sockets connected from outside, neither of which
reaches anything. io_uring is refused too: its socket and file operations bypass seccomp.

Installed after no-new-privs (which seccomp requires of an unprivileged process), inherited by
everything the worker starts. The filter is classic BPF over `seccomp_data`; unknown
architectures are left unfiltered (and the result says so)."""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
from dataclasses import dataclass

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_X32_BIT = 0x40000000
# seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (the low word of an
# argument first: both architectures are little-endian)
_OFF_NR, _OFF_ARCH, _OFF_ARG5 = 0, 4, 16 + 5 * 8
# classic BPF opcodes
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K


@dataclass(frozen=True)
class Arch:
    audit: int
    connect: int
    sendto: int
    sendmsg: int
    sendmmsg: int
    io_uring: tuple[int, ...] = (425, 426, 427)  # io_uring_setup, _enter, _register (generic numbers)


ARCHES = {
    "x86_64": Arch(audit=0xC000003E, connect=42, sendto=44, sendmsg=46, sendmmsg=307),
    "aarch64": Arch(audit=0xC00000B7, connect=203, sendto=206, sendmsg=211, sendmmsg=269),
}


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter))]


Instruction = tuple[int, int, int, int]  # code, jt, jf, k


def _assemble(lines: list[tuple[str, ...] | Instruction]) -> list[Instruction]:
    """Classic BPF with labels: ("label", NAME) marks a place; ("jeq", K, NAME) jumps there when
    the accumulator equals K and falls through otherwise."""
    places: dict[str, int] = {}
    position = 0
    for line in lines:
        if line[0] == "label":
            places[str(line[1])] = position
        else:
            position += 1
    out: list[Instruction] = []
    for line in lines:
        if line[0] == "label":
            continue
        if line[0] == "jeq":
            _, k, target = line
            out.append((_JEQ_K, places[str(target)] - len(out) - 1, 0, int(k)))
        else:
            out.append(line)  # type: ignore[arg-type]
    return out


def program(arch: Arch, x32_guard: bool) -> list[Instruction]:
    """The filter: deny connect, sendto with an address (a non-zero address length, which is
    what makes the kernel read one), sendmsg, sendmmsg and io_uring with EACCES, allow everything
    else; calls of another architecture's numbering (a 32-bit ABI, x32) are denied."""
    deny: Instruction = (_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.EACCES)
    allow: Instruction = (_RET_K, 0, 0, _SECCOMP_RET_ALLOW)
    lines: list[tuple[str, ...] | Instruction] = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        ("jeq", str(arch.audit), "native"),
        deny,
        ("label", "native"),
        (_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if x32_guard:
        lines += [(_JGE_K, 0, 1, _X32_BIT), deny]  # bit 30 set: an x32 call, never ours
    lines += [("jeq", str(n), "deny") for n in (arch.connect, arch.sendmsg, arch.sendmmsg, *arch.io_uring)]
    lines += [("jeq", str(arch.sendto), "sendto"), allow]
    lines += [("label", "sendto"), (_LD_W_ABS, 0, 0, _OFF_ARG5), ("jeq", "0", "allow"), deny]
    lines += [("label", "allow"), allow, ("label", "deny"), deny]
    return _assemble(lines)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def supported() -> bool:
    return platform.system() == "Linux" and platform.machine() in ARCHES


def install() -> str | None:
    """Install the filter on this process (setting no-new-privs first, which it needs); None when
    it is in force, else why not."""
    arch = ARCHES.get(platform.machine())
    if arch is None or platform.system() != "Linux":
        return f"no seccomp filter for {platform.system()} {platform.machine()}"
    rules = program(arch, x32_guard=platform.machine() == "x86_64")
    table = (_Filter * len(rules))(*[_Filter(*r) for r in rules])
    prog = _Program(len(rules), table)
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"prctl(NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}"
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return f"seccomp filter refused: {os.strerror(ctypes.get_errno())}"
    return None
