#!/usr/bin/env python3
"""How long `kernelwright --help` and `--version` take in a fresh process: median and range of
N runs (the issue's goal: --help <= 0.5 s on a quiet machine). Also the floor: an interpreter that
imports only typer, rich and pydantic, which every command needs."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = {
    "floor (python + typer + rich + pydantic)": [sys.executable, "-c", "import typer, rich.console, pydantic"],
    "kernelwright --help": [sys.executable, "-m", "kernelwright", "--help"],
    "kernelwright --version": [sys.executable, "-m", "kernelwright", "--version"],
    "kernelwright eval --help": [sys.executable, "-m", "kernelwright", "eval", "--help"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    for label, cmd in CASES.items():
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True, timeout=120)
            times.append(time.perf_counter() - start)
        print(
            f"{label:45s} median {statistics.median(times):.3f} s  [{min(times):.3f}-{max(times):.3f}]  n={args.runs}"
        )


if __name__ == "__main__":
    main()
