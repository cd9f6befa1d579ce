"""Record the `kernelwright ask` fixtures under tests/data/ncu/ on a GPU host (root, ncu and nvcc
on PATH; no torch needed):

    python3 scripts/record_ask_fixtures.py OUT_DIR [--arch sm_90]

1. multi_kernels.ncu-rep: many kernels and launches (tests/data/ncu/src/multi_kernels.cu: five hand
   kernels, 13 launches at different sizes), every launch, the default sections. Hand kernels only,
   so the report stays small (a report embeds the module of every profiled kernel; PyTorch's and
   cuDNN's are tens of MB).
2. matmul_naive.ncu-rep / matmul_tiled.ncu-rep: a baseline/candidate pair of one problem
   (tests/data/ncu/src/matmul_pair.cu, C = A B at 1024^3 fp32), the second launch of each, default
   sections plus SourceCounters (built with -lineinfo).

Writes OUT_DIR/*.ncu-rep, their CSV exports (raw and details pages, for the `ncu --import`
reader), ask_env.txt (GPU, driver, ncu and nvcc versions, date) and ask_timings.json; warns when a
report is over 5 MB. Copy the results into tests/data/ncu/ and add the date and GPU to NOTE.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelwright.profiler.runner import NcuOptions, ProfileResult, run_ncu  # noqa: E402

SRC = ROOT / "tests" / "data" / "ncu" / "src"
LIMIT_BYTES = 5_000_000


def sh(cmd: list[str], timeout: float = 120.0) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    return (proc.stdout + proc.stderr).strip()


def build(source: Path, out: Path, arch: str) -> Path:
    binary = out / source.stem
    done = subprocess.run(
        ["nvcc", "-O3", "-lineinfo", f"-arch={arch}", str(source), "-o", str(binary)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"nvcc failed on {source.name}:\n{done.stderr[-2000:]}")
    return binary


def export_csv(report: Path, out: Path) -> None:
    for page in ("raw", "details"):
        text = subprocess.run(
            ["ncu", "--import", str(report), "--csv", "--page", page],
            capture_output=True, text=True, timeout=300, check=True,
        ).stdout  # fmt: skip
        (out / f"{report.stem}.{page}.csv").write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--arch", default="sm_90", help="nvcc -arch (sm_90 for H100/H200)")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    env_lines = [
        f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M UTC}",
        f"gpu: {sh(['nvidia-smi', '--query-gpu=name,driver_version', '--format=csv,noheader'])}",
        f"ncu: {sh(['ncu', '--version']).splitlines()[-1]}",
        f"nvcc: {sh(['nvcc', '--version']).splitlines()[-1]}",
        f"arch: {args.arch}",
    ]
    (out / "ask_env.txt").write_text("\n".join(env_lines) + "\n")
    print("\n".join(env_lines), flush=True)
    timings: dict[str, float] = {}
    recorded: list[Path] = []

    def record(name: str, run: Callable[[Path], ProfileResult]) -> None:
        start = time.monotonic()
        result = run(out / f"{name}.ncu-rep")
        timings[name] = round(time.monotonic() - start, 2)
        print(f"{name}: {result.one_line()} ({timings[name]} s)", flush=True)
        if not result.ok or result.report_path is None:
            print(result.stderr_tail[-1500:] or result.stdout_tail[-1500:], flush=True)
            return
        recorded.append(result.report_path)

    multi = build(SRC / "multi_kernels.cu", out, args.arch)
    record("multi_kernels", lambda p: run_ncu([str(multi)], p, NcuOptions(launch_count=None), timeout_s=600))
    pair = build(SRC / "matmul_pair.cu", out, args.arch)
    for variant in ("naive", "tiled"):
        options = NcuOptions(source_counters=True, launch_skip=1, launch_count=1)
        record(f"matmul_{variant}", lambda p, v=variant, o=options: run_ncu([str(pair), v], p, o, timeout_s=600))
    multi.unlink(missing_ok=True)
    pair.unlink(missing_ok=True)
    for report in recorded:
        export_csv(report, out)
    (out / "ask_timings.json").write_text(json.dumps(timings, indent=2) + "\n")
    print(json.dumps(timings), flush=True)
    for path in sorted(out.iterdir()):
        size = path.stat().st_size
        warn = "  <- over 5 MB: too large to keep in the repository" if size > LIMIT_BYTES else ""
        print(f"{path.name}: {size} bytes{warn}")
    return 0 if len(recorded) == 3 else 1


if __name__ == "__main__":
    sys.exit(main())
