"""The reports of one `ask` session: one report, or a baseline and a candidate (`--compare`).

Each has a label (`report`, or `baseline` / `candidate`), a kernel in focus (the one `--kernel`
named, else the longest-running), and details read on first use (sections, descriptions,
hotspots: `profiler.report_details`). A reference such as `candidate:3` names a kernel for the
tools and for citations: a label, a label and a kernel index, or an index in the first report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kernelwright.errors import UsageError
from kernelwright.profiler import NcuKernel, NcuReport
from kernelwright.profiler.ncu_sections import sections_present
from kernelwright.profiler.report_details import ReportDetails, load_details
from kernelwright.profiler.report_file import open_report
from kernelwright.profiler.report_query import pick_kernel


class RefError(ValueError):
    """A kernel reference that names nothing in this session (tools answer with its text)."""


@dataclass
class AskReport:
    label: str
    report: NcuReport
    focus: NcuKernel
    path: Path | None = None
    _details: ReportDetails | None = field(default=None, init=False, repr=False)

    def details(self) -> ReportDetails:
        """Sections, descriptions and hotspots (read once, in a child process)."""
        if self._details is None:
            if self.report.source == "csv" or self.path is None:
                self._details = ReportDetails(
                    available=False,
                    note="this report was read from ncu's CSV export (the ncu_report module is not installed), "
                    "which has no metric descriptions, section list or source/SASS hotspots (pip install ncu-report)",
                )
            else:
                self._details = load_details(self.path)
        return self._details

    def sections(self, kernel: NcuKernel) -> set[str]:
        found = self.details().kernel(kernel.index)
        listed = [s.identifier for s in found.sections] if found is not None else None
        return sections_present(kernel, listed)

    def ref(self, kernel: NcuKernel) -> str:
        return f"{self.label}:{kernel.index}"

    @property
    def where(self) -> str:
        return f"the {self.label} ({self.path.name if self.path else 'in memory'})"


@dataclass
class ReportSet:
    reports: list[AskReport]

    @property
    def first(self) -> AskReport:
        return self.reports[0]

    @property
    def comparing(self) -> bool:
        return len(self.reports) == 2

    def by_label(self, label: str | None) -> AskReport:
        if not label:
            return self.first
        found = next((r for r in self.reports if r.label == label.strip().lower()), None)
        if found is None:
            raise RefError(f"no report {label!r} in this session (reports: {', '.join(self.labels)})")
        return found

    @property
    def labels(self) -> list[str]:
        return [r.label for r in self.reports]

    def kernel(self, report: str | None = None, kernel: str | int | None = None) -> tuple[AskReport, NcuKernel]:
        """A report by label (default: the first) and a kernel in it by index or name regex
        (default: its focus). RefError says what exists."""
        chosen = self.by_label(report)
        if kernel is None or (isinstance(kernel, str) and not kernel.strip()):
            return chosen, chosen.focus
        try:
            return chosen, pick_kernel(chosen.report, kernel, where=chosen.where)
        except UsageError as exc:
            raise RefError(exc.one_line().removeprefix("usage error: ")) from exc

    def resolve(self, ref: str | None) -> tuple[AskReport, NcuKernel]:
        """`candidate:3`, `candidate`, `3` or nothing (the first report's focus)."""
        text = (ref or "").strip()
        if not text:
            return self.first, self.first.focus
        label, _, index = text.partition(":")
        if not index and label.isdigit():
            label, index = "", label
        if index and not index.isdigit():
            raise RefError(f"bad reference {ref!r}: use LABEL, LABEL:INDEX or INDEX")
        return self.kernel(label or None, int(index) if index else None)


def open_reports(
    path: Path,
    *,
    compare: Path | None = None,
    kernel: str | None = None,
    compare_kernel: str | None = None,
) -> ReportSet:
    """Read the report (and the one to compare with) and pick the kernels in focus. UsageError for
    a file that is no report, EnvironmentProblem where no reader is available."""
    base = open_report(path)
    label = "baseline" if compare is not None else "report"
    first = AskReport(label, base, pick_kernel(base, kernel, where=f"the {label}"), path)
    if compare is None:
        return ReportSet([first])
    other = open_report(compare)
    second = AskReport("candidate", other, pick_kernel(other, compare_kernel, where="the candidate"), compare)
    return ReportSet([first, second])


def from_reports(*reports: NcuReport, kernels: tuple[str | int | None, ...] = ()) -> ReportSet:
    """A session over reports already read (tests, the TUI's digest screen): one, or baseline and candidate."""
    if not 1 <= len(reports) <= 2:
        raise ValueError("one report, or a baseline and a candidate")
    labels = ("report",) if len(reports) == 1 else ("baseline", "candidate")
    chosen = [*kernels, None, None]
    return ReportSet(
        [
            AskReport(label, r, pick_kernel(r, chosen[i], where=f"the {label}"), Path(r.path) if r.path else None)
            for i, (label, r) in enumerate(zip(labels, reports, strict=True))
        ]
    )
