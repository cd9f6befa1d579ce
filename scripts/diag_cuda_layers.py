"""Which sandbox layer keeps the CUDA driver from starting under the layers on this host (a
GPU-host diagnostic for `confine.cuda_after_layers`): each layer alone, in a fresh child, then
cuInit and a device allocation; prints one line per layer with the driver's answer."""

import json
import subprocess
import sys

CHILD = r"""
import ctypes, json, os, sys, tempfile
from pathlib import Path
from kernelwright.harness.process import confine, seccomp
layer, notes = sys.argv[1], []
folder = Path(tempfile.mkdtemp(prefix="kw-layer-"))
if layer == "netns":
    confine._network_namespace(notes)
elif layer == "nnp":
    confine._libc().prctl(38, 1, 0, 0, 0)
elif layer == "landlock":
    confine._landlock([folder], notes)
elif layer == "landlock+shm":
    confine._landlock([folder, Path("/dev/shm")], notes)
elif layer == "landlock+tmp":
    confine._landlock([folder, Path("/tmp"), Path("/dev/shm")], notes)
elif layer == "caps":
    confine._drop_capabilities(notes)
elif layer == "seccomp":
    confine._libc().prctl(38, 1, 0, 0, 0)
    notes.append(seccomp.install() or "installed")
elif layer == "rlimits":
    confine._rlimits(notes)
cu = ctypes.CDLL("libcuda.so.1")
status = cu.cuInit(0)
answer = {"layer": layer, "cuInit": status, "notes": notes}
if status == 0:
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    answer["ctx"] = cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    cu.cuCtxSetCurrent(ctx)
    answer["alloc"] = cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20))
print(json.dumps(answer))
"""

for layer in ("none", "netns", "nnp", "caps", "rlimits", "seccomp", "landlock", "landlock+shm", "landlock+tmp"):
    cmd = [sys.executable, "-c", CHILD, layer]
    if len(sys.argv) > 1 and sys.argv[1] == "--strace":
        cmd = ["strace", "-f", "-e", "trace=openat,socket,connect,mknodat,ioctl", "-o", f"/tmp/strace-{layer}.txt", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    print(done.stdout.strip() or json.dumps({"layer": layer, "stderr": done.stderr.strip()[-300:]}))
