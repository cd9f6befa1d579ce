"""Run a command under Nsight Compute (`ncu`) and classify what happened.

Every expected failure (ncu missing, counters not permitted, no GPU, no kernel matched, timeout)
is a `ProfileResult` with a status, a one-line message and a hint, never an exception.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field

from kernelwright.errors import ExitCode

log = logging.getLogger(__name__)

DEFAULT_SECTIONS: tuple[str, ...] = (
    "SpeedOfLight",
    "LaunchStats",
    "Occupancy",
    "ComputeWorkloadAnalysis",
    "MemoryWorkloadAnalysis",
    "SchedulerStats",
    "WarpStateStats",
)
SOURCE_SECTION = "SourceCounters"

# Metrics the digest reads that the default sections do not all carry: DRAM bytes, shared-memory
# bank conflicts and the SASS operation counts the roofline turns into FLOPs.
EXTRA_METRICS: tuple[str, ...] = (
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hfma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dfma_pred_on.sum",
)
TAIL_CHARS = 4000
NCU_ENV = "KERNELWRIGHT_NCU"  # an explicit ncu binary, for hosts where it is not on PATH


class ProfileStatus(StrEnum):
    OK = "ok"
    NCU_MISSING = "ncu_missing"
    NO_PERMISSION = "no_permission"
    NO_GPU = "no_gpu"
    NO_KERNEL_MATCHED = "no_kernel_matched"
    TIMEOUT = "timeout"
    FAILED = "failed"

    @property
    def exit_code(self) -> ExitCode:
        return _EXIT[self]


_EXIT = {
    ProfileStatus.OK: ExitCode.OK,
    ProfileStatus.NCU_MISSING: ExitCode.ENVIRONMENT,
    ProfileStatus.NO_PERMISSION: ExitCode.ENVIRONMENT,
    ProfileStatus.NO_GPU: ExitCode.ENVIRONMENT,
    ProfileStatus.NO_KERNEL_MATCHED: ExitCode.USAGE,
    ProfileStatus.TIMEOUT: ExitCode.CRASH,
    ProfileStatus.FAILED: ExitCode.CRASH,
}

_HINTS = {
    ProfileStatus.NCU_MISSING: "install Nsight Compute and put `ncu` on PATH (or set KERNELWRIGHT_NCU)",
    ProfileStatus.NO_PERMISSION: "run as root, or set the driver option NVreg_RestrictProfilingToAdminUsers=0 "
    "(see https://developer.nvidia.com/ERR_NVGPUCTRPERM)",
    ProfileStatus.NO_GPU: "profiling needs an NVIDIA GPU; `kernelwright profile --report FILE` works without one",
    ProfileStatus.NO_KERNEL_MATCHED: "check --kernel REGEX and --launch-skip, or that the program launches "
    "GPU kernels at all",
    ProfileStatus.TIMEOUT: "raise the timeout or profile fewer launches (--launch-count, --kernel)",
    ProfileStatus.FAILED: "see the stderr tail; rerun with --debug",
}


class ProfileResult(BaseModel):
    """The outcome of one ncu run: a report on success, a classified failure otherwise."""

    status: ProfileStatus
    message: str
    hint: str | None = None
    command: list[str] = []
    report_path: Path | None = None
    returncode: int | None = None
    duration_s: float = 0.0
    stdout_tail: str = ""
    stderr_tail: str = ""
    sandbox: str = Field(
        default="",
        description="How the profiled target was isolated (set by who ran it; empty: not sandboxed, e.g. a reference).",
    )

    @property
    def ok(self) -> bool:
        return self.status is ProfileStatus.OK

    @property
    def exit_code(self) -> ExitCode:
        return self.status.exit_code

    def one_line(self) -> str:
        text = f"{self.status.value}: {self.message}"
        return f"{text} ({self.hint})" if self.hint and not self.ok else text


@dataclass(frozen=True)
class NcuOptions:
    """What to collect and which launches to profile."""

    sections: tuple[str, ...] = DEFAULT_SECTIONS
    source_counters: bool = False
    kernel_regex: str | None = None
    launch_skip: int = 0
    launch_count: int | None = 1
    extra_metrics: tuple[str, ...] = EXTRA_METRICS
    profile_from_start: bool = True  # False: only between cudaProfilerStart/Stop
    clock_control: str = "none"
    extra_args: tuple[str, ...] = field(default_factory=tuple)


def find_ncu() -> str | None:
    """The ncu executable: $KERNELWRIGHT_NCU, then PATH, then the usual CUDA location."""
    explicit = os.environ.get(NCU_ENV)
    if explicit:
        return explicit if Path(explicit).exists() else None
    found = shutil.which("ncu")
    if found:
        return found
    fallback = Path("/usr/local/cuda/bin/ncu")
    return str(fallback) if fallback.exists() else None


def ncu_version(ncu: str | None = None, *, timeout_s: float = 30.0) -> str | None:
    """ncu's version as `YYYY.M.P` (None when ncu is missing or does not answer)."""
    ncu = ncu or find_ncu()
    if ncu is None:
        return None
    try:
        proc = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"(\d{4}\.\d+\.\d+)", proc.stdout + proc.stderr)
    return match.group(1) if match else None


