"""`batch judge` end to end: the problem set, the candidates matched to it, the plan against the
results file, the workers (or Ray), the report."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from kernelwright.batch.ahead import JudgeWorker
from kernelwright.batch.engine import BatchOutcome, Runner, execute, plan_judge
from kernelwright.batch.events import Listener
from kernelwright.batch.judging import judge_task
from kernelwright.batch.problem_set import resolve_problem_set
from kernelwright.batch.report import write_report
from kernelwright.batch.spec import JudgeSpec, Slot

JUDGE_WORKER = "kernelwright.batch.worker"


def run_judge(
    refs: list[str],
    candidates: Path,
    out: Path,
    spec: JudgeSpec,
    slots: list[Slot],
    listener: Listener,
    *,
    ray_address: str | None = None,
    level: int | None = None,
    ids: set[int] | None = None,
    compare_baselines: Path | None = None,
) -> BatchOutcome:
    problem_set = resolve_problem_set(refs, level=level, ids=ids)
    plan = plan_judge(problem_set, candidates, spec, out)
    runner = Runner(
        slots, JUDGE_WORKER, judge_task, ray_address=ray_address, gpu=spec.device == "cuda", make_worker=JudgeWorker
    )
    init: dict[str, Any] = {
        "spec": spec.model_dump(mode="json"),
        "stage_dir": str(out / "staging"),
        "evidence_dir": str(out / "evidence"),
    }
    claims = out / "staging" / "build-claims"
    # workers build the whole plan ahead (`ahead.py`); on a Ray cluster, not `local`, they share no
    # files and are sent neither (`ray_runner.node_init`)
    init["plan"] = [{k: v for k, v in task.items() if k != "stubs"} for task in plan.tasks]
    init["claims_dir"] = str(claims)
    shutil.rmtree(claims, ignore_errors=True)  # a killed run's: nothing is being built for them now
    try:
        return execute(
            plan,
            runner,
            init,
            listener,
            write_report=lambda folder: write_report(folder, compare_baselines),
        )
    finally:
        shutil.rmtree(claims, ignore_errors=True)
