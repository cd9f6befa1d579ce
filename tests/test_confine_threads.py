"""Threads and the sandbox's layers (`confine.confine`): the CUDA driver's initialisation starts
helper threads (seen on an H100 host); the layers must still be put on the thread that runs the
candidate. A thread that was already running before is a different matter: refused, as before.
Each case confines a fresh subprocess; the driver is stood in for by a function that starts a
thread, so this runs on any Linux machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.harness.process import confine

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")

CASE = """
import json, sys, threading, time
from pathlib import Path
from kernelwright.harness.process import confine

def helper_thread(notes):  # what cuInit does to the process: a thread of its own
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()

confine._init_cuda_driver = helper_thread
if sys.argv[2] == "before":
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
isolation = confine.confine([Path(sys.argv[1])], "best-effort", cuda=True)
try:  # the main thread is confined: a write outside its folder is refused
    Path(sys.argv[1]).parent.joinpath("outside.txt").write_text("x")
    wrote = True
except OSError:
    wrote = False
print(json.dumps({"isolation": isolation.model_dump(), "wrote_outside": wrote}))
"""


def _run(tmp_path: Path, when: str) -> dict:
    folder = tmp_path / "scratch"
    done = subprocess.run(
        [sys.executable, "-c", CASE, str(folder), when],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1],
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(confine.probe().filesystem != "landlock", reason="needs Landlock")
def test_the_driver_s_helper_thread_does_not_cost_the_layers(tmp_path: Path) -> None:
    got = _run(tmp_path, "driver")
    isolation = got["isolation"]
    assert isolation["filesystem"] == "landlock" and isolation["network"] != "none"
    assert isolation["sockets"] == confine.probe().sockets
    assert any("helper thread" in note for note in isolation["notes"]), isolation["notes"]
    assert got["wrote_outside"] is False and not (tmp_path / "outside.txt").exists()


def test_a_thread_running_before_the_driver_still_refuses_the_layers(tmp_path: Path) -> None:
    got = _run(tmp_path, "before")
    isolation = got["isolation"]
    assert (isolation["filesystem"], isolation["network"]) == ("none", "none")
    assert any("already ran threads" in note for note in isolation["notes"]), isolation["notes"]
