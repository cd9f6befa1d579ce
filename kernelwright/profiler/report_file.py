"""Opening a `.ncu-rep` a person named: a file that is no Nsight Compute report, or one that holds
no kernel results, is a one-line usage error before anyone asks it anything.

`ncu_report` reads a file of any other kind (or a truncated report) as a report with no kernels,
without an error, so the file's signature is checked first: every `.ncu-rep` begins with the bytes
`NVR\\0`.
"""

from __future__ import annotations

from pathlib import Path

from kernelwright.errors import UsageError
from kernelwright.profiler.reader import load_report
from kernelwright.profiler.report import NcuReport

SIGNATURE = b"NVR\x00"


def check_report_file(path: Path) -> None:
    """UsageError unless `path` is a readable file that starts like an Nsight Compute report."""
    if not path.is_file():
        raise UsageError(f"no such report: {path}")
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SIGNATURE))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if head != SIGNATURE:
        what = "an empty file" if not head else "not an Nsight Compute report (.ncu-rep)"
        raise UsageError(f"{path} is {what}", hint="give a report written by `ncu -o FILE`")


def open_report(path: Path | str) -> NcuReport:
    """The report at `path`, read with `ncu_report` or through `ncu --import` (see `reader`);
    UsageError for a file that is no report or holds no kernels, EnvironmentProblem when neither
    reader is available."""
    path = Path(path)
    check_report_file(path)
    report = load_report(path)
    if not report.kernels:
        raise UsageError(
            f"{path} holds no kernel results: the report is truncated or corrupt, or ncu profiled nothing",
            hint="open it with `ncu --import FILE` to check",
        )
    return report
