"""Profile with Nsight Compute: what `kernelwright profile` and the agent's profile step call.

Reports become digests (with a roofline where the GPU's peaks are known), a failed ncu run becomes
the right kernelwright error, and a candidate's report says which share of GPU time its own
kernels took.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

from kernelwright.errors import CandidateCrashed, EnvironmentProblem, KernelwrightError, UsageError
from kernelwright.hardware_specs import peaks
from kernelwright.harness.checks.static.analysis import analyze_candidate
from kernelwright.harness.sandbox import confine
from kernelwright.harness.sandbox.confined_exec import ISOLATION_FILE, wrapper_argv
from kernelwright.harness.sandbox.isolation import Isolation, looks_secret
from kernelwright.profiler import (
    DEFAULT_SECTIONS,
    NcuDigest,
    NcuOptions,
    ProfileResult,
    ProfileStatus,
    build_digest,
    kernel_ownership,
    load_report,
    profile_problem,
)
from kernelwright.vocabulary import SandboxMode, Size

log = logging.getLogger(__name__)
GPU_NAME_METRIC = "device__attribute_display_name"


def roofline_peaks(gpu_name: str | None) -> dict[str, Any]:
    """The peaks `build_digest` places a kernel against; empty (no roofline) for an unknown GPU."""
    if not gpu_name:
        return {}
    try:
        found = peaks(gpu_name)
    except KernelwrightError as exc:
        log.debug("no peaks for %s: %s", gpu_name, exc)
        return {}
    out: dict[str, Any] = {}
    if found.dram_bytes_per_s:
        out["peak_dram_bytes_per_s"] = float(found.dram_bytes_per_s)
    # The digest counts CUDA-core FLOPs from SASS, so the CUDA-core peaks are the roof.
    if found.cuda_core_flops:
        out["peak_flops"] = {str(k): float(v) for k, v in found.cuda_core_flops.items()}
    return out


def digest_file(path: Path, kernel_regex: str | None = None) -> NcuDigest:
    """The digest of the kernels in a `.ncu-rep` that match `kernel_regex` (all when None)."""
    report = load_report(path)
    if not report.kernels:
        raise UsageError(f"{path} holds no profiled kernels")
    selected = report.select(kernel_regex)
    if not selected:
        names = sorted({k.name for k in report.kernels})[:5]
        raise UsageError(f"no kernel in {path} matches {kernel_regex!r}", hint=f"kernels: {', '.join(names)}")
    digest = build_digest(selected, **roofline_peaks(selected[0].text(GPU_NAME_METRIC)))
    assert digest is not None
    return digest


# What the target prints when the candidate, not the sandbox, is the problem (profiler/target.py).
_CANDIDATE_FAILED = ("bad candidate file", "model raised")


def _describe(isolation: Isolation | None) -> str:
    if isolation is None:
        return "unknown: the sandbox's wrapper reported nothing"
    layers = [
        f"network {isolation.network}",
        f"files {isolation.filesystem}",
        f"capabilities {isolation.capabilities}",
        f"sockets {isolation.sockets}",
        "secrets removed from the environment",
    ]
    return "confined: " + ", ".join(layers)


def profile_candidate(
    problem: str,
    candidate: Path,
    *,
    report_path: Path,
    sandbox: SandboxMode = SandboxMode.BEST_EFFORT,
    options: NcuOptions | None = None,
    warmup: int = 3,
    iters: int = 1,
    size: Size = Size.DEFAULT,
    timeout_s: float = 300.0,
    build_cache: Path | None = None,
) -> ProfileResult:
    """Profile a candidate under ncu with its target inside the sandbox's layers (Landlock,
    no capabilities, no socket reaching a peer, TCP denied; the shared build cache only read:
    builds the harness completed are loaded, others made in the target's scratch) but in the
    host's network namespace, through which ncu attaches to it (`confined_exec`). Secrets never
    reach ncu or the target. The target starts the CUDA driver after the layers, so on a host
    whose driver does not start under them (`confine.cuda_after_layers`), and where ncu fails on
    a confined target, best-effort profiles without the layers; `ProfileResult.sandbox` says
    which. Strict refuses to profile a candidate at all: its target cannot have the full set.
    `options` to `build_cache` are `profile_problem`'s."""

    def unconfined() -> ProfileResult:
        return profile_problem(
            problem,
            candidate,
            report_path=report_path,
            options=options,
            warmup=warmup,
            iters=iters,
            size=size,
            timeout_s=timeout_s,
            build_cache=build_cache,
            drop_env=looks_secret,
        )

    if sandbox == SandboxMode.STRICT:
        return ProfileResult(
            status=ProfileStatus.FAILED,
            message="--sandbox strict: a candidate's ncu target cannot get the full set of layers: ncu attaches "
            "to it through the host's network namespace, so it cannot have one of its own",
            hint="`--sandbox best-effort` profiles it under every other layer (TCP and outbound sockets still refused)",
            sandbox="refused",
        )
    works, why = confine.cuda_after_layers()
    if not works:
        result = unconfined()
        result.sandbox = f"none: this host's CUDA driver does not start under the layers ({why}); secrets removed"
        return result
    with tempfile.TemporaryDirectory(prefix="kw-profile-") as scratch:
        root = Path(scratch)
        result = profile_problem(
            problem,
            candidate,
            report_path=report_path,
            options=options,
            warmup=warmup,
            iters=iters,
            size=size,
            timeout_s=timeout_s,
            build_cache=build_cache,
            launcher=wrapper_argv(root, sandbox),
            private_build_cache=root / "build-cache",
            drop_env=looks_secret,
        )
        written = root / ISOLATION_FILE
        isolation = Isolation.model_validate_json(written.read_text()) if written.is_file() else None
    result.sandbox = _describe(isolation)
    text = result.stderr_tail + result.stdout_tail
    if result.ok or any(marker in text for marker in _CANDIDATE_FAILED):
        return result
    log.warning("ncu could not profile the sandboxed target (%s); profiling without the sandbox", result.one_line())
    retry = unconfined()
    retry.sandbox = f"none: under the sandbox ncu failed ({result.one_line()[:300]}); profiled without it"
    return retry


