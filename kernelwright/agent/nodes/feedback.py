"""What the coder reads about its failed draft, mapped onto that draft.

- A build error: each compiler diagnostic (gcc/clang `file:line:col: error: ...`, nvcc
  `file(line): error: ...`) placed on the line of the candidate file where the kernel source is a
  string literal in it, found by the text of the generated file's line (the harness's build folder
  is readable here), with that line quoted; where it cannot be placed, the generated file's own
  line is quoted instead. Then the end of the log.
- An incorrect result: the failing trial (index, seed, input distribution, shapes, shape variant,
  layout), the errors against the tolerance, where the outputs first differ.
- A crash or a timeout: the message and the end of the worker's log.
- A rejection: the reason's entry from the registry (what it means and why it does not count, and
  the policy in force) with the harness's one-line evidence; never the detector's internals, so
  the loop does not teach the model how the checks work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kernelwright.harness.checks.static.common import python_parser
from kernelwright.harness.reasons import REASONS
from kernelwright.harness.result import EvalResult, TrialResult
from kernelwright.harness.verdicts import Verdict

_FILE = r"(?P<file>[^\s:()'\"]+\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp))"
_NEXT = r"(?=;\s+[^\s:()'\"]+\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp)[:(]|$)"
# g++/clang `file:line[:col]: error: msg`, also as the harness's one-line summary joins them
# (`a.cpp:6: error: x; a.cpp:9: error: y`); nvcc `file(line): error: msg`.
_GCC = re.compile(
    rf"(?:^|\s){_FILE}:(?P<line>\d+):(?:\d+:)?\s*(?P<kind>fatal error|error|warning):\s*(?P<msg>.*?){_NEXT}",
    re.MULTILINE,
)
_NVCC = re.compile(
    rf"(?:^|\s){_FILE}\((?P<line>\d+)\):\s*(?P<kind>error|warning)[^:]*:\s*(?P<msg>.*?){_NEXT}", re.MULTILINE
)
_QUOTED = re.compile(r"[‘'\"`](?P<name>[A-Za-z_]\w*)[’'\"`]")
_PREFIX_LINES = {"main.cpp": 1, "cuda.cu": 3}
"""Lines `load_inline` writes before the sources it is given (its includes); fastext writes the
source as it is."""
MAX_DIAGNOSTICS = 8


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    kind: str
    message: str


def diagnostics(log: str) -> list[Diagnostic]:
    """The compiler's errors in a build log or the harness's message (warnings only when there is
    no error), in order, deduplicated."""
    found: list[Diagnostic] = []
    for raw in log.splitlines():
        for match in sorted([*_GCC.finditer(raw), *_NVCC.finditer(raw)], key=lambda m: m.start()):
            diag = Diagnostic(match["file"], int(match["line"]), match["kind"], match["msg"].strip())
            if diag not in found:
                found.append(diag)
    errors = [d for d in found if "error" in d.kind]
    return errors or found


def literal_lines(source: str) -> list[tuple[int, int]]:
    """The (first, last) 1-based line ranges of the multi-line string literals in a Python file."""
    tree = python_parser().parse(source.encode())
    spans: list[tuple[int, int]] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "string":
            first, last = node.start_point[0] + 1, node.end_point[0] + 1
            if last > first:
                spans.append((first, last))
            continue
        stack.extend(node.children)
    return sorted(spans)


def place(diag: Diagnostic, source: str) -> tuple[int | None, str]:
    """(the candidate file's line, or None; the code line quoted) for one diagnostic: by the text
    of the generated file's line where that file can be read, else by where the build writes the
    literal (as it is, or after `load_inline`'s includes), kept only where the names the message
    quotes are on that line."""
    generated = _read_line(diag.file, diag.line)
    if generated is None:
        return _by_offset(diag, source)
    wanted = generated.strip()
    if not wanted:
        return None, generated
    lines = source.splitlines()
    hits = [
        number
        for first, last in literal_lines(source)
        for number in range(first, last + 1)
        if number <= len(lines) and lines[number - 1].strip() == wanted
    ]
    if len(hits) == 1:
        return hits[0], lines[hits[0] - 1]
    if len(hits) > 1:  # the same text on several lines: the one nearest its place in the generated file
        return min(hits, key=lambda n: abs(n - diag.line)), wanted
    return None, generated


def _by_offset(diag: Diagnostic, source: str) -> tuple[int | None, str]:
    names = [m["name"] for m in _QUOTED.finditer(diag.message)]
    if not names:
        return None, ""
    lines = source.splitlines()
    prefix = _PREFIX_LINES.get(Path(diag.file).name, 0)
    hits = []
    for first, last in literal_lines(source):
        number = first + diag.line - 1 - prefix
        if first <= number <= last and number <= len(lines) and all(n in lines[number - 1] for n in names):
            hits.append(number)
    if len(hits) == 1:
        return hits[0], lines[hits[0] - 1]
    return None, ""


def _read_line(file: str, line: int) -> str | None:
    try:
        lines = Path(file).read_text(errors="replace").splitlines()
    except OSError:
        return None
    return lines[line - 1] if 0 < line <= len(lines) else None


def build_feedback(log: str, source: str, limit: int) -> str:
    diags = diagnostics(log)
    out: list[str] = []
    for diag in diags[:MAX_DIAGNOSTICS]:
        number, quoted = place(diag, source)
        name = Path(diag.file).name
        if number is not None:
            out.append(
                f"- line {number} of your file (line {diag.line} of the generated {name}): {diag.kind}: {diag.message}"
            )
            out.append(f"    {quoted.strip()}")
        else:
            out.append(
                f"- line {diag.line} of the generated {name} (not found in your file): {diag.kind}: {diag.message}"
            )
            if quoted.strip():
                out.append(f"    {quoted.strip()}")
    if len(diags) > MAX_DIAGNOSTICS:
        out.append(f"- ... and {len(diags) - MAX_DIAGNOSTICS} more diagnostics")
    text = "Compiler diagnostics, placed on your file:\n" + "\n".join(out) + "\n" if out else ""
    tail = log[-limit:]
    marker = f"[the log's first {len(log) - limit} characters are left out]\n" if len(log) > limit else ""
    return f"{text}End of the build log:\n{marker}{tail}"


def trial_text(trial: TrialResult) -> str:
    variant = "default shapes" if trial.variant is None else f"shape variant {trial.variant}"
    layout = "contiguous" if trial.contiguous else "non-contiguous"
    text = (
        f"trial {trial.index} (seed {trial.seed}, inputs drawn from {trial.distribution}, {variant}, {layout}"
        + (", written into the previous trial's buffers" if trial.reused_addresses else "")
        + f"; shapes {', '.join(trial.shapes) or '?'})"
    )
    errors = []
    if trial.max_abs_error is not None:
        errors.append(f"max abs error {trial.max_abs_error:.3g}")
    if trial.max_rel_error is not None:
        errors.append(f"max rel error {trial.max_rel_error:.3g}")
    if trial.mismatch_fraction is not None:
        errors.append(f"{trial.mismatch_fraction:.2%} of the elements out of tolerance")
    if trial.first_mismatches:
        errors.append("first differing indexes " + ", ".join(str(tuple(i)) for i in trial.first_mismatches[:4]))
    if errors:
        text += ": " + "; ".join(errors)
    if trial.detail:
        text += f" ({trial.detail})"
    return text


def mismatch_feedback(result: EvalResult) -> str:
    failed = [t for t in result.trials if t.passed is False]
    tolerance = ", ".join(f"{k} {v:g}" for k, v in result.tolerance.items())
    head = f"Tolerance: {tolerance}." if tolerance else ""
    passed = sum(t.passed is True for t in result.trials)
    lines = [f"{passed} of {len(result.trials)} trials passed. {head}".strip()]
    lines += [f"- failed {trial_text(t)}" for t in failed[:3]]
    if len(failed) > 3:
        lines.append(f"- ... and {len(failed) - 3} more failed trials")
    return "\n".join(lines)


def rejection_feedback(result: EvalResult) -> str:
    if result.reason is None or result.reason not in REASONS:
        return ""
    info = REASONS[result.reason]
    text = f"What `{info.code.value}` means and why it does not count: {info.why}"
    if result.policy in {p.value for p in info.policies} and info.policy_rules:
        rules = dict(info.policy_rules)
        rule = next((r for p, r in rules.items() if p.value == result.policy), None)
        if rule:
            text += f"\nUnder the `{result.policy}` policy in force: {rule}"
    return text


def failure_feedback(result: EvalResult, source: str, limit: int) -> str:
    """What the coder reads about one failed candidate (`source` is that candidate's file)."""
    head = f"The harness said: {result.verdict.value}"
    if result.reason:
        head += f" ({result.reason.value})"
    text = f"{head}: {result.message}".strip()
    if result.verdict == Verdict.BUILD_ERROR:
        text += "\n" + build_feedback(f"{result.message}\n{result.stderr_tail}", source, limit)
    elif result.verdict == Verdict.INCORRECT and result.trials:
        text += "\n" + mismatch_feedback(result)
    elif result.verdict in (Verdict.CRASHED, Verdict.TIMEOUT) and result.stderr_tail:
        tail = result.stderr_tail[-limit:]
        text += f"\nEnd of the worker's log:\n{tail}"
    elif result.verdict == Verdict.REJECTED:
        text += "\n" + rejection_feedback(result)
    return text
