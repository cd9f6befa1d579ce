"""The worker's seccomp filter: in a child process that installs it, nothing reaches a peer outside
the process: a Unix socket's connect (the way to a Docker daemon or an SSH agent, which the
network namespace does not cover), a datagram sent to an address (a journal socket) from a socket
or from one end of a socketpair, sendmsg, a TCP connect (this test has no namespace) and io_uring
are refused with EACCES, while everything a worker needs still works: creating sockets (the CUDA
driver does), socketpair traffic, threads, a compiler subprocess, torch."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kernelwright.harness.sandbox import seccomp

pytestmark = pytest.mark.skipif(not seccomp.supported(), reason="seccomp filter: Linux x86_64/aarch64 only")

CHILD = r"""
import ctypes, errno, os, socket, subprocess, sys, threading
from kernelwright.harness.sandbox import seccomp
stream_path, dgram_path, tcp_port = sys.argv[1], sys.argv[2], int(sys.argv[3])
assert seccomp.install() is None
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
def unix():
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(stream_path)
def dgram():
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(b"leak", dgram_path)
def pair_dgram():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        a.sendto(b"leak", dgram_path)
def dgram_sendmsg():
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendmsg([b"leak"], [], 0, dgram_path)
def tcp():
    with socket.socket(socket.AF_INET) as s:
        s.connect(("127.0.0.1", tcp_port))
def pair():
    a, b = socket.socketpair()
    with a, b:
        a.send(b"ok")
        assert b.recv(2) == b"ok"
libc = ctypes.CDLL(None, use_errno=True)
params = (ctypes.c_char * 120)()
ring = libc.syscall(425, 8, params)
results = {
    "unix_connect": attempt(unix),
    "unix_dgram_sendto": attempt(dgram),
    "socketpair_sendto": attempt(pair_dgram),
    "sendmsg": attempt(dgram_sendmsg),
    "tcp_connect": attempt(tcp),
    "io_uring": "EACCES" if ring < 0 and ctypes.get_errno() == errno.EACCES else f"ok {ring}",
    "unix_socket": attempt(lambda: socket.socket(socket.AF_UNIX).close()),
    "socketpair": attempt(pair),
    "compiler": attempt(lambda: subprocess.run(["true"], check=True)),
}
t = threading.Thread(target=lambda: None); t.start(); t.join()
import torch
results["torch"] = str(float(torch.ones(3).sum()))
print(results)
"""


def test_no_socket_reaches_a_peer_and_the_rest_works(tmp_path: Path) -> None:
    stream_path, dgram_path = str(tmp_path / "agent.sock"), str(tmp_path / "journal.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(stream_path)
    server.listen()
    tcp = socket.socket(socket.AF_INET)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    journal.bind(dgram_path)
    journal.setblocking(False)
    accepted: list[object] = []
    server.settimeout(5)
    tcp.settimeout(5)

    def accept(listener: socket.socket) -> None:
        with contextlib.suppress(OSError):
            accepted.append(listener.accept())

    waiters = [threading.Thread(target=accept, args=(s,), daemon=True) for s in (server, tcp)]
    for waiter in waiters:
        waiter.start()
    port = str(tcp.getsockname()[1])
    done = subprocess.run(
        [sys.executable, "-c", CHILD, stream_path, dgram_path, port],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    server.close()
    tcp.close()
    for waiter in waiters:
        waiter.join(6)
    with contextlib.suppress(BlockingIOError):
        accepted.append(journal.recv(64))
    journal.close()
    assert done.returncode == 0, done.stderr[-2000:]
    results = eval(done.stdout.strip().splitlines()[-1])  # the child's own dict literal
    refused = ("unix_connect", "unix_dgram_sendto", "socketpair_sendto", "sendmsg", "tcp_connect", "io_uring")
    assert {name: results[name] for name in refused} == dict.fromkeys(refused, "EACCES")
    assert results["unix_socket"] == "ok" and results["socketpair"] == "ok" and results["compiler"] == "ok"
    assert results["torch"] == "3.0"
    assert accepted == []  # nothing reached a listener or the datagram socket


def test_the_program_is_well_formed() -> None:
    for arch in seccomp.ARCHES.values():
        rules = seccomp.program(arch, x32_guard=True)
        for position, (code, jt, jf, _k) in enumerate(rules):
            assert position + 1 + max(jt, jf) < len(rules) or code == 0x06  # every jump lands inside
        assert rules[-1][0] == 0x06 and len(rules) < 64