def build_command(target: Sequence[str], report_path: Path, options: NcuOptions, *, ncu: str = "ncu") -> list[str]:
    """The ncu command line that profiles `target` into `report_path` (.ncu-rep)."""
    cmd = [ncu, "--clock-control", options.clock_control]
    sections = [*options.sections]
    if options.source_counters and SOURCE_SECTION not in sections:
        sections.append(SOURCE_SECTION)
    for section in sections:
        cmd += ["--section", section]
    if options.extra_metrics:
        cmd += ["--metrics", ",".join(options.extra_metrics)]
    if options.kernel_regex:
        cmd += ["-k", f"regex:{options.kernel_regex}"]
    if options.launch_skip:
        cmd += ["--launch-skip", str(options.launch_skip)]
    if options.launch_count is not None:
        cmd += ["--launch-count", str(options.launch_count)]
    if not options.profile_from_start:
        cmd += ["--profile-from-start", "off"]
    cmd += [*options.extra_args, "-f", "-o", str(report_path), *target]
    return cmd


def _tail(text: str | bytes | None, limit: int = TAIL_CHARS) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return text if len(text) <= limit else "…" + text[-limit:]


_NO_GPU = re.compile(
    r"KW_NO_GPU|no CUDA-capable device|No CUDA GPUs are available|cudaErrorNoDevice|"
    r"CUDA driver version is insufficient|Found no NVIDIA driver|No supported GPU|No GPU devices? found",
    re.IGNORECASE,
)


def _last_error(text: str) -> str | None:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if line.startswith("==ERROR==") or "Error" in line or "error:" in line:
            return line.removeprefix("==ERROR==").strip()[:300]
    return lines[-1][:300] if lines else None


def classify(returncode: int | None, stdout: str, stderr: str, *, report_exists: bool) -> tuple[ProfileStatus, str]:
    """Map ncu's exit code and output to a status and a one-line message."""
    text = f"{stdout}\n{stderr}"
    if "ERR_NVGPUCTRPERM" in text:
        return ProfileStatus.NO_PERMISSION, "the GPU's performance counters are not permitted for this user"
    if _NO_GPU.search(text):
        return ProfileStatus.NO_GPU, "no usable NVIDIA GPU was found"
    if returncode != 0:
        detail = _last_error(text) or "no output"
        return ProfileStatus.FAILED, f"ncu or the profiled program exited with code {returncode}: {detail}"
    if "No kernels were profiled" in text or not report_exists:
        return ProfileStatus.NO_KERNEL_MATCHED, "no kernel launch matched the filters; ncu profiled nothing"
    return ProfileStatus.OK, "profiled"


def _failure(status: ProfileStatus, message: str, **kwargs: object) -> ProfileResult:
    return ProfileResult(status=status, message=message, hint=_HINTS.get(status), **kwargs)  # type: ignore[arg-type]


