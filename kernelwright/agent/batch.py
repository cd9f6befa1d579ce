"""`batch optimize`: the agent on every problem of a set, one problem per task, through the same
workers, results file and report as `batch judge` (`batch/`).

Each problem gets a run folder of its own, `OUT/runs/batch-<problem>/` (the id is fixed by the
problem, so a rerun resumes a run that a kill interrupted), and one results line when its run
ends: the best candidate's verdict and speedups, whether it reached the target, its cost. With
`--scripted` the package's scripted session for the problem and device (`relu-cpu`, ...) stands
in for the LLM; a problem no script knows ends as `no_script`, cleanly.

`python -m kernelwright.agent.batch` is an optimise worker (started by the batch, never by hand).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelwright.agent import runs
from kernelwright.agent.assembly import assemble
from kernelwright.agent.configuration import AgentConfig, RunFlags
from kernelwright.agent.events import _Event
from kernelwright.agent.runner import RunOutcome, RunSteering, run
from kernelwright.agent.scripted import ScriptDiverged, ScriptExhausted
from kernelwright.agent.scripts import SCRIPTS
from kernelwright.batch.engine import BatchOutcome, BatchPlan, Runner, execute, problem_fields, problem_task
from kernelwright.batch.events import Listener
from kernelwright.batch.pool import Emit, serve
from kernelwright.batch.problem_set import ProblemSet, resolve_problem_set
from kernelwright.batch.report import write_report
from kernelwright.batch.results import BatchRecord, Manifest, ResultsFile, SpeedupFigure, done_keys
from kernelwright.batch.spec import Slot
from kernelwright.config import Settings, load_settings
from kernelwright.errors import ExitCode, KernelwrightError
from kernelwright.vocabulary import Device

log = logging.getLogger(__name__)
OPTIMIZE_WORKER = "kernelwright.agent.batch"


def run_id_for(qualified: str) -> str:
    return "batch-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in qualified)


def script_for(problem_name: str, device: str) -> str | None:
    """The shipped scripted session for this problem on this device, if there is one."""
    name = f"{problem_name.lower()}-{device}"
    return name if name in SCRIPTS else None


def plan_optimize(problem_set: ProblemSet, out: Path, device: str, scripted: bool) -> BatchPlan:
    manifest = Manifest(
        mode="optimize",
        judged_with={"device": device, "scripted": scripted},
        problems=[p.summary() for p in problem_set.problems],
        problem_errors=[e.message for e in problem_set.errors],
    )
    manifest.check_compatible(Manifest.load(out), out)
    done = done_keys(ResultsFile(out).read())
    plan = BatchPlan("optimize", out, manifest, [], problem_errors=list(problem_set.errors))
    for problem in problem_set.problems:
        key = f"{problem.qualified}::optimize"
        plan.keys.append(key)
        earlier = done.get(key)
        if earlier is not None and earlier.problem_sha256 == problem.sha256:
            plan.already_done += 1
            continue
        task = problem_task(problem, len(plan.tasks))
        task["name"] = problem.name
        task["run_id"] = run_id_for(problem.qualified)
        task["stubs"][key] = BatchRecord(kind="optimize", key=key, **problem_fields(problem)).model_dump(mode="json")
        plan.tasks.append(task)
    return plan


def _status(emit: Emit, problem: str) -> Any:
    """An event-stream subscriber: the run's main steps as the worker's status line."""

    def on_event(event: _Event) -> None:
        e: Any = event
        kind = getattr(event, "kind", "")
        if kind == "plan_written":
            text = f"round {e.round}: plan written"
        elif kind == "candidate_evaluated":
            text = f"candidate {e.index}: {e.verdict}" + (f" ({e.reason})" if e.reason else "")
        elif kind == "run_finished":
            text = f"stopped: {e.stop_reason}"
        else:
            return
        emit({"type": "status", "problem": problem, "text": text})

    return on_event


def _record(stub: BatchRecord, config: AgentConfig, outcome: RunOutcome | None, seconds: float) -> BatchRecord:
    """The results line of a finished (or diverged) run, from its state or its summary.json."""
    summary = runs.read_summary(config.run_dir) or {}
    state: Any = outcome.state if outcome is not None else summary
    best = state.get("best")
    candidates = list(state.get("candidates", []))
    last = best or (candidates[-1] if candidates else None)
    usage = state.get("usage", {}) or {}
    times: dict[str, float] = {}
    if best:
        stored = runs.stored_result(config.run_dir, str(best["sha256"]))
        if stored is not None:
            times = {name: stats.median_ms for name, stats in stored.timings.items()}
    accepted = bool(state.get("accepted"))
    stop = outcome.stop_reason if outcome is not None else str(summary.get("stop_reason", ""))
    return stub.model_copy(
        update={
            "verdict": last["verdict"] if last else None,
            "reason": None if best else (last["reason"] if last else "no_candidate"),
            "message": f"{len(candidates)} candidate(s) in {state.get('round', 0)} round(s); {stop}"[:600],
            "exit_code": int(ExitCode.OK if accepted else ExitCode.NEEDS_ATTENTION),
            "speedups": {
                name: SpeedupFigure(ratio=s["ratio"], ci_low=s["ci_low"], ci_high=s["ci_high"])
                for name, s in (best["speedups"] if best else {}).items()
            },
            "times_ms": times,
            "seconds": seconds,
            "cost_usd": float(usage.get("cost_usd", 0.0)),
            "tokens": int(usage.get("total_tokens", 0)),
            "run_id": config.run_id,
            "accepted": accepted,
            "stop_reason": stop,
            "evidence": f"runs/{config.run_id}/summary.json",
        }
    )


def optimize_task(init: dict[str, Any], slot: Slot, task: dict[str, Any], emit: Emit) -> None:
    """Run (or resume) the agent on one problem and emit its results line."""
    [(_key, stub_data)] = task["stubs"].items()
    stub = BatchRecord.model_validate(stub_data).model_copy(update={"worker": slot.label})
    flags = RunFlags.from_given(init["flags"])
    assert flags.device is not None  # `run_optimize` always sends it
    home, runs_dir = init["overrides"].get("home"), init["overrides"].get("runs_dir")
    settings = load_settings(
        Path(init["config_file"]) if init.get("config_file") else None,
        home=Path(home) if home else None,
        runs_dir=Path(runs_dir) if runs_dir else None,
    )
    stub = stub.model_copy(update={"device": flags.device})
    if init.get("scripted"):
        script = script_for(task["name"], flags.device)
        if script is None:
            known = ", ".join(SCRIPTS)
            emit(_no_script(stub, f"no scripted session for {task['name']} on {flags.device} (known: {known})"))
            return
        flags = replace(flags, scripted=script)
    if flags.device == Device.CPU and slot.threads:
        flags = replace(flags, num_threads=slot.threads)
    run_id = task["run_id"]
    start = time.monotonic()
    config: AgentConfig | None = None
    try:
        config, resume = _config(settings, task, flags)
        with assemble(config, settings) as parts:
            steering = RunSteering(resume=resume, subscribers=(_status(emit, task["problem"]), *parts.script_watch()))
            outcome = run(config, parts, steering)
        record = _record(stub, config, outcome, time.monotonic() - start)
    except (ScriptExhausted, ScriptDiverged) as exc:
        assert config is not None  # a script runs only once the run is configured
        record = _record(stub, config, None, time.monotonic() - start).model_copy(
            update={"reason": "script_diverged", "message": exc.message[:600], "accepted": False, "exit_code": 1}
        )
    except KernelwrightError as exc:  # the LLM endpoint, the machine: retried next time; a bad problem file: final
        record = stub.model_copy(
            update={
                "kind": "problem_error",
                "reason": "problem_error" if exc.exit_code == ExitCode.USAGE else "error",
                "message": exc.one_line()[:600],
                "exit_code": int(exc.exit_code),
                "final": exc.exit_code == ExitCode.USAGE,
                "run_id": run_id,
            }
        )
    emit({"type": "result", "record": record.model_dump(mode="json")})


def _config(settings: Settings, task: dict[str, Any], flags: RunFlags) -> tuple[AgentConfig, bool]:
    """The problem's run: resumed when its folder holds an unfinished run, else a new one."""
    runs_dir = Path(settings.runs_dir)
    run_id = task["run_id"]
    summary = runs.read_summary(runs_dir / run_id)
    if (runs_dir / run_id / "config.json").is_file() and not (summary or {}).get("finished"):
        return runs.load_config(runs_dir, run_id).with_credentials(settings), True
    return AgentConfig.from_settings(settings, task["problem_path"], flags, run_id=run_id), False


