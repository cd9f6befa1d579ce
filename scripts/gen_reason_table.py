#!/usr/bin/env python3
"""Regenerate the table of rejection reasons in docs/harness.md from the registry
(`kernelwright/harness/reasons.py`): the text between `<!-- reasons:begin -->` and
`<!-- reasons:end -->` is replaced, nothing else. `--check` changes nothing and exits 1 when the
docs are stale (tests/harness/test_reasons.py calls `is_current`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelwright.harness.reasons import markdown_table

DOC = Path(__file__).resolve().parent.parent / "docs" / "harness.md"
BEGIN = "<!-- reasons:begin -->"
END = "<!-- reasons:end -->"


def render(text: str) -> str:
    """`text` with the generated table between the markers (ValueError when they are missing)."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the markers {BEGIN} ... {END} are missing or out of order")
    return f"{text[: start + len(BEGIN)]}\n{markdown_table()}{text[end:]}"


def is_current(path: Path = DOC) -> bool:
    text = path.read_text()
    return render(text) == text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is stale; write nothing")
    parser.add_argument("--doc", type=Path, default=DOC, help="the Markdown file (default: docs/harness.md)")
    args = parser.parse_args(argv)
    if args.check:
        if is_current(args.doc):
            return 0
        print(f"{args.doc}: the rejection-reason table is stale; run scripts/gen_reason_table.py", file=sys.stderr)
        return 1
    text = args.doc.read_text()
    new = render(text)
    if new != text:
        args.doc.write_text(new)
        print(f"{args.doc}: table updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
