"""Which sandbox layer keeps the CUDA driver from starting under the layers on this host (a
GPU-host diagnostic for `confine.cuda_after_layers`): each layer, and each part of the Landlock
ruleset, alone in a fresh child, then cuInit and a device allocation; prints one JSON line per
variant with the driver's answer. `--strace` also records the driver's socket, connect, device and
file-creation calls per variant (where strace is installed) under /tmp/strace-VARIANT.txt.

Variants named `ll:` build a Landlock ruleset from parts: `fs` handles writes (writable: a temp
folder and the existing /dev entries, as the worker does), `fs/` the same with `/` writable (so
path rules cannot be what fails), `net` handles TCP, `su`/`ss` scope abstract Unix sockets and
signals. `full+tsync` is the order the worker would use if the driver cannot start under the
seccomp filter: every layer but seccomp, cuInit, then the filter on all threads (TSYNC)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import ctypes, json, os, sys, tempfile, platform
from pathlib import Path
from kernelwright.harness.sandbox import confine, seccomp
variant, notes = sys.argv[1], []
folder = Path(tempfile.mkdtemp(prefix="kw-layer-"))
libc = confine._libc()

def landlock(parts):
    abi = confine.landlock_abi()
    fs = confine._fs_write_access(abi) if ("fs" in parts or "fs/" in parts) else 0
    attr = confine._RulesetAttr(
        handled_access_fs=fs,
        handled_access_net=3 if "net" in parts else 0,
        scoped=(1 if "su" in parts else 0) | (2 if "ss" in parts else 0),
    )
    rs = libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    if rs < 0:
        notes.append("create failed " + confine._err()); return
    if fs:
        for f in ([Path("/")] if "fs/" in parts else [folder]):
            confine._add_rule(rs, f, fs)
        for e in confine._device_entries():
            try: confine._add_rule(rs, e, confine._FS_WRITE_FILE | confine._FS_TRUNCATE)
            except OSError: pass
    libc.prctl(38, 1, 0, 0, 0)
    notes.append("restrict=%d" % libc.syscall(446, rs, 0))

def seccomp_tsync():
    arch = seccomp.ARCHES[platform.machine()]
    rules = seccomp.program(arch, x32_guard=platform.machine() == "x86_64")
    table = (seccomp._Filter * len(rules))(*[seccomp._Filter(*r) for r in rules])
    prog = seccomp._Program(len(rules), table)
    libc.prctl(38, 1, 0, 0, 0)
    nr = 317 if platform.machine() == "x86_64" else 277
    notes.append("tsync=%d threads=%d" % (libc.syscall(nr, 1, 1, ctypes.byref(prog)), len(os.listdir("/proc/self/task"))))

post = None
if variant == "netns":
    confine._network_namespace(notes)
elif variant == "nnp":
    libc.prctl(38, 1, 0, 0, 0)
elif variant == "caps":
    confine._drop_capabilities(notes)
elif variant == "rlimits":
    confine._rlimits(notes)
elif variant == "seccomp":
    notes.append(seccomp.install() or "installed")
elif variant == "landlock":
    confine._landlock([folder], notes)
elif variant.startswith("ll:"):
    landlock(variant[3:].split(","))
elif variant.startswith("llw:"):  # writes handled, only the listed paths (and /dev's devices) writable
    abi = confine.landlock_abi(); fs = confine._fs_write_access(abi)
    attr = confine._RulesetAttr(handled_access_fs=fs, handled_access_net=0, scoped=0)
    rs = libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    for f in json.loads(variant[4:]):
        try: confine._add_rule(rs, Path(f), fs)
        except OSError as exc: notes.append(str(exc))
    for e in confine._device_entries():
        try: confine._add_rule(rs, e, confine._FS_WRITE_FILE | confine._FS_TRUNCATE)
        except OSError: pass
    libc.prctl(38, 1, 0, 0, 0); libc.syscall(446, rs, 0)
elif variant.startswith("sc:"):  # the filter with another answer: unix=ERRNO for socket(AF_UNIX), or connect=ERRNO
    what, number = variant[3:].split("=")
    arch = seccomp.ARCHES[platform.machine()]
    deny = (0x06, 0, 0, 0x00050000 | int(number))
    allow = (0x06, 0, 0, 0x7FFF0000)
    if what == "unix":
        lines = [(0x20, 0, 0, 0), ("jeq", str(arch.socket), "socket"), allow, ("label", "socket"),
                 (0x20, 0, 0, 16), ("jeq", "1", "deny"), allow, ("label", "deny"), deny]
    else:
        connect = {"x86_64": 42, "aarch64": 203}[platform.machine()]
        lines = [(0x20, 0, 0, 0), ("jeq", str(connect), "deny"), allow, ("label", "deny"), deny]
    rules = seccomp._assemble(lines)
    table = (seccomp._Filter * len(rules))(*[seccomp._Filter(*r) for r in rules])
    prog = seccomp._Program(len(rules), table)
    libc.prctl(38, 1, 0, 0, 0)
    notes.append("prctl=%d" % libc.prctl(22, 2, ctypes.byref(prog), 0, 0))
elif variant == "full+tsync":
    confine._rlimits(notes); confine._network_namespace(notes)
    confine._landlock([folder], notes); confine._drop_capabilities(notes)
    post = seccomp_tsync
cu = ctypes.CDLL("libcuda.so.1")
status = cu.cuInit(0)
if post:
    post()
answer = {"variant": variant, "cuInit": status, "notes": notes}
if status == 0:
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    answer["ctx"] = cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    cu.cuCtxSetCurrent(ctx)
    answer["alloc"] = cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20))
    answer["memset"] = cu.cuMemsetD8_v2(ptr, 1, ctypes.c_size_t(1 << 20))
    answer["sync"] = cu.cuCtxSynchronize()
answer["threads"] = sorted(Path(t, "comm").read_text().strip() for t in Path("/proc/self/task").iterdir())
print(json.dumps(answer))
"""