def _no_script(stub: BatchRecord, why: str) -> dict[str, Any]:
    record = stub.model_copy(
        update={
            "reason": "no_script",
            "message": why,
            "exit_code": int(ExitCode.NEEDS_ATTENTION),
            "accepted": False,
            "stop_reason": "no script",
        }
    )
    return {"type": "result", "record": record.model_dump(mode="json")}


def run_optimize(
    refs: list[str],
    out: Path,
    flags: RunFlags,
    slots: list[Slot],
    listener: Listener,
    *,
    scripted: bool = False,
    config_file: Path | None = None,
    home: Path | None = None,
    ray_address: str | None = None,
    level: int | None = None,
    ids: set[int] | None = None,
    compare_baselines: Path | None = None,
) -> BatchOutcome:
    """`flags.device` must be given (resolved: cpu or cuda)."""
    assert flags.device is not None
    problem_set = resolve_problem_set(refs, level=level, ids=ids)
    plan = plan_optimize(problem_set, out, str(flags.device), scripted)
    if plan.tasks:  # a bad flag ends the command here (exit 2), not once in every worker
        settings = load_settings(config_file, home=home)
        AgentConfig.from_settings(settings, plan.tasks[0]["problem_path"], flags, run_id="check")
    init = {
        "flags": flags.given(),
        "scripted": scripted,
        "config_file": str(config_file) if config_file else None,
        "overrides": {"runs_dir": str((out / "runs").resolve()), "home": str(home) if home else None},
    }
    runner = Runner(slots, OPTIMIZE_WORKER, optimize_task, ray_address=ray_address, gpu=flags.device == Device.CUDA)
    return execute(
        plan,
        runner,
        init,
        listener,
        write_report=lambda folder: write_report(folder, compare_baselines),
    )


if __name__ == "__main__":
    serve(optimize_task)
