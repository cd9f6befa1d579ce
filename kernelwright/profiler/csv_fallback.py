"""Read a report through `ncu --import FILE --csv` when the `ncu_report` module is missing.

`--page raw` gives one row per kernel launch (metric names as columns, a units row under the
header); `--page details` adds NCU's rule results (columns "Rule Name", "Estimated Speedup", ...).
"""

from __future__ import annotations

import csv
import io
import logging
import re
import subprocess
from pathlib import Path

from kernelwright.errors import EnvironmentProblem, UsageError
from kernelwright.profiler.report import Metric, MetricScalar, NcuKernel, NcuReport, RuleResult, normalize
from kernelwright.profiler.runner import find_ncu

log = logging.getLogger(__name__)

IMPORT_TIMEOUT_S = 120.0
_IDENTITY = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Device", "CC"}
_RULE_TYPES = {"OPT": "OPTIMIZATION", "WRN": "WARNING", "ERR": "ERROR", "INF": "OK"}
_NUMBER = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?([eE][+-]?\d+)?$")


def _number(text: str) -> MetricScalar:
    text = text.strip()
    if not text or text.lower() in ("n/a", "nan"):
        return None
    if _NUMBER.match(text):
        return float(text.replace(",", ""))
    return text


def _dims(text: str | None) -> tuple[int, int, int] | None:
    if not text:
        return None
    nums = re.findall(r"\d+", text)
    return (int(nums[0]), int(nums[1]), int(nums[2])) if len(nums) == 3 else None


def _rows(text: str) -> list[list[str]]:
    # ncu may print ==PROF==/==WARNING== lines before the table: start at the first quoted header.
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"')), len(lines))
    return list(csv.reader(io.StringIO("\n".join(lines[start:]))))


def parse_raw_csv(text: str) -> list[NcuKernel]:
    """Kernels from `ncu --import X --csv --page raw`."""
    rows = _rows(text)
    if len(rows) < 2:
        return []
    header = rows[0]
    units_row = rows[1] if rows[1] and not rows[1][0].strip().isdigit() else None
    data = rows[2:] if units_row is not None else rows[1:]
    kernels: list[NcuKernel] = []
    for row in data:
        if len(row) != len(header):
            continue
        fields = dict(zip(header, row, strict=True))
        metrics: dict[str, Metric] = {}
        for i, name in enumerate(header):
            if name in _IDENTITY or name in ("Block Size", "Grid Size"):
                continue
            unit = units_row[i] if units_row is not None and i < len(units_row) else ""
            value, unit = normalize(_number(row[i]), unit)
            metrics[name] = Metric(value=value, unit=unit)
        launch = _number(fields.get("ID", ""))
        grid = _dims(fields.get("Grid Size"))
        block = _dims(fields.get("Block Size"))
        kernel = NcuKernel(
            index=len(kernels),
            launch_id=int(launch) if isinstance(launch, float) else None,
            name=fields.get("Kernel Name", "?"),
            grid=grid,
            block=block,
            metrics=metrics,
        )
        if kernel.grid is None:
            kernel.grid = _dims_from_metrics(kernel, "grid")
        if kernel.block is None:
            kernel.block = _dims_from_metrics(kernel, "block")
        kernels.append(kernel)
    return kernels


def _dims_from_metrics(kernel: NcuKernel, prefix: str) -> tuple[int, int, int] | None:
    dims = [kernel.value(f"launch__{prefix}_dim_{axis}") for axis in "xyz"]
    if any(d is None for d in dims):
        return None
    return (int(dims[0] or 0), int(dims[1] or 0), int(dims[2] or 0))


def parse_details_rules(text: str) -> dict[int, list[RuleResult]]:
    """Rule results per launch ID from `ncu --import X --csv --page details`."""
    rows = _rows(text)
    if not rows:
        return {}
    header = rows[0]
    if "Rule Name" not in header:
        return {}
    out: dict[int, list[RuleResult]] = {}
    seen: set[tuple[int, str, str]] = set()
    for row in rows[1:]:
        if len(row) != len(header):
            continue
        f = dict(zip(header, row, strict=True))
        name = f.get("Rule Name", "").strip()
        launch = _number(f.get("ID", ""))
        if not name or not isinstance(launch, float):
            continue
        key = (int(launch), f.get("Section Name", ""), name)
        if key in seen:  # a rule is repeated on every metric row of its section in some versions
            continue
        seen.add(key)
        speedup = _number(f.get("Estimated Speedup", ""))
        out.setdefault(int(launch), []).append(
            RuleResult(
                rule=name,
                section=f.get("Section Name", ""),
                title=name,
                message=f.get("Rule Description", ""),
                type=_RULE_TYPES.get(f.get("Rule Type", "").upper(), f.get("Rule Type", "").upper()),
                speedup_pct=speedup if isinstance(speedup, float) else None,
                speedup_type=(f.get("Estimated Speedup Type") or "").lower() or None,
            )
        )
    return out


def from_csv_exports(raw: str, details: str | None = None, *, path: str | None = None) -> NcuReport:
    kernels = parse_raw_csv(raw)
    if details:
        rules = parse_details_rules(details)
        for k in kernels:
            if k.launch_id is not None:
                k.rules = rules.get(k.launch_id, [])
    return NcuReport(path=path, source="csv", kernels=kernels)


def _export(ncu: str, path: Path, page: str) -> str:
    cmd = [ncu, "--import", str(path), "--csv", "--page", page]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise EnvironmentProblem(f"`ncu --import` did not finish within {IMPORT_TIMEOUT_S:g} s") from exc
    except OSError as exc:
        raise EnvironmentProblem(f"cannot run ncu ({ncu}): {exc}") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise UsageError(f"ncu could not import {path}: {tail[0][:300]}")
    return proc.stdout


def load_via_ncu_import(path: Path) -> NcuReport:
    """Export the report to CSV with the ncu binary and parse it."""
    ncu = find_ncu()
    if ncu is None:
        raise EnvironmentProblem(
            "cannot read the report: neither the ncu_report module nor the ncu binary is available",
            hint="pip install ncu-report",
        )
    raw = _export(ncu, path, "raw")
    details = _export(ncu, path, "details")
    return from_csv_exports(raw, details, path=str(path))
