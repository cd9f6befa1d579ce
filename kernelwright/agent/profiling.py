"""The run's Nsight Compute profiler: the real `Profiler` of `deps.py`, built when the run is on a
GPU and `ncu` is found. It profiles one forward pass of a candidate (built in the run's build
cache, where the evaluation left it), digests the report and measures how much GPU time the
candidate's own kernels took. A failed ncu run is a result with its one-line reason, not an error.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import CandidateProfile
from kernelwright.config import Settings
from kernelwright.errors import KernelwrightError
from kernelwright.profiler import NcuOptions, find_ncu
from kernelwright.tools.profile import candidate_ownership, digest_file, profile_candidate
from kernelwright.vocabulary import SandboxMode, Size

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NcuProfiler:
    problem: str
    size: Size
    build_cache: Path | None
    options: NcuOptions = field(default_factory=lambda: NcuOptions(launch_count=None))
    timeout_s: float = 300.0
    sandbox: SandboxMode = SandboxMode.BEST_EFFORT

    def profile(self, candidate: Path, report_path: Path) -> CandidateProfile:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        result = profile_candidate(
            self.problem,
            candidate,
            report_path=report_path,
            sandbox=self.sandbox,
            options=self.options,
            size=self.size,
            timeout_s=self.timeout_s,
            build_cache=self.build_cache,
        )
        log.info("profiled %s: %s", candidate.name, result.sandbox)
        if not result.ok or result.report_path is None:
            return CandidateProfile(ok=False, text=result.one_line())
        try:
            digest = digest_file(result.report_path)
            owned = candidate_ownership(candidate, result.report_path)
        except KernelwrightError as exc:  # an empty or unreadable report
            return CandidateProfile(ok=False, text=exc.one_line(), report=result.report_path)
        own = owned.get("own_pct")
        text = digest.to_text()
        if owned.get("text"):
            text += f"\nownership: {owned['text']}"
        return CandidateProfile(
            ok=True,
            text=text,
            own_pct=float(own) if own is not None else None,
            report=result.report_path,
            digest_json=digest.model_dump_json(),
        )


def make_profiler(config: AgentConfig, settings: Settings) -> tuple[NcuProfiler | None, str]:
    """(the profiler, or None with why) for a run: only on cuda, only when ncu is found."""
    if config.device != "cuda":
        return None, "this run is on the CPU"
    if find_ncu() is None:
        return None, "ncu (Nsight Compute) was not found ($KERNELWRIGHT_NCU, PATH, /usr/local/cuda/bin)"
    return NcuProfiler(config.problem, config.size, settings.build_cache_dir, sandbox=settings.sandbox), ""
