"""Which sandbox layer keeps Nsight Compute from profiling a confined target on this host (a
GPU-host diagnostic for `tools/profile.profile_candidate`): ncu starts a small wrapper as its
target; the wrapper puts itself under the chosen layers, as `confined_exec` does, then execs a
torch program that runs one relu on the GPU. Prints one JSON line per variant: ncu's exit code,
whether a kernel was profiled, the wrapper's notes and the tail of ncu's output.

    PYTHONPATH=$PWD python3 scripts/diag_ncu_layers.py [VARIANT...]

Variants: none, netns, landlock (writable: the scratch folder), landlock+shm (also /dev/shm and
/tmp), seccomp, all-but-netns, all-but-seccomp, all (what confined_exec applies)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WRAPPER = r"""
import os, sys
from pathlib import Path
from kernelwright.harness.sandbox import confine, seccomp
variant, scratch, notes = sys.argv[1], Path(sys.argv[2]), []
parts = {"all": {"netns", "landlock", "seccomp"}, "all-but-netns": {"landlock", "seccomp"},
         "all-but-seccomp": {"netns", "landlock"}}.get(variant, {variant})
if "netns" in parts:
    confine._network_namespace(notes)
if "landlock" in parts:
    confine._landlock([scratch], notes)
if "landlock+shm" in parts:
    confine._landlock([scratch, Path("/dev/shm"), Path("/tmp")], notes)
if "seccomp" in parts:
    notes.append(seccomp.install() or "seccomp installed")
(scratch / "notes.json").write_text(__import__("json").dumps(notes))
os.execv(sys.executable, [sys.executable, "-c", sys.argv[3]])
"""

TARGET = "import torch; x = torch.randn(1 << 20, device='cuda'); torch.relu(x); torch.cuda.synchronize(); print('target done')"

VARIANTS = ("none", "netns", "landlock", "landlock+shm", "seccomp", "all-but-netns", "all-but-seccomp", "all")

if __name__ == "__main__":
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    for variant in sys.argv[1:] or VARIANTS:
        with tempfile.TemporaryDirectory(prefix="kw-ncu-diag-") as scratch:
            report = os.path.join(scratch, "report")
            cmd = [
                ncu,
                "--target-processes",
                "all",
                "-c",
                "1",
                "--section",
                "SpeedOfLight",
                "-f",
                "-o",
                report,
                sys.executable,
                "-c",
                WRAPPER,
                variant,
                scratch,
                TARGET,
            ]
            env = {**os.environ, "TMPDIR": scratch}
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
                code, tail = done.returncode, (done.stdout + done.stderr)[-400:]
            except subprocess.TimeoutExpired as exc:
                code, tail = "timeout", str((exc.stdout or b"")[-300:])
            notes_file = os.path.join(scratch, "notes.json")
            notes = json.loads(Path(notes_file).read_text()) if os.path.exists(notes_file) else None
            print(
                json.dumps(
                    {
                        "variant": variant,
                        "ncu": code,
                        "report": os.path.exists(report + ".ncu-rep"),
                        "notes": notes,
                        "tail": tail,
                    }
                ),
                flush=True,
            )
