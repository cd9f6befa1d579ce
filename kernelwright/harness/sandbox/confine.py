"""The kernel-level layers a worker puts itself under at start, before any candidate code runs:
resource limits, a network namespace of its own (loopback down: no network at all), Landlock
write confinement, no new privileges and, for root, no capabilities.

Applied by the worker to itself (`confine`), not by the harness in a `preexec_fn`: the harness
has threads, and code between fork and exec in a threaded process may deadlock. The worker is
single-threaded when it starts (no torch imported yet), which `unshare(CLONE_NEWUSER)` and
Landlock (it restricts the calling thread and what it starts later) both need. Everything the
worker later starts (ninja, g++, nvcc, torch's threads) inherits the layers.

Python 3.11 has no `os.unshare`, so the syscalls go through libc with ctypes. Every layer is
optional: what the kernel refuses is recorded (`Isolation.notes`), never raised, so the
evaluation still runs in best-effort mode; strict mode is decided by the caller.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Literal

from kernelwright.harness.sandbox import seccomp
from kernelwright.harness.sandbox.isolation import Isolation, SandboxMode

# Landlock (include/uapi/linux/landlock.h); the syscall numbers are the same on every architecture.
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446
_CREATE_VERSION = 1
_RULE_PATH_BENEATH = 1
_FS_WRITE_FILE = 1 << 1
_FS_REMOVE_DIR, _FS_REMOVE_FILE = 1 << 4, 1 << 5
_FS_MAKE = (
    (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
)  # char dir reg sock fifo block sym
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 38, 24
_CLONE_NEWNET, _CLONE_NEWUSER = 0x40000000, 0x10000000
_CAP_VERSION_3 = 0x20080522

FSIZE_LIMIT = 64 << 30  # one file: far above any trial's outputs, far below filling a disk
NPROC_HEADROOM = 4096  # processes+threads the worker's tree may add to what its user already runs
_SKIPPED_DEV = ("shm", "mqueue")  # shared with every other process: a candidate writes only its own scratch


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _err() -> str:
    return os.strerror(ctypes.get_errno())


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (older kernel, not enabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    abi = _libc().syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_VERSION))
    return max(int(abi), 0)


def _fs_write_access(abi: int) -> int:
    access = _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE
    if abi >= 2:
        access |= _FS_REFER
    if abi >= 3:
        access |= _FS_TRUNCATE
    return access


def _add_rule_fd(ruleset: int, fd: int, access: int) -> bool:
    """Allow `access` beneath the folder or file open as `fd`; False if Landlock refuses."""
    attr = _PathBeneath(allowed_access=access, parent_fd=fd)
    return _libc().syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(attr), 0) == 0


def _add_rule(ruleset: int, path: Path, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not _add_rule_fd(ruleset, fd, access):
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path}): {_err()}")
    finally:
        os.close(fd)


def _device_entries() -> list[Path]:
    """/dev's devices (null, the nvidia nodes, ptys), without the shared-memory folders."""
    dev = Path("/dev")
    try:
        entries = list(dev.iterdir())
    except OSError:
        return []
    return [e for e in entries if e.name not in _SKIPPED_DEV and not e.is_symlink()]


_PINNED: list[int] = []  # descriptors held open for the process's life (see _own_threads)


