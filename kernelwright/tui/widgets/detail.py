"""The right-hand panes: the selected step's detail (the plan, tool calls and what they returned,
candidates, build errors, the review), the selected candidate's code with syntax highlighting and
its diff against the candidate its round started from, and its Nsight Compute digest with the
diff against the best candidate's. Files are read from the run folder; a missing one says so."""

from __future__ import annotations

import difflib
from pathlib import Path

from pydantic import ValidationError
from rich.console import Group
from rich.syntax import Syntax
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from kernelwright.agent.progress import Candidate, RunProgress, Step, verdict_mark
from kernelwright.profiler import NcuDigest
from kernelwright.profiler import diff as diff_digests

THEME = "ansi_dark"


def read_source(cand: Candidate) -> str | None:
    path = Path(cand.path) if cand.path else None
    if path is None or not path.is_file():
        return None
    try:
        return path.read_text()
    except OSError:
        return None


def step_text(step: Step | None) -> Text:
    if step is None:
        return Text("No step yet.", style="dim")
    took = f", {step.seconds:.1f} s" if step.seconds is not None else ""
    tokens = f", {step.tokens} tokens" if step.tokens else ""
    text = Text(f"round {step.round} · {step.label} · {step.status}{took}{tokens}\n\n", style="bold")
    text.append("\n\n".join(step.detail) if step.detail else "(nothing recorded for this step yet)")
    if step.status == "running":
        for stream in step.streams.values():  # the reply being written, live (never in a replay)
            tail = " ".join(stream.tail.split())
            text.append(f"\n\n{stream.label}: ~{stream.tokens:,} tokens so far … {tail}", style="dim")
    return text


def candidate_header(cand: Candidate) -> str:
    reason = f" ({cand.reason})" if cand.reason else ""
    speeds = ", ".join(
        f"{s['ratio']:.2f}x vs {name} [{s['ci_low']:.2f}-{s['ci_high']:.2f}]" for name, s in cand.speedups.items()
    )
    parent = f" · from #{cand.parent}" if cand.parent is not None else ""
    return f"#{cand.index} round {cand.round}{parent} · {verdict_mark(cand.verdict)} {cand.verdict}{reason}" + (
        f" · {speeds}" if speeds else ""
    )


def code_view(cand: Candidate | None) -> Group | Text:
    if cand is None:
        return Text("Select a candidate.", style="dim")
    source = read_source(cand)
    if source is None:
        return Text(f"{candidate_header(cand)}\n(its file {cand.path or '?'} is missing)")
    head = Text(candidate_header(cand), style="bold")
    if cand.message and cand.verdict != "correct":
        head.append("\n" + cand.message[:600], style="not bold")
    return Group(head, Syntax(source, "python", theme=THEME, line_numbers=True, word_wrap=False))


def diff_view(cand: Candidate | None, progress: RunProgress) -> Syntax | Text:
    if cand is None:
        return Text("Select a candidate.", style="dim")
    parent = progress.candidates.get(cand.parent) if cand.parent is not None else None
    source = read_source(cand)
    if source is None:
        return Text(f"(the file of #{cand.index} is missing)")
    if parent is None:
        return Text(f"#{cand.index} is a first version: no parent to compare with.", style="dim")
    before = read_source(parent)
    if before is None:
        return Text(f"(the file of #{parent.index}, its parent, is missing)")
    lines = list(
        difflib.unified_diff(
            before.splitlines(), source.splitlines(), f"#{parent.index}", f"#{cand.index}", lineterm="", n=2
        )
    )
    if not lines:
        return Text(f"#{cand.index} is the same source as #{parent.index}.", style="dim")
    return Syntax("\n".join(lines), "diff", theme=THEME, word_wrap=False)


def _digest_of(cand: Candidate) -> NcuDigest | None:
    if not cand.path:
        return None
    folder = Path(cand.path).parent.parent / "evidence" / f"{cand.index:03d}"
    path = folder / "digest.json"
    if not path.is_file():
        return None
    try:
        return NcuDigest.model_validate_json(path.read_text())
    except (OSError, ValidationError):
        return None


def profile_view(cand: Candidate | None, progress: RunProgress) -> Text:
    if cand is None:
        return Text("Select a candidate.", style="dim")
    if not cand.digest:
        why = cand.profile_note or (
            "only correct candidates are profiled" if cand.verdict != "correct" else "not profiled (yet)"
        )
        return Text(f"#{cand.index}: {why}", style="dim")
    text = Text(f"#{cand.index}", style="bold")
    if cand.own_pct is not None:
        text.append(f" · own kernels {cand.own_pct:.0f}% of GPU time")
    text.append("\n" + cand.digest)
    best = progress.best
    if best is not None and best.index != cand.index:
        ours, theirs = _digest_of(cand), _digest_of(best)
        if ours is not None and theirs is not None:
            text.append(f"\n\nagainst the best, #{best.index}:\n", style="bold")
            text.append(diff_digests(theirs, ours).to_text())
        else:
            text.append(f"\n\n(no stored digest of #{best.index} and #{cand.index} to compare)", style="dim")
    return text


class Pane(VerticalScroll):
    """A scrollable pane with one renderable."""

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(id=f"{self.id}-body")

    def set(self, renderable: object) -> None:
        self.query_one(Static).update(renderable)  # type: ignore[arg-type]
