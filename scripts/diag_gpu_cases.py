"""Diagnostic (not a test): evaluate the CUDA test cases and the relu CUDA oracles, print each verdict."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from kernelwright.harness.session import evaluate
from kernelwright.problems import resolve_problem
from tests.candidates import harness_options, write_case
from tests.candidates.gpu_kit import CASES

home = Path(tempfile.mkdtemp(prefix="kw-diag-"))
folder = home / "cases"
timing = "--timing" in sys.argv
paths = [write_case(folder, c.name, c.source()) for c in CASES]
start = time.perf_counter()
results = evaluate(resolve_problem("relu"), paths, harness_options(home, "cuda", timing=timing))
for case, r in zip(CASES, results, strict=True):
    ok = (r.verdict.value, r.reason.value if r.reason else None) == (case.verdict, case.reason)
    print(
        f"{'OK ' if ok else 'BAD'} {case.name}: {r.verdict.value}/{r.reason} ({case.verdict}/{case.reason}) {r.message[:300]}"
    )
    if "-v" in sys.argv:
        print("    flags:", [(f.code, f.message[:160]) for f in r.flags if f.code != "torch_fallback"][:6])
        print("    phases:", {k: round(v, 2) for k, v in r.phase_seconds.items()})
print(f"{time.perf_counter() - start:.0f} s", flush=True)
