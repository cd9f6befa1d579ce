"""A run's program database as a dataset: one JSON line per candidate (`runs export --format jsonl`).

The search keeps every candidate a run judged (its code, the idea it implements, its parent, its
verdict and timings); exported, those trajectories can train or evaluate models. The layout is
close to KernelBook's (GPUMODE/KernelBook: `python_code` for the PyTorch reference, `triton_code`
for the kernel, `entry_point` for the module's class), with our names where theirs would not be
true: a candidate may be CUDA, C++ or Triton, so its source is `kernel_code`, and the backend says
which. `Row` is the one definition of a line: the export builds every line through it, and
`load_export` reads a file back through it, so a line that does not fit is an error naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelwright.agent import runs
from kernelwright.agent.problems import problem_of
from kernelwright.errors import InternalError, UsageError
from kernelwright.harness.sandbox.isolation import redact
from kernelwright.harness.verdicts import Reason, Verdict
from kernelwright.vocabulary import Backend, Device

ROW_SCHEMA_VERSION: Literal[1] = 1
ENTRY_POINT = "ModelNew"  # the class every candidate defines (the harness loads it by that name)


class ExportError(UsageError):
    """An export file that does not load: not JSON, or a line that does not fit `Row`."""

    title = "bad export file"


class SpeedupEntry(BaseModel):
    """How a candidate compares with one baseline: the ratio of medians, its 95% CI, and the
    medians themselves when they were measured."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ratio: float = Field(description="Baseline median / candidate median: above 1 the candidate is faster.")
    ci_low: float
    ci_high: float
    baseline_median_ms: float | None = None
    candidate_median_ms: float | None = None


class Row(BaseModel):
    """One candidate of one run, as a line of the dataset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = ROW_SCHEMA_VERSION
    run_id: str
    index: int = Field(description="The candidate's number in its run (candidates/NNN.py); 0 is a start point.")
    round: int
    attempt: int = Field(description="The coder turn of its round (1: the first draft, above: a repair).")
    problem: str = Field(description="The problem's qualified name (`level1/1_relu`).")
    python_code: str | None = Field(
        description="The PyTorch reference (class Model), as KernelBook's `python_code`; None when the "
        "problem can no longer be found."
    )
    entry_point: str = Field(default=ENTRY_POINT, description="The class the kernel code defines.")
    plan: str | None = Field(description="The idea the candidate implements (the planner's plan).")
    parents: list[int] = Field(
        description="The candidates its idea started from (indexes in the same run): its parent first, then any "
        "its idea combined with it."
    )
    kernel_code: str = Field(description="The candidate's source, as judged.")
    sha256: str = Field(description="SHA-256 of kernel_code.")
    backend: Backend
    device: Device
    size: str = Field(description="The problem size it was judged at.")
    verdict: Verdict
    reason: Reason | None
    feedback: str = Field(description="The harness's message about it.")
    stderr_tail: str = Field(default="", description="The end of its build or run log (a build error's text).")
    speedups: dict[str, SpeedupEntry] = Field(description="Per baseline (eager, compile, ...); empty unless correct.")
    target_baseline: str | None = Field(description="The baseline the run's target is measured against.")
    beats_target: bool
    profile: str | None = Field(description="Its Nsight Compute digest, when it was profiled.")
    tags: list[str] = Field(description="Technique tags, derived from its code and its plan.")


def _reference(problem: str) -> tuple[str, str | None]:
    """(qualified name, source) of a run's problem; the name as given and no source when it is gone."""
    try:
        found = problem_of(problem)
    except UsageError:
        return problem, None
    return found.qualified, found.source


def _profile(run_dir: Path, summary: dict[str, Any], index: int) -> str | None:
    record = (summary.get("profiles") or {}).get(str(index)) or runs.read_profile(run_dir / "evidence" / f"{index:03d}")
    return (record.get("text") or None) if record else None


def _row(run_dir: Path, summary: dict[str, Any], config: dict[str, Any], ref: tuple[str, str | None], c: Any) -> Row:
    index = int(c["index"])
    path = runs.candidate_path(run_dir, index)
    if not path.is_file():
        raise UsageError(f"run {run_dir.name}: candidate file {path} is missing")
    source = path.read_text()
    sha = runs.source_sha(source)
    result = runs.stored_result(run_dir, sha)
    parent = c.get("parent")
    return Row.model_validate(
        {
            "run_id": run_dir.name,
            "index": index,
            "round": c["round"],
            "attempt": c.get("attempt", 0),
            "problem": ref[0],
            "python_code": ref[1],
            "plan": c.get("idea") or None,
            "parents": ([] if parent is None else [parent]) + [int(i) for i in c.get("also") or []],
            "kernel_code": source,
            "sha256": sha,
            "backend": summary.get("backend") or config.get("backend"),
            "device": summary.get("device") or config.get("device"),
            "size": result.size if result else str(config.get("size", "default")),
            "verdict": c["verdict"],
            "reason": c.get("reason"),
            "feedback": result.message if result else c.get("message", ""),
            "stderr_tail": result.stderr_tail if result else "",
            "speedups": c.get("speedups") or {},
            "target_baseline": c.get("target_baseline"),
            "beats_target": c.get("beats_target", False),
            "profile": _profile(run_dir, summary, index),
            "tags": c.get("tags") or [],
        }
    )


def export_rows(runs_dir: Path, run_id: str) -> list[Row]:
    """Every candidate of run `run_id`, in index order, each checked against `Row`. An unknown run
    or one without a summary is a UsageError; a run without candidates gives no rows."""
    run_dir = runs_dir / run_id
    if not (run_dir / "config.json").is_file():
        raise UsageError(f"no run {run_id!r} in {runs_dir}", hint="`kernelwright runs list` shows the runs")
    summary = runs.read_summary(run_dir)
    if summary is None:
        raise UsageError(f"run {run_id} has no summary.json yet (still running, or killed before it wrote one)")
    config = json.loads((run_dir / "config.json").read_text())
    candidates = sorted(summary.get("candidates", []), key=lambda c: int(c["index"]))
    if not candidates:
        return []
    ref = _reference(str(summary.get("problem") or config.get("problem")))
    try:
        return [_row(run_dir, summary, config, ref, c) for c in candidates]
    except ValidationError as exc:  # the run folder holds something the row cannot say: a bug, not a user error
        raise InternalError(f"run {run_id}: a candidate does not fit the export's schema: {exc}") from exc


def to_jsonl(rows: list[Row]) -> str:
    """The rows as JSON lines (secret values redacted, as in summary.json)."""
    return "".join(redact(row.model_dump_json()) + "\n" for row in rows)


def load_export(path: Path) -> list[Row]:
    """An export file read back, every line checked against `Row`; a line that is not JSON or
    does not fit is an ExportError naming the file and the line."""
    if not path.is_file():
        raise ExportError(f"no export file {path}")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(Row.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the line"
            raise ExportError(f"{path}, line {number}: {where}: {first['msg']} ({exc.error_count()} error(s))") from exc
    return rows
