"""Which sandbox layer, if any, stops CUDA: each variant in a fresh process (a GPU-host check)."""

import subprocess
import sys

CODE = r"""
import ctypes, os, sys
from pathlib import Path
from kernelwright.harness.sandbox import confine as c
v = sys.argv[1]
w = Path("/tmp/kwdiag"); w.mkdir(exist_ok=True)
notes = []
if v == "full": c.confine([w], "best-effort")
elif v == "full_cuinit": c.confine([w], "best-effort", cuda=True)
elif v == "netns": c._network_namespace(notes)
elif v == "landlock": c._landlock([w.resolve()], notes)
elif v == "landlock_shm": c._landlock([w.resolve(), Path("/dev/shm")], notes)
elif v == "caps": c._drop_capabilities(notes)
elif v == "nnp": c._libc().prctl(38, 1, 0, 0, 0)
import torch
try:
    torch.zeros(1, device="cuda").add_(1); torch.cuda.synchronize(); print(v, "OK", notes)
except Exception as e:
    print(v, "FAIL", str(e)[:120], notes)
"""
for variant in ["none", "netns", "nnp", "caps", "landlock", "landlock_shm", "full", "full_cuinit"]:
    done = subprocess.run([sys.executable, "-c", CODE, variant], capture_output=True, text=True, timeout=120)
    print((done.stdout.strip() or done.stderr.strip()[-300:]).splitlines()[-1])
