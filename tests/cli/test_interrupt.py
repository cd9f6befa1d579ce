"""Ctrl-C during a real build: every process kernelwright started stops, its scratch is removed,
one line is printed and the exit code is 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kernelwright.cli import INTERRUPTED_LINE
from kernelwright.harness.workers.live import descendants

# A load_inline C++ build: tens of seconds of cc1plus, under ninja (which gives each compiler
# command a process group of its own). The uuid keeps the build out of any cache.
CANDIDATE = """import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = '''
// {tag}
torch::Tensor f(torch::Tensor x) {{ return x.clamp_min(0); }}
'''
ext = load_inline(name="kw_interrupt_{tag}", cpp_sources=src, functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
"""


def _identity(pid: int) -> tuple[int, str] | None:
    """(pid, start time) while the process lives, so a reused pid is not mistaken for a survivor."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return None if fields[0] in ("Z", "X") else (pid, fields[19])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _stderr_path(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/fd/2")
    except OSError:
        return ""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_ctrl_c_during_a_real_build_stops_everything(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:12]
    candidate = tmp_path / "cand.py"
    candidate.write_text(CANDIDATE.format(tag=tag))
    home = tmp_path / "home"
    env = {**os.environ, "KERNELWRIGHT_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    cli = subprocess.Popen(
        [sys.executable, "-m", "kernelwright", "eval", "relu", str(candidate), "--device", "cpu", "--size", "small"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,  # like a shell: Ctrl-C reaches the CLI, not its workers' own sessions
    )
    try:
        deadline = time.monotonic() + 240
        tree: list[int] = []
        while time.monotonic() < deadline:
            tree = descendants(cli.pid)
            # the candidate's own compile (load_inline writes main.cpp), not inductor's baseline one
            if any("cc1plus" in c and "build-cache" in c for c in map(_cmdline, tree)):
                break
            assert cli.poll() is None, cli.communicate()
            time.sleep(0.2)
        else:
            pytest.fail("no compiler started within 240 s")
        watched = [i for i in (_identity(p) for p in tree) if i is not None]
        scratch = {
            Path(part).parents[1]
            for p in tree
            for part in _cmdline(p).split()
            if part.endswith("job.json") and "kw-eval-" in part
        }
        # a worker forked by the fork server has the server's command line; its log names its folder
        scratch |= {
            Path(log).parents[1] for log in map(_stderr_path, tree) if "kw-eval-" in log and log.endswith(".log")
        }
        assert scratch, "the workers' scratch folder was not found on their command lines or logs"
        os.kill(cli.pid, signal.SIGINT)
        _, stderr = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
    assert cli.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == INTERRUPTED_LINE
    assert "Traceback" not in stderr
    time.sleep(0.5)  # the kernel's reaping of the killed tree
    survivors = [(pid, _cmdline(pid)) for pid, start in watched if _identity(pid) == (pid, start)]
    assert not survivors, f"still running after Ctrl-C: {survivors}"
    assert not [s for s in scratch if s.exists()], "scratch left behind"
    batons = list((home / "build-cache").rglob("lock"))
    assert not batons, f"build locks left behind: {batons}"
