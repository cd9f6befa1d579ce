"""What this machine has for kernelwright: GPU, driver, torch/triton, nvcc, a C++ compiler, ncu
and counter permission, nsight-python, and the sandbox layers the kernel offers. `kernelwright
doctor` prints these checks; each is a value with a level, a detail and how to fix it."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tempfile
from enum import StrEnum
from importlib.util import find_spec
from pathlib import Path

from pydantic import BaseModel

from kernelwright.hardware_specs import live_gpus, nvidia_smi
from kernelwright.harness.sandbox import confine
from kernelwright.profiler.runner import NcuOptions, ProfileStatus, find_ncu, ncu_version, run_ncu
from kernelwright.profiler.sweep import nsight_fits_ncu, nsight_python_version

CMD_TIMEOUT_S = 30.0
COMPILE_TIMEOUT_S = 60.0
PROFILE_TIMEOUT_S = 120.0
_PROBE = "import torch; x = torch.ones(1024, device='cuda'); torch.cuda.synchronize(); print((x * 2).sum().item())"


class Level(StrEnum):
    OK = "OK"
    WARN = "WARN"
    FAIL = "FAIL"


class Check(BaseModel):
    name: str
    level: Level
    detail: str
    fix: str | None = None


class DoctorReport(BaseModel):
    checks: list[Check]

    @property
    def failed(self) -> bool:
        return any(c.level is Level.FAIL for c in self.checks)


def _run(cmd: list[str], timeout: float = CMD_TIMEOUT_S) -> tuple[int | None, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return None, "not found"
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:g} s"
    except OSError as exc:
        return None, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_gpu() -> tuple[Check, bool]:
    if find_spec("torch") is None:
        return Check(name="torch", level=Level.FAIL, detail="torch is not installed", fix="make setup"), False
    gpus = live_gpus()
    if not gpus:
        return Check(
            name="GPU",
            level=Level.WARN,
            detail="no CUDA GPU visible (CPU path works)",
            fix="run on a GPU host to evaluate CUDA/Triton candidates",
        ), False
    first = gpus[0]
    detail = f"{len(gpus)}x {first.name}, cc {first.compute_capability}, {first.sms} SMs"
    return Check(name="GPU", level=Level.OK, detail=detail), True


def check_driver(has_gpu: bool) -> Check:
    answer = nvidia_smi(("driver_version",))
    if answer.missing:
        level = Level.FAIL if has_gpu else Level.WARN
        return Check(name="driver", level=level, detail="nvidia-smi not found", fix="install the NVIDIA driver")
    if answer.error is not None:
        return Check(name="driver", level=Level.WARN, detail=f"nvidia-smi failed: {answer.error}")
    return Check(name="driver", level=Level.OK, detail=answer.rows[0][0] if answer.rows else "?")


def check_torch() -> list[Check]:
    checks = []
    try:
        import torch

        cuda = torch.version.cuda or "none (CPU build)"
        checks.append(Check(name="torch", level=Level.OK, detail=f"{torch.__version__}, CUDA {cuda}"))
    except ImportError:
        checks.append(Check(name="torch", level=Level.FAIL, detail="not installed", fix="make setup"))
    triton = _version("triton")
    checks.append(
        Check(name="triton", level=Level.OK, detail=triton)
        if triton
        else Check(name="triton", level=Level.WARN, detail="not installed", fix="install triton for Triton candidates")
    )
    return checks


def check_nvcc() -> Check:
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
    if nvcc is None:
        return Check(
            name="nvcc", level=Level.WARN, detail="not found", fix="install the CUDA toolkit for CUDA candidates"
        )
    code, out = _run([nvcc, "--version"])
    match = re.search(r"release (\d+\.\d+)", out)
    if code != 0 or not match:
        return Check(name="nvcc", level=Level.WARN, detail=f"`nvcc --version` failed: {out[-200:]}")
    return Check(name="nvcc", level=Level.OK, detail=f"{match.group(1)} ({nvcc})")


def check_cxx() -> Check:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        return Check(
            name="C++ compiler", level=Level.FAIL, detail="no g++/c++ found", fix="install g++ (build-essential)"
        )
    with tempfile.TemporaryDirectory(prefix="kw-doctor-") as tmp:
        src = Path(tmp) / "smoke.cpp"
        src.write_text("#include <vector>\nint main() { std::vector<int> v(3, 1); return v[0] - 1; }\n")
        code, out = _run([cxx, "-O1", "-std=c++17", str(src), "-o", str(Path(tmp) / "smoke")], COMPILE_TIMEOUT_S)
        if code != 0:
            return Check(
                name="C++ compiler", level=Level.FAIL, detail=f"smoke compile failed: {out[-200:]}", fix="check g++"
            )
        code, out = _run([str(Path(tmp) / "smoke")])
    if code != 0:
        return Check(name="C++ compiler", level=Level.FAIL, detail=f"smoke binary exited {code}")
    return Check(name="C++ compiler", level=Level.OK, detail=f"{cxx} compiled and ran a test program")


def check_ncu(has_gpu: bool) -> list[Check]:
    ncu = find_ncu()
    if ncu is None:
        return [
            Check(
                name="ncu",
                level=Level.WARN,
                detail="Nsight Compute not found (profiling off; reading reports still works)",
                fix="install Nsight Compute and put `ncu` on PATH",
            )
        ]
    version = ncu_version(ncu)
    checks = [Check(name="ncu", level=Level.OK if version else Level.WARN, detail=f"{version or '?'} ({ncu})")]
    if not has_gpu:
        checks.append(Check(name="ncu counters", level=Level.WARN, detail="not checked: no GPU"))
        return checks
    with tempfile.TemporaryDirectory(prefix="kw-doctor-") as tmp:
        result = run_ncu(
            [sys.executable, "-c", _PROBE],
            Path(tmp) / "probe.ncu-rep",
            NcuOptions(sections=("SpeedOfLight",), extra_metrics=(), launch_count=1),
            timeout_s=PROFILE_TIMEOUT_S,
        )
    if result.ok:
        checks.append(
            Check(name="ncu counters", level=Level.OK, detail=f"profiled a kernel in {result.duration_s:.1f} s")
        )
    else:
        level = Level.FAIL if result.status is ProfileStatus.NO_PERMISSION else Level.WARN
        checks.append(Check(name="ncu counters", level=level, detail=result.message, fix=result.hint))
    return checks


def check_nsight_python() -> Check:
    nsight = nsight_python_version()
    if nsight is None:
        return Check(
            name="nsight-python",
            level=Level.WARN,
            detail="not installed (no sweeps)",
            fix="pip install 'nsight-python>=0.9.6,<1'",
        )
    ncu = ncu_version()
    if ncu is None:
        return Check(name="nsight-python", level=Level.WARN, detail=f"{nsight}; ncu missing, sweeps off")
    fits, why = nsight_fits_ncu(nsight, ncu)
    if fits:
        return Check(name="nsight-python", level=Level.OK, detail=why)
    return Check(name="nsight-python", level=Level.FAIL, detail=why, fix="pip install 'nsight-python>=0.9.6,<1'")


def _layer(name: str, present: bool, ok: str, missing: str, fix: str) -> Check:
    """One sandbox layer: OK where the machine offers it, else a warning saying what strict needs."""
    if present:
        return Check(name=name, level=Level.OK, detail=ok)
    return Check(name=name, level=Level.WARN, detail=missing + "; needed by --sandbox strict", fix=fix)


def check_sandbox(has_gpu: bool = False) -> list[Check]:
    """The candidate sandbox's layers (docs/threat-model.md): missing ones are warnings, since
    `--sandbox best-effort` (the default) runs without them; `--sandbox strict` needs them all.
    With a GPU, whether the CUDA driver starts under the layers (its threads confined too)."""
    found = confine.probe()
    network = _layer(
        "sandbox net",
        found.network == "namespace",
        "network namespace per worker (no network, loopback down)",
        "only TCP denied (Landlock)" if found.network == "landlock-tcp" else "candidates can reach the network",
        "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 "
        "kernel.apparmor_restrict_unprivileged_userns=0), or run workers as root in a container with CAP_SYS_ADMIN",
    )
    files = _layer(
        "sandbox files",
        found.filesystem == "landlock",
        f"Landlock ABI {confine.landlock_abi()}: writes confined to the worker's folders",
        "no Landlock: candidates can write anywhere this user can",
        "Linux >= 5.13 with `landlock` in the LSM list (boot with lsm=landlock,... or CONFIG_LSM)",
    )
    env = Check(name="sandbox env", level=Level.OK, detail="scrubbed (allow-list; keys and tokens never passed)")
    limits = Check(
        name="sandbox limits",
        level=Level.OK if found.rlimits else Level.WARN,
        detail="core dumps off, file size and process count limited" if found.rlimits else "not Linux: no limits",
    )
    sockets = _layer(
        "sandbox sockets",
        found.sockets == "connect_denied",
        "seccomp: connect, sendto to an address, sendmsg and io_uring refused (no socket reaches a peer)",
        "no seccomp filter on this platform: socket files (an SSH agent, a Docker daemon) are reachable",
        "Linux on x86_64 or aarch64",
    )
    checks = [env, network, files, sockets, limits]
    if has_gpu:
        works, why = confine.cuda_after_layers()
        checks.append(
            _layer(
                "sandbox cuda",
                works,
                "the CUDA driver starts under the layers: its helper threads are confined too",
                f"the CUDA driver starts before the layers, its helper threads outside them ({why})",
                "nothing to set: this host's driver needs at its start something the layers forbid (run "
                "scripts/diag_cuda_layers.py to see which, and report it); best-effort runs with its helper threads "
                "outside them, and a profiled candidate's ncu target unconfined (docs/threat-model.md)",
            )
        )
    return checks


def run_checks() -> DoctorReport:
    gpu, has_gpu = check_gpu()
    checks = [gpu, check_driver(has_gpu), *check_torch(), check_nvcc(), check_cxx()]
    checks += [*check_ncu(has_gpu), check_nsight_python(), *check_sandbox(has_gpu)]
    return DoctorReport(checks=checks)