def _own_threads(ruleset: int, file_access: int) -> None:
    """Let this process write its own threads' files in /proc (`/proc/PID/task/TID/comm`): the
    CUDA driver names its helper threads as it starts, and cuInit fails (304) when it cannot
    (measured on an H100, driver 580). The rule is bound to this process's own `task` folder,
    which `/proc/self/task` resolves to now; what it later starts has folders of its own that the
    rule does not cover. The folder stays open, so its /proc entry is not dropped and made anew
    (a new inode the rule would not match) while the process lives (`confine(before_exec=True)`
    keeps it open across the exec)."""
    try:
        fd = os.open("/proc/self/task", os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    if _add_rule_fd(ruleset, fd, file_access):
        _PINNED.append(fd)
    else:
        os.close(fd)


def _landlock(writable: list[Path], notes: list[str]) -> tuple[bool, bool]:
    """Confine writes to `writable` (and /dev's devices, and this process's threads' /proc
    files); with ABI 4+, deny every TCP connect and bind; with ABI 6+, no signals to and no
    abstract sockets of processes outside. Returns (filesystem confined, TCP denied)."""
    abi = landlock_abi()
    if abi < 1:
        notes.append("Landlock unavailable (Linux >= 5.13 with landlock in the LSM list)")
        return False, False
    fs = _fs_write_access(abi)
    attr = _RulesetAttr(
        handled_access_fs=fs,
        handled_access_net=(_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
        scoped=(_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    ruleset = _libc().syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    if ruleset < 0:
        notes.append(f"landlock_create_ruleset failed: {_err()}")
        return False, False
    try:
        for folder in writable:
            _add_rule(ruleset, folder, fs)
        file_access = _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
        for entry in _device_entries():  # write (open O_RDWR) existing devices; create nothing in /dev
            with contextlib.suppress(OSError):  # a device that vanished since the listing
                _add_rule(ruleset, entry, file_access)
        _own_threads(ruleset, file_access)
        if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            notes.append(f"prctl(NO_NEW_PRIVS) failed: {_err()}")
            return False, False
        if _libc().syscall(_SYS_RESTRICT, ruleset, 0) != 0:
            notes.append(f"landlock_restrict_self failed: {_err()}")
            return False, False
    except OSError as exc:
        notes.append(str(exc))
        return False, False
    finally:
        os.close(ruleset)
    if abi < 4:
        notes.append(f"Landlock ABI {abi}: no TCP rules (needs Linux >= 6.7)")
    return True, abi >= 4


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _network_namespace(notes: list[str]) -> bool:
    """A network namespace of our own: no interfaces but a loopback that is down. Root unshares
    it directly; anyone else through a user namespace mapping only their own uid and gid."""
    libc = _libc()
    if os.geteuid() == 0:
        if libc.unshare(_CLONE_NEWNET) == 0:
            return True
        notes.append(f"unshare(CLONE_NEWNET) failed as root: {_err()}")
        return False
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        notes.append(
            f"unshare(CLONE_NEWUSER|CLONE_NEWNET) failed: {_err()} "
            "(unprivileged user namespaces are off: sysctl kernel.unprivileged_userns_clone=1, "
            "or kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu)"
        )
        return False
    try:  # keep our own ids inside, so files and /dev/nvidia* keep their permissions
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        notes.append(f"user namespace id maps: {exc}")
    return True


def _user_tasks(uid: int) -> int:
    """Processes and threads `uid` runs now (what RLIMIT_NPROC counts)."""
    count = 0
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if entry.stat().st_uid == uid:
                count += len(os.listdir(entry / "task"))
    return count


def _rlimits(notes: list[str]) -> dict[str, int]:
    """No core dumps (they could hold the harness's memory), no giant files, a fork-bomb brake.
    Never RLIMIT_AS: CUDA reserves far more address space than it uses."""
    applied: dict[str, int] = {}

    def lower(name: str, which: int, value: int) -> None:
        soft, hard = resource.getrlimit(which)
        target = value if hard == resource.RLIM_INFINITY else min(value, hard)
        if soft != resource.RLIM_INFINITY and soft < target:
            target = soft
        try:
            resource.setrlimit(which, (target, target))
            applied[name] = target
        except (ValueError, OSError) as exc:
            notes.append(f"setrlimit({name}): {exc}")

    lower("core", resource.RLIMIT_CORE, 0)
    lower("fsize", resource.RLIMIT_FSIZE, FSIZE_LIMIT)
    lower("nproc", resource.RLIMIT_NPROC, _user_tasks(os.getuid()) + NPROC_HEADROOM)
    return applied


def _drop_capabilities(notes: list[str]) -> str:
    """Root keeps its uid (file ownership) but loses every capability, so it can neither join
    the host's network namespace again (setns needs CAP_SYS_ADMIN) nor override file modes.
    With no-new-privs and an empty bounding set, nothing it executes gets them back."""
    if os.geteuid() != 0:
        return "none-held"
    libc = _libc()
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = _CapHeader(version=_CAP_VERSION_3, pid=0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        notes.append(f"capset failed: {_err()}")
        return "kept"
    return "dropped"


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def restrict_writes(writable: list[Path], notes: list[str]) -> bool:
    """A further Landlock layer on this thread (and what it starts from now on): writes only
    beneath `writable`. Layers stack, so this can only take away. False (with a note) where
    Landlock is missing or refuses."""
    confined, _ = _landlock(_made(writable, notes), notes)
    return confined


def _made(writable: list[Path], notes: list[str]) -> list[Path]:
    """The writable folders, created where missing and resolved (one that cannot be is noted)."""
    folders = []
    for folder in writable:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            folders.append(folder.resolve())
        except OSError as exc:
            notes.append(f"cannot create writable folder {folder}: {exc}")
    return folders


CUDA_INIT_VAR = "KERNELWRIGHT_CUDA_INIT"  # "after-layers": this host's driver starts under the layers (probed)


def _init_cuda_driver(notes: list[str]) -> bool:
    """Initialise the CUDA driver in this process (cuInit); False, with a note, if it fails."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        notes.append(f"CUDA driver not loaded: {exc}")
        return False
    status = driver.cuInit(0)
    if status != 0:
        notes.append(f"cuInit returned {status}")
        return False
    return True


def confine(
    writable: list[Path],
    mode: SandboxMode,
    *,
    cuda: bool = False,
    before_exec: bool = False,
    network_namespace: bool = True,
) -> Isolation:
    """Put this process (and all it will start) under every layer the kernel allows. Call once,
    first thing, while the process is single-threaded; `writable` folders are created if needed.

    With `cuda`, the CUDA driver's initialisation starts helper threads (one on an H100 host with
    driver 580), and namespaces and Landlock cover only threads started after them. Where the
    harness's probe found the driver starts under the layers on this host (`CUDA_INIT_VAR` is
    "after-layers", see `cuda_after_layers`), the layers go on first and the driver's threads
    inherit them. Elsewhere the driver is initialised first (its first start may create device
    nodes through the setuid nvidia-modprobe, which no-new-privs forbids): the layers then go on
    this thread, which runs the candidate and starts everything it makes, the driver's threads
    stay outside (`Isolation.cuda_driver` says which), and a non-root worker gets no network
    namespace (a user namespace needs a single-threaded process; Landlock alone denies TCP).

    With `before_exec`, the caller replaces itself with another program next (`confined_exec`):
    threads already running (a profiler's injected library) end at that `exec`, and the new
    program starts single-threaded under the layers this thread carries, so they are no reason
    to refuse the layers.

    Without `network_namespace`, the process stays in the host's network namespace: for an
    ncu target, which ncu reaches through sockets of that namespace (measured on an H100: every
    other layer leaves ncu working, a namespace of the target's own makes it wait forever). The
    network is then closed by Landlock (TCP connect and bind) and by the seccomp filter (no
    connect, no datagram to an address, no sendmsg: nothing outbound of any family)."""
    notes: list[str] = []
    threads_before = _threads()
    after = cuda and os.environ.get(CUDA_INIT_VAR) == "after-layers" and threads_before == 1
    if cuda and not after:
        _init_cuda_driver(notes)
    folders = _made(writable, notes)
    if not sys.platform.startswith("linux"):
        return Isolation(mode=mode, network="none", filesystem="none", capabilities="kept", notes=["not Linux"])
    rlimits = _rlimits(notes)
    if threads_before > 1 and before_exec:
        notes.append(f"{threads_before - 1} thread(s) already running end at the exec that follows")
    elif threads_before > 1:
        notes.append("the worker already ran threads: namespaces and Landlock would not cover them")
        return Isolation(
            mode=mode, network="none", filesystem="none", rlimits=rlimits, capabilities="kept", notes=notes
        )
    driver: Literal["inside", "outside", "none"] = "none"
    driver_threads = _threads() - threads_before if cuda and not after else 0
    if driver_threads > 0:
        driver = "outside"
        notes.append(
            f"the CUDA driver's {driver_threads} helper thread(s), started by its initialisation, are outside "
            "the layers (they run driver code); this thread and all it starts are inside"
        )
    netns = _network_namespace(notes) if network_namespace else False
    if not network_namespace:
        notes.append("no network namespace (asked for: ncu reaches its target through the host's)")
    confined, tcp_denied = _landlock(folders, notes)
    caps = _drop_capabilities(notes)
    if before_exec:
        for fd in _PINNED:
            os.set_inheritable(fd, True)
    refused = seccomp.install()  # last: the layers above need calls it does not refuse, it needs no-new-privs
    if refused:
        notes.append(refused)
    if after:
        driver = "inside" if _init_cuda_driver(notes) else "none"
    network: Literal["namespace", "landlock-tcp", "none"] = (
        "namespace" if netns else "landlock-tcp" if tcp_denied else "none"
    )
    return Isolation(
        mode=mode,
        network=network,
        filesystem="landlock" if confined else "none",
        rlimits=rlimits,
        capabilities=caps,  # type: ignore[arg-type]
        sockets="allowed" if refused else "connect_denied",
        cuda_driver=driver,
        writable=[str(f) for f in folders] + ["/dev (existing devices, not /dev/shm)"],
        notes=notes,
    )


# Run in a throwaway child: confine as a worker would with the driver started after the layers,
# then use the device the way torch's first call does (context, allocation, a copy).
_CUDA_PROBE = """
import ctypes, json, os, sys, tempfile
from pathlib import Path
os.environ[sys.argv[1]] = "after-layers"
from kernelwright.harness.sandbox import confine
isolation = confine.confine([Path(sys.argv[2])], "best-effort", cuda=True)
answer = {"driver": isolation.cuda_driver, "notes": isolation.notes}
if isolation.cuda_driver == "inside":
    cu = ctypes.CDLL("libcuda.so.1")
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    steps = [("cuDeviceGet", lambda: cu.cuDeviceGet(ctypes.byref(dev), 0)),
             ("cuDevicePrimaryCtxRetain", lambda: cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)),
             ("cuCtxSetCurrent", lambda: cu.cuCtxSetCurrent(ctx)),
             ("cuMemAlloc", lambda: cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20))),
             ("cuMemsetD8", lambda: cu.cuMemsetD8_v2(ptr, 1, ctypes.c_size_t(1 << 20))),
             ("cuCtxSynchronize", lambda: cu.cuCtxSynchronize()),
             ("cuMemFree", lambda: cu.cuMemFree_v2(ptr))]
    for name, step in steps:
        status = step()
        if status != 0:
            answer["failed"] = f"{name} returned {status}"
            break
print(json.dumps(answer))
"""


@functools.cache
def cuda_after_layers() -> tuple[bool, str]:
    """Whether the CUDA driver works when started under every layer on this host (so its
    helper threads are confined too): found once per process by a throwaway child that confines
    itself first, then initialises the driver and allocates, writes and frees device memory.
    Returns (works, why not)."""
    if not sys.platform.startswith("linux"):
        return False, "not Linux"
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kw-cuda-probe-") as folder:
        try:
            done = subprocess.run(
                [sys.executable, "-c", _CUDA_PROBE, CUDA_INIT_VAR, folder],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                env={k: v for k, v in os.environ.items() if k != CUDA_INIT_VAR},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"probe did not finish: {exc}"
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return False, f"probe failed: {done.stderr.strip()[-300:] or 'no answer'}"
    if answer.get("driver") != "inside":
        return False, "; ".join(answer.get("notes", [])) or "the driver did not start under the layers"
    if answer.get("failed"):
        return False, str(answer["failed"])
    return True, ""


_PROBE = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
flags = 0x40000000 if os.geteuid() == 0 else 0x50000000
sys.stdout.write("ok" if libc.unshare(flags) == 0 else os.strerror(ctypes.get_errno()))
"""


@functools.cache
def probe() -> Isolation:
    """What a worker started now would get, found without confining this process: Landlock's ABI
    from the kernel, the network namespace from a throwaway child that tries it."""
    notes: list[str] = []
    netns = False
    if sys.platform.startswith("linux"):
        try:
            answer = subprocess.run(
                [sys.executable, "-S", "-c", _PROBE], capture_output=True, text=True, timeout=20, check=False
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            answer = str(exc)
        netns = answer == "ok"
        if not netns:
            who = "root" if os.geteuid() == 0 else "unprivileged user namespaces"
            notes.append(f"no network namespace ({who}: {answer or 'no answer'})")
    abi = landlock_abi()
    if abi < 1:
        notes.append("no Landlock (needs Linux >= 5.13 with landlock in the LSM list)")
    network: Literal["namespace", "landlock-tcp", "none"] = (
        "namespace" if netns else "landlock-tcp" if abi >= 4 else "none"
    )
    return Isolation(
        network=network,
        filesystem="landlock" if abi >= 1 else "none",
        rlimits={"core": 0} if sys.platform.startswith("linux") else {},
        capabilities="dropped" if os.geteuid() == 0 else "none-held",
        sockets="connect_denied" if seccomp.supported() else "allowed",
        notes=notes + ([f"Landlock ABI {abi}"] if abi else []),
    )
