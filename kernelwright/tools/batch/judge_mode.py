"""`batch judge` end to end: the problem set, the candidates matched to it, the plan against the
results file, the workers (or Ray), the report."""

from __future__ import annotations

from pathlib import Path

from kernelwright.tools.batch.engine import BatchOutcome, Runner, execute, plan_judge
from kernelwright.tools.batch.events import Listener
from kernelwright.tools.batch.judging import judge_task
from kernelwright.tools.batch.problem_set import resolve_problem_set
from kernelwright.tools.batch.report import write_report
from kernelwright.tools.batch.spec import JudgeSpec, Slot

JUDGE_WORKER = "kernelwright.tools.batch.worker"


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
    runner = Runner(slots, JUDGE_WORKER, judge_task, ray_address=ray_address, gpu=spec.device == "cuda")
    init = {
        "spec": spec.model_dump(mode="json"),
        "stage_dir": str(out / "staging"),
        "evidence_dir": str(out / "evidence"),
    }
    return execute(
        plan,
        runner,
        init,
        listener,
        write_report=lambda folder: write_report(folder, compare_baselines),
        ray_local_cpus=len(slots),
    )