def run_ncu(
    target: Sequence[str],
    report_path: Path,
    options: NcuOptions | None = None,
    *,
    timeout_s: float = 300.0,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ProfileResult:
    """Profile `target` (argv) under ncu, writing `report_path`; failures come back as values."""
    options = options or NcuOptions()
    ncu = find_ncu()
    if ncu is None:
        return _failure(ProfileStatus.NCU_MISSING, "Nsight Compute (`ncu`) is not on PATH")
    report_path = Path(report_path)
    if report_path.suffix != ".ncu-rep":
        report_path = report_path.with_name(report_path.name + ".ncu-rep")
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.unlink(missing_ok=True)
    cmd = build_command(target, report_path, options, ncu=ncu)
    log.debug("running %s", " ".join(cmd))
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,  # so a timeout can end ncu and the program it runs together
        )
    except OSError as exc:
        return _failure(ProfileStatus.NCU_MISSING, f"cannot run ncu ({ncu}): {exc}", command=cmd)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return _failure(
            ProfileStatus.TIMEOUT,
            f"profiling did not finish within {timeout_s:g} s",
            command=cmd,
            duration_s=time.monotonic() - start,
            stdout_tail=_tail(out),
            stderr_tail=_tail(err),
        )
    duration = time.monotonic() - start
    stdout, stderr = _tail(out, 10 * TAIL_CHARS), _tail(err, 10 * TAIL_CHARS)
    status, message = classify(proc.returncode, stdout, stderr, report_exists=report_path.exists())
    return ProfileResult(
        status=status,
        message=message if status is not ProfileStatus.OK else f"profiled into {report_path}",
        hint=_HINTS.get(status),
        command=cmd,
        report_path=report_path if report_path.exists() else None,
        returncode=proc.returncode,
        duration_s=duration,
        stdout_tail=_tail(stdout),
        stderr_tail=_tail(stderr),
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def target_command(
    problem: str,
    candidate: Path | None = None,
    *,
    warmup: int = 3,
    iters: int = 1,
    size: str = "default",
    build_cache: Path | None = None,
    python: str | None = None,
    private_build_cache: Path | None = None,
) -> list[str]:
    """argv of the target script that runs a problem (or a candidate for it) for ncu; the
    candidate's extensions come from `build_cache` (None: the target's configured one)."""
    cmd = [python or sys.executable, "-m", "kernelwright.profiler.target", problem]
    if candidate is not None:
        cmd.append(str(candidate))
    cmd += ["--warmup", str(warmup), "--iters", str(iters), "--size", size]
    if private_build_cache is not None:
        cmd += ["--private-build-cache", str(private_build_cache)]
    return [*cmd, "--build-cache", str(build_cache)] if build_cache is not None else cmd


def profile_problem(
    problem: str,
    candidate: Path | None = None,
    *,
    report_path: Path,
    options: NcuOptions | None = None,
    warmup: int = 3,
    iters: int = 1,
    size: str = "default",
    timeout_s: float = 300.0,
    build_cache: Path | None = None,
    launcher: Sequence[str] = (),
    private_build_cache: Path | None = None,
    drop_env: Callable[[str], bool] | None = None,
) -> ProfileResult:
    """Profile one forward pass of a problem's reference (or of a candidate's ModelNew) after warm-up.
    `launcher` is put before the target's command (a sandbox that then execs it), and
    `private_build_cache` is where a target that may not write `build_cache` builds, and
    variables whose names `drop_env` picks never reach ncu or the target (secrets).

    Only the launches between cudaProfilerStart/Stop are profiled (the target script brackets the
    measured iterations with them), so warm-up and setup kernels never reach the report. The
    candidate's extensions are built in `build_cache` (None: the configured one), where `eval`
    left them.
    """
    base = options or NcuOptions(launch_count=None)
    opts = NcuOptions(
        sections=base.sections,
        source_counters=base.source_counters,
        kernel_regex=base.kernel_regex,
        launch_skip=base.launch_skip,
        launch_count=base.launch_count,
        extra_metrics=base.extra_metrics,
        profile_from_start=False,
        clock_control=base.clock_control,
        extra_args=base.extra_args,
    )
    env = {k: v for k, v in os.environ.items() if drop_env is None or not drop_env(k)}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    cmd = target_command(
        problem,
        candidate,
        warmup=warmup,
        iters=iters,
        size=size,
        build_cache=build_cache,
        private_build_cache=private_build_cache,
    )
    return run_ncu([*launcher, *cmd], report_path, opts, timeout_s=timeout_s, env=env)
