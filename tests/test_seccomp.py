"""The worker's seccomp filter: in a child process that installs it, Unix-domain sockets (the way
to a Docker daemon or an SSH agent, which the network namespace does not cover) and io_uring are
refused with EACCES, while everything a worker needs still works: TCP sockets in its namespace,
socketpair, threads, a compiler subprocess, torch."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kernelwright.harness.process import seccomp

pytestmark = pytest.mark.skipif(not seccomp.supported(), reason="seccomp filter: Linux x86_64/aarch64 only")

CHILD = r"""
import ctypes, errno, os, socket, subprocess, sys, threading
from kernelwright.harness.process import seccomp
path = sys.argv[1]
assert seccomp.install() is None
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
def unix():
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
libc = ctypes.CDLL(None, use_errno=True)
params = (ctypes.c_char * 120)()
ring = libc.syscall(425, 8, params)
results = {
    "unix_connect": attempt(unix),
    "unix_raw": "EACCES" if libc.socket(1, 1, 0) < 0 and ctypes.get_errno() == errno.EACCES else "ok",
    "io_uring": "EACCES" if ring < 0 and ctypes.get_errno() == errno.EACCES else f"ok {ring}",
    "tcp": attempt(lambda: socket.socket(socket.AF_INET).close()),
    "socketpair": attempt(lambda: [s.close() for s in socket.socketpair()]),
    "compiler": attempt(lambda: subprocess.run(["true"], check=True)),
}
t = threading.Thread(target=lambda: None); t.start(); t.join()
import torch
results["torch"] = str(float(torch.ones(3).sum()))
print(results)
"""


def test_unix_sockets_and_io_uring_are_refused_and_the_rest_works(tmp_path: Path) -> None:
    path = str(tmp_path / "agent.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    accepted: list[object] = []
    server.settimeout(5)

    def accept() -> None:
        with contextlib.suppress(OSError):
            accepted.append(server.accept())

    waiter = threading.Thread(target=accept, daemon=True)
    waiter.start()
    done = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True, timeout=120, check=False)
    server.close()
    waiter.join(6)
    assert done.returncode == 0, done.stderr[-2000:]
    results = eval(done.stdout.strip().splitlines()[-1])  # the child's own dict literal
    assert results["unix_connect"] == "EACCES" and results["unix_raw"] == "EACCES"
    assert results["io_uring"] == "EACCES"
    assert results["tcp"] == "ok" and results["socketpair"] == "ok" and results["compiler"] == "ok"
    assert results["torch"] == "3.0"
    assert accepted == []  # nothing reached the listener


def test_the_program_is_well_formed() -> None:
    for arch in seccomp.ARCHES.values():
        rules = seccomp.program(arch, x32_guard=True)
        for position, (code, jt, jf, _k) in enumerate(rules):
            assert position + 1 + max(jt, jf) < len(rules) or code == 0x06  # every jump lands inside
        assert rules[-1][0] == 0x06 and len(rules) < 64
