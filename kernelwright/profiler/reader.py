"""Reading a `.ncu-rep` file into an `NcuReport`.

With NVIDIA's `ncu_report` module (it works on machines without a GPU), run in a child process
because some of its versions crash on some metrics; where that module is missing or crashed,
`ncu --import FILE --csv` output is parsed instead (see `csv_fallback`).
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

from kernelwright.errors import EnvironmentProblem, UsageError
from kernelwright.profiler.csv_fallback import load_via_ncu_import
from kernelwright.profiler.report import Metric, MetricScalar, NcuKernel, NcuReport, RuleResult, normalize

log = logging.getLogger(__name__)


def _dim3(action: Any, prefix: str) -> tuple[int, int, int] | None:
    dims = []
    for axis in "xyz":
        metric = action.metric_by_name(f"launch__{prefix}_dim_{axis}")
        if metric is None or not metric.has_value():
            return None
        dims.append(int(metric.as_uint64()))
    return (dims[0], dims[1], dims[2])


def _metric_value(metric: Any) -> MetricScalar:
    try:
        if not metric.has_value():
            return None
        value = metric.value()
    except (RuntimeError, ValueError, TypeError) as exc:  # odd metric kinds: keep going
        log.debug("metric %s unreadable: %s", metric.name(), exc)
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return None if value is None else str(value)


_MSG_TYPES = {0: "NONE", 1: "OK", 2: "OPTIMIZATION", 3: "WARNING", 4: "ERROR"}
_SPEEDUP_TYPES = {0: "unknown", 1: "local", 2: "global"}


def _enum_name(value: Any, table: dict[int, str]) -> str:
    """ncu_report hands enums back as IntEnum members or plain ints depending on its version."""
    if value is None:
        return ""
    if isinstance(value, int):
        return table.get(int(value), str(int(value)))
    name = getattr(value, "name", None)
    return (name if isinstance(name, str) else str(value)).rsplit("_", 1)[-1]


def _rules(action: Any) -> list[RuleResult]:
    try:
        raw = action.rule_results_as_dicts()
    except (AttributeError, RuntimeError) as exc:
        log.debug("no rule results: %s", exc)
        return []
    rules = []
    for item in raw or []:
        message = item.get("rule_message") or {}
        speedup = item.get("speedup_estimation")
        speedup = speedup if isinstance(speedup, dict) else {}
        value = speedup.get("speedup")
        rules.append(
            RuleResult(
                rule=str(item.get("rule_identifier") or item.get("name") or ""),
                section=str(item.get("section_identifier") or ""),
                title=str(message.get("title") or item.get("name") or ""),
                message=str(message.get("message") or ""),
                type=_enum_name(message.get("type"), _MSG_TYPES).upper(),
                speedup_pct=float(value) if isinstance(value, int | float) else None,
                speedup_type=_enum_name(speedup.get("type"), _SPEEDUP_TYPES).lower() or None,
            )
        )
    return rules


def _from_ncu_report(path: Path) -> NcuReport:
    import ncu_report  # type: ignore[import-not-found]

    try:
        ctx = ncu_report.load_report(str(path))
    except (FileNotFoundError, RuntimeError, OSError) as exc:
        raise UsageError(f"cannot read Nsight Compute report {path}: {exc}") from exc
    kernels: list[NcuKernel] = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            metrics: dict[str, Metric] = {}
            for name in action.metric_names():
                metric = action.metric_by_name(name)
                if metric is None:
                    continue
                raw = _metric_value(metric)
                # ncu_report 2025.3 can crash in unit() on a metric without a value: ask only for numbers.
                value, unit = normalize(raw, metric.unit() or "") if isinstance(raw, float) else (raw, "")
                metrics[name] = Metric(value=value, unit=unit)
            launch_id = metrics.get("ID")
            kernels.append(
                NcuKernel(
                    index=len(kernels),
                    launch_id=int(launch_id.value) if launch_id and isinstance(launch_id.value, float) else None,
                    name=action.name(),
                    mangled=action.name(action.NameBase_MANGLED),
                    grid=_dim3(action, "grid"),
                    block=_dim3(action, "block"),
                    metrics=metrics,
                    rules=_rules(action),
                )
            )
    return NcuReport(path=str(path), source="ncu_report", kernels=kernels)


def _from_ncu_report_isolated(path: Path) -> NcuReport | None:
    """Read the report with `ncu_report` in a child process: some ncu_report versions segfault on
    some metrics (seen with 2025.3.1), which must not take the caller down. None if it failed."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kernelwright.profiler.reader", str(path)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired:
        log.warning("reading %s with ncu_report timed out", path)
        return None
    if done.returncode == 2:  # a clean, explained failure (unreadable file): the child said why
        raise UsageError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"cannot read {path}")
    if done.returncode != 0:
        log.warning("ncu_report failed reading %s (exit %s); falling back to `ncu --import`", path, done.returncode)
        return None
    return NcuReport.model_validate_json(done.stdout)


def ncu_report_available() -> bool:
    try:
        import ncu_report  # noqa: F401
    except ImportError:
        return False
    return True


def load_report(path: Path | str, *, prefer: Literal["auto", "ncu_report", "csv"] = "auto") -> NcuReport:
    """Load a `.ncu-rep` file. With `prefer="auto"` use `ncu_report`, else fall back to CSV export
    through the `ncu` binary. Raises UsageError for a missing/unreadable file and
    EnvironmentProblem when neither reader is available."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"no such report: {path}")
    if prefer in ("auto", "ncu_report") and ncu_report_available():
        loaded = _from_ncu_report_isolated(path)
        if loaded is not None:
            return loaded
        if prefer == "ncu_report":
            raise EnvironmentProblem(
                f"the ncu_report module crashed reading {path}", hint="try --prefer csv (needs ncu)"
            )
    if prefer == "ncu_report":
        raise EnvironmentProblem("the ncu_report module is not installed", hint="pip install ncu-report")
    return load_via_ncu_import(path)


if __name__ == "__main__":  # the isolated reader: `python -m kernelwright.profiler.reader FILE`
    try:
        print(_from_ncu_report(Path(sys.argv[1])).model_dump_json())
    except UsageError as exc:
        print(exc.message, file=sys.stderr)
        sys.exit(2)
