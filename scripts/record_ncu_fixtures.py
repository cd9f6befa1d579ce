"""Record the Nsight Compute fixtures under tests/data/ncu/ on a GPU host (root, ncu on PATH).

    python3 scripts/record_ncu_fixtures.py OUT_DIR

Writes OUT_DIR/*.ncu-rep, their CSV exports (raw and details pages), env.txt (GPU, driver, ncu
version, date) and timings.json. Copy the results into tests/data/ncu/ and update NOTE.md.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelwright.profiler.runner import DEFAULT_SECTIONS, NcuOptions, profile_problem, run_ncu  # noqa: E402

SRC = ROOT / "tests" / "data" / "ncu" / "src"


def sh(cmd: list[str], timeout: float = 120.0) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    return (proc.stdout + proc.stderr).strip()


def export_csv(report: Path, out: Path) -> None:
    for page in ("raw", "details"):
        text = subprocess.run(
            ["ncu", "--import", str(report), "--csv", "--page", page],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout  # fmt: skip
        (out / f"{report.stem}.{page}.csv").write_text(text)


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float | str] = {}
    env_lines = [
        f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M UTC}",
        f"gpu: {sh(['nvidia-smi', '--query-gpu=name,driver_version', '--format=csv,noheader'])}",
        f"ncu: {sh(['ncu', '--version']).splitlines()[-1]}",
        f"nvcc: {sh(['nvcc', '--version']).splitlines()[-1]}",
        f"python: {sys.version.split()[0]}",
    ]
    import torch

    env_lines.append(f"torch: {torch.__version__}")
    (out / "env.txt").write_text("\n".join(env_lines) + "\n")
    print("\n".join(env_lines), flush=True)

    def record(name: str, fn) -> Path | None:  # type: ignore[no-untyped-def]
        start = time.monotonic()
        result = fn(out / f"{name}.ncu-rep")
        timings[name] = round(time.monotonic() - start, 2)
        print(f"{name}: {result.one_line()} ({timings[name]} s)", flush=True)
        if not result.ok:
            print(result.stderr_tail[-1500:], flush=True)
            return None
        return result.report_path

    # 1. Many kernels: one forward pass of a small CNN (every launch between profiler start/stop).
    multi = record(
        "multi_cnn",
        lambda p: profile_problem(str(SRC / "small_cnn_problem.py"), report_path=p, timeout_s=180),
    )
    # 2. Baseline/candidate pair: 1_relu's PyTorch reference vs a hand CUDA kernel (build warmed first).
    base = record("relu_reference", lambda p: profile_problem("1_relu", report_path=p, timeout_s=120))
    start = time.monotonic()
    warm = sh([sys.executable, "-c", f"import runpy; runpy.run_path({str(SRC / 'relu_candidate.py')!r})"], 300)
    timings["relu_candidate_build"] = round(time.monotonic() - start, 2)
    print("candidate build:", warm[-300:] or "ok", flush=True)
    cand = record(
        "relu_candidate",
        lambda p: profile_problem("1_relu", SRC / "relu_candidate.py", report_path=p, timeout_s=180),
    )
    # 3. SourceCounters from a -lineinfo nvcc build, and 4. the same kernel without WarpStateStats.
    binary = out / "smem_transpose"
    print(sh(["nvcc", "-O3", "-lineinfo", "-arch=sm_90", str(SRC / "smem_transpose.cu"), "-o", str(binary)], 180))
    source = record(
        "transpose_source",
        lambda p: run_ncu([str(binary)], p, NcuOptions(source_counters=True, launch_skip=1, launch_count=1)),
    )
    no_ws = tuple(s for s in DEFAULT_SECTIONS if s != "WarpStateStats")
    lacking = record(
        "transpose_no_warpstate",
        lambda p: run_ncu([str(binary)], p, NcuOptions(sections=no_ws, launch_skip=1, launch_count=1)),
    )
    binary.unlink(missing_ok=True)
    for report in (multi, base, cand, lacking):
        if report is not None:
            export_csv(report, out)
    _ = source
    (out / "timings.json").write_text(json.dumps(timings, indent=2))
    print(json.dumps(timings), flush=True)
    for path in sorted(out.iterdir()):
        print(f"{path.name}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    sys.exit(main(Path(sys.argv[1])))
