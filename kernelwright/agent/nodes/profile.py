"""Profile: an Nsight Compute digest of each correct candidate of the round when the run is on a
GPU and ncu is there (`deps.profiler`); skipped with a note otherwise, so the reviewer never
guesses at counters. Digests are stored in the state (`profiles`, by candidate index) and as
evidence/NNN/digest.json beside the candidate's .ncu-rep; a resumed run reads them back."""

from __future__ import annotations

import time
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from kernelwright.agent import remember, runs
from kernelwright.agent.configuration import AgentConfig
from kernelwright.agent.deps import Deps
from kernelwright.agent.events import CandidateProfiled, ProfileSkipped
from kernelwright.agent.nodes.common import started, stopped_by_user
from kernelwright.agent.state import AgentState, CandidateRecord, ProfileRecord

DIGEST_CHARS = 2500


def skip_reason(cfg: AgentConfig, deps: Deps) -> str | None:
    if cfg.device != "cuda":
        return "profiling skipped: Nsight Compute profiles GPU kernels and this run is on the CPU"
    if deps.profiler is None:
        return f"profiling skipped: {deps.profiler_missing}"
    return None


def _profile_one(cand: CandidateRecord, cfg: AgentConfig, deps: Deps) -> tuple[ProfileRecord, bool]:
    assert deps.profiler is not None
    folder = cfg.run_dir / "evidence" / f"{cand['index']:03d}"
    report = folder / "candidate.ncu-rep"
    stored = runs.read_profile(folder)
    if stored is not None:
        return stored, True
    waiter = getattr(deps.evaluator, "wait_ready", None)
    if callable(waiter):
        waiter()  # the warm spare worker runs baselines on the GPU: never beside a profile
    found = deps.profiler.profile(runs.candidate_path(cfg.run_dir, cand["index"]), report)
    rec = ProfileRecord(
        index=cand["index"],
        text=found.text[:DIGEST_CHARS] if found.ok else "",
        own_pct=found.own_pct,
        report=str(found.report) if found.report else None,
        digest_json=None,
        note="" if found.ok else f"profiling failed: {found.text}"[:500],
    )
    if found.ok and found.digest_json:
        rec["digest_json"] = str(runs.store_profile(folder, rec, found.digest_json))
    return rec, False


def profile(state: AgentState, config: RunnableConfig) -> Command[Literal["reviewer", "__end__"]]:
    cfg, deps = AgentConfig.from_runnable_config(config), Deps.from_runnable_config(config)
    halt = stopped_by_user(state, deps)
    if halt is not None:
        return halt
    started(deps, state, "profile")
    why = skip_reason(cfg, deps)
    round_ = state.get("round", 0)
    todo = [
        c
        for c in state.get("candidates", [])
        if c["round"] == round_ and c["verdict"] == "correct" and str(c["index"]) not in state.get("profiles", {})
    ]
    if why is not None:
        deps.events.emit(ProfileSkipped(why=why))
        skipped = {
            str(c["index"]): ProfileRecord(
                index=c["index"], text="", own_pct=None, report=None, digest_json=None, note=why
            )
            for c in todo
        }
        return Command(goto="reviewer", update={"profile_note": why, "profiles": skipped})
    done: dict[str, ProfileRecord] = {}
    clock = time.monotonic()  # Nsight Compute holds the GPU: its time counts in the GPU-time budget
    for cand in todo:
        rec, cached = _profile_one(cand, cfg, deps)
        done[str(cand["index"])] = rec
        remember.annotate(cfg, deps, [cand["index"]], digest=rec["text"])
        if rec["note"]:
            deps.events.emit(ProfileSkipped(why=rec["note"], index=cand["index"]))
        else:
            deps.events.emit(
                CandidateProfiled(
                    index=cand["index"], digest=rec["text"], own_pct=rec["own_pct"], report=rec["report"], cached=cached
                )
            )
    last = state.get("last_candidate")
    focus = done.get(str(last["index"])) if last else None
    if focus is None and done:
        focus = next(iter(done.values()))
    note = (
        f"candidate {focus['index']}: " + (focus["text"] or focus["note"])
        if focus is not None
        else "profiling skipped: no correct candidate this round"
    )
    usage = {"gpu_s": time.monotonic() - clock} if todo else {}
    return Command(goto="reviewer", update={"profile_note": note, "profiles": done, "usage": usage})