def ensure_ok(result: ProfileResult) -> None:
    """A failed ncu run as the kernelwright error that gives it its exit code."""
    if result.ok:
        return
    text = result.message
    if result.sandbox == "refused":  # --sandbox strict: what this machine (or ncu) cannot give (exit 5)
        raise EnvironmentProblem(text, hint=result.hint)
    if result.status in (ProfileStatus.NCU_MISSING, ProfileStatus.NO_PERMISSION, ProfileStatus.NO_GPU):
        raise EnvironmentProblem(text, hint=result.hint)
    if result.status is ProfileStatus.NO_KERNEL_MATCHED:
        raise UsageError(text, hint=result.hint)
    tail = (result.stderr_tail or result.stdout_tail).strip().splitlines()[-1:]
    raise CandidateCrashed(f"profiling {result.status.value}: {text}", hint=tail[0][:200] if tail else result.hint)


def ncu_options(
    sections: list[str] | None, source: bool, kernel: str | None, skip: int, count: int | None
) -> NcuOptions:
    chosen: list[str] = []
    for item in sections or []:
        chosen += [s.strip() for s in item.split(",") if s.strip()]
    return NcuOptions(
        sections=tuple(chosen) or DEFAULT_SECTIONS,
        source_counters=source,
        kernel_regex=kernel,
        launch_skip=skip,
        launch_count=count,
    )


def candidate_ownership(candidate: Path, report_path: Path) -> dict[str, Any]:
    """ncu's second opinion on "the candidate's own kernels did the work": the share of GPU time
    in the kernels the candidate's source defines."""
    analysis = analyze_candidate(candidate.read_text())
    owned = kernel_ownership(load_report(report_path), analysis.own_kernels)
    return owned.model_dump(mode="json") | {"own_pct": owned.own_pct, "text": owned.to_text()}
