"""Threads and the sandbox's layers (`confine.confine`): the CUDA driver's initialisation starts
helper threads (seen on an H100 host); the layers must still be put on the thread that runs the
candidate. A thread that was already running before is a different matter: refused, as before.
Each case confines a fresh subprocess; the driver is stood in for by a function that starts a
thread, so this runs on any Linux machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.harness.sandbox import confine

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")

CASE = """
import json, os, sys, threading, time
from pathlib import Path
from kernelwright.harness.sandbox import confine

helper_wrote = []
go = threading.Event()

def helper_body():  # the driver's thread: later (once told), it tries a write outside the folder
    go.wait(30)
    try:
        Path(sys.argv[1]).parent.joinpath("helper.txt").write_text("x")
        helper_wrote.append(True)
    except OSError:
        helper_wrote.append(False)

named = []

def helper_thread(notes):  # what cuInit does to the process: a thread of its own, which it names
    thread = threading.Thread(target=helper_body, daemon=True)
    thread.start()
    try:  # as pthread_setname_np does for another thread; the driver fails (304) if it cannot
        Path(f"/proc/self/task/{thread.native_id}/comm").write_text("cuda-EvtHandlr")
        named.append(Path(f"/proc/self/task/{thread.native_id}/comm").read_text().strip())
    except OSError as exc:
        named.append(str(exc))
    return True

confine._init_cuda_driver = helper_thread
if sys.argv[2] == "before":
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
if sys.argv[2] == "after-layers":
    os.environ[confine.CUDA_INIT_VAR] = "after-layers"
isolation = confine.confine([Path(sys.argv[1])], "best-effort", cuda=True)
try:  # the main thread is confined: a write outside its folder is refused
    Path(sys.argv[1]).parent.joinpath("outside.txt").write_text("x")
    wrote = True
except OSError:
    wrote = False
try:  # another process's /proc files (the harness's) stay out of reach
    Path(f"/proc/{os.getppid()}/comm").write_text("renamed")
    parent = "written"
except OSError:
    parent = "refused"
go.set()
time.sleep(0.5)
print(json.dumps({"isolation": isolation.model_dump(), "wrote_outside": wrote, "helper_wrote": helper_wrote,
                  "named": named, "parent": parent}))
"""


def _run(tmp_path: Path, when: str) -> dict:
    folder = tmp_path / "scratch"
    env = {k: v for k, v in os.environ.items() if k != confine.CUDA_INIT_VAR}
    done = subprocess.run(
        [sys.executable, "-c", CASE, str(folder), when],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
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
    # Started before the layers, the driver's thread is outside them: what `cuda_driver` says.
    assert isolation["cuda_driver"] == "outside" and got["helper_wrote"] == [True]
    assert "the CUDA driver's threads run outside the layers" in confine.Isolation(**isolation).missing()


@pytest.mark.skipif(confine.probe().filesystem != "landlock", reason="needs Landlock")
def test_a_driver_started_after_the_layers_has_its_threads_confined(tmp_path: Path) -> None:
    """Where the host's probe found the driver starts under the layers, the layers go on first:
    the driver's thread inherits them and cannot write outside the folder either."""
    got = _run(tmp_path, "after-layers")
    isolation = got["isolation"]
    assert isolation["cuda_driver"] == "inside" and isolation["filesystem"] == "landlock"
    assert not any("helper thread" in note for note in isolation["notes"]), isolation["notes"]
    assert got["wrote_outside"] is False and got["helper_wrote"] == [False]
    assert not (tmp_path / "helper.txt").exists()
    # The driver names its thread through /proc as it starts: its own threads' files stay writable,
    # another process's are not.
    assert got["named"] == ["cuda-EvtHandlr"] and got["parent"] == "refused"


def test_a_thread_running_before_the_driver_still_refuses_the_layers(tmp_path: Path) -> None:
    got = _run(tmp_path, "before")
    isolation = got["isolation"]
    assert (isolation["filesystem"], isolation["network"]) == ("none", "none")
    assert any("already ran threads" in note for note in isolation["notes"]), isolation["notes"]


EXEC_CASE = """
import os, sys, threading, time
from pathlib import Path
from kernelwright.harness.sandbox import confine

threading.Thread(target=time.sleep, args=(30,), daemon=True).start()  # e.g. a profiler's injected library
isolation = confine.confine([Path(sys.argv[1])], "best-effort", before_exec=True)
print(isolation.model_dump_json(), flush=True)
after = "import os, pathlib, sys\\n" + (
    "try:\\n    pathlib.Path(sys.argv[1]).write_text('x'); print('wrote')\\nexcept OSError:\\n    print('refused')\\n"
    "print('threads', len(os.listdir('/proc/self/task')))\\n"
    "pathlib.Path(f'/proc/self/task/{os.getpid()}/comm').write_text('target'); print('named')\\n"
)
os.execv(sys.executable, [sys.executable, "-c", after, str(Path(sys.argv[1]).parent / "outside.txt")])
"""


@pytest.mark.skipif(confine.probe().filesystem != "landlock", reason="needs Landlock")
def test_threads_that_end_at_the_next_exec_do_not_cost_the_layers(tmp_path: Path) -> None:
    """`confined_exec` runs as ncu's target, whose injected library starts threads first: they end
    at the exec, and the program exec'd starts single-threaded under the layers."""
    done = subprocess.run(
        [sys.executable, "-c", EXEC_CASE, str(tmp_path / "scratch")],
        capture_output=True, text=True, timeout=60, check=True, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    isolation = json.loads(lines[0])
    assert isolation["filesystem"] == "landlock" and isolation["network"] != "none"
    assert any("end at the exec" in note for note in isolation["notes"]), isolation["notes"]
    assert lines[1:] == ["refused", "threads 1", "named"] and not (tmp_path / "outside.txt").exists()
