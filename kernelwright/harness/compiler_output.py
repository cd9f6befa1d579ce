"""The first compiler errors of a failed build, as `file:line: message` lines short enough for the
results table and the agent's feedback. The full output stays in the worker's log.

torch's `load_inline` raises only "Error building extension 'x'"; the g++/nvcc lines that say
what is wrong are in the build's output, which this module reads.
"""

from __future__ import annotations

import re

# g++/clang: `path/main.cpp:12:5: error: ...`, `path: fatal error: ...`;
# nvcc: `path/kernel.cu(12): error: ...`; the linker: `... undefined reference to ...`.
_ERROR = re.compile(
    r"^(?P<file>[^\s:()][^:()]*?)"
    r"(?::(?P<line>\d+)(?::\d+)?|\((?P<nvline>\d+)\))?"
    r":\s*(?:fatal\s+)?error:?\s*(?P<message>.+)$",
    re.MULTILINE,
)
_LINKER = re.compile(r"^.*(?P<message>undefined reference to .+|cannot find -l\S+)$", re.MULTILINE)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def first_errors(output: str, limit: int = 3, width: int = 200) -> list[str]:
    """Up to `limit` distinct compiler/linker error lines, file names without their folders."""
    text = _ANSI.sub("", output)
    found: list[str] = []
    for match in _ERROR.finditer(text):
        name = match["file"].rsplit("/", 1)[-1]
        if name in ("RuntimeError", "subprocess.CalledProcessError", "Error"):
            continue  # Python's own exception lines, not the compiler's
        line = match["line"] or match["nvline"]
        where = f"{name}:{line}" if line else name
        entry = f"{where}: error: {match['message'].strip()}"[:width]
        if entry not in found:
            found.append(entry)
        if len(found) == limit:
            return found
    for match in _LINKER.finditer(text):
        entry = f"link: {match['message'].strip()}"[:width]
        if entry not in found:
            found.append(entry)
        if len(found) == limit:
            break
    return found


def with_first_errors(message: str, output: str) -> str:
    """`message` followed by the first compiler errors found in `output` (unchanged if none)."""
    errors = first_errors(output)
    if not errors:
        return message
    head = message.strip().splitlines()[0] if message.strip() else "build failed"
    return f"{head}: {'; '.join(errors)}"