VARIANTS = (
    "none",
    "netns",
    "nnp",
    "caps",
    "rlimits",
    "seccomp",
    "landlock",
    "ll:fs",
    "ll:fs/",
    "ll:net",
    "ll:su",
    "ll:ss",
    "ll:su,ss",
    "ll:fs,net",
    "ll:fs,net,ss",
    "full+tsync",
)


def run_child(variant: str, trace: bool = False) -> dict:
    cmd = [sys.executable, "-c", CHILD, variant]
    if trace:
        name = variant.replace(":", "-").replace(",", "-").replace("/", "root")
        cmd = [
            "strace",
            "-f",
            "-e",
            "trace=socket,connect,bind,mknodat,openat,ioctl,unlinkat,mkdirat",
            "-o",
            f"/tmp/strace-{name}.txt",
            *cmd,
        ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        return (
            json.loads(done.stdout.strip().splitlines()[-1])
            if done.stdout.strip()
            else {"variant": variant, "stderr": done.stderr.strip()[-300:]}
        )
    except subprocess.TimeoutExpired:
        return {"variant": variant, "timeout": 120}


def works(paths: list[str]) -> bool:
    answer = run_child("llw:" + json.dumps(paths))
    return answer.get("cuInit") == 0 and answer.get("alloc") == 0


def bisect(root: Path, context: list[str], depth: int, found: list[str], budget: list[int]) -> None:
    """Which paths beneath `root` the driver must write (with `context` writable too): `root`
    itself when writing all its entries is not enough (it creates one there), else each entry
    without which it fails, narrowed down `depth` levels."""
    import os

    try:
        entries = sorted(str(root / e) for e in os.listdir(root) if not (root / e).is_symlink())
    except OSError:
        found.append(str(root))
        return
    budget[0] -= 1
    if budget[0] < 0 or not entries or not works(entries + context):
        found.append(str(root))
        return
    for entry in entries:
        budget[0] -= 1
        if budget[0] < 0:
            break
        others = [e for e in entries if e != entry] + context
        if not works(others):
            if depth > 0 and Path(entry).is_dir():
                bisect(Path(entry), others, depth - 1, found, budget)
            else:
                found.append(entry)
    print(json.dumps({"bisect": str(root), "found": found}), flush=True)


if __name__ == "__main__":
    if "--bisect" in sys.argv[1:]:  # --bisect [ROOT]: /proc/self is resolved by each child for itself
        root = ([a for a in sys.argv[1:] if not a.startswith("--")] or ["/"])[0]
        print(json.dumps({"root writable": works([root])}), flush=True)
        found: list[str] = []
        bisect(Path(root), [], 0 if root.startswith("/proc") else 4, found, [250])
        print(json.dumps({"needed": found, "works with them": works(found)}), flush=True)
        sys.exit(0)
    trace = "--strace" in sys.argv[1:] and shutil.which("strace")
    chosen = [a for a in sys.argv[1:] if not a.startswith("--")] or VARIANTS
    for variant in chosen:
        print(json.dumps(run_child(variant, bool(trace))), flush=True)
