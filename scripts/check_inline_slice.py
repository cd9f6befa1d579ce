#!/usr/bin/env python3
"""On a GPU: the `load_inline` copies of the level-1 slice (scripts/gen_inline_slice.py) compute
what their fast-form originals compute, on the problem's inputs.

    PYTHONPATH=$PWD python3 scripts/check_inline_slice.py [FILE ...]   (default: every sample_0)

FILE: paths under benchmarks/level1_cuda_inline, written by scripts/gen_inline_slice.py (the original is the same path without
`level1_cuda_inline/` read as `level1_cuda/`). Each file is run as a module (its extension built with plain `load_inline`, no
harness), ModelNew made under the same seed as the original's, and both called on the same
inputs. Prints one line per file: OK, or the largest difference / the error.
"""

from __future__ import annotations

import json
import runpy
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SLICE = ROOT / "benchmarks" / "level1_cuda"
INLINE = ROOT / "benchmarks" / "level1_cuda_inline"


def main(argv: list[str]) -> int:
    manifest = {e["file"]: e for e in json.loads((SLICE / "expected.json").read_text())}
    files = [Path(a) for a in argv] or sorted(INLINE.glob("level_1/*/sample_0.py"))
    failed = 0
    for path in files:
        rel = str(path.resolve().relative_to(INLINE.resolve()))
        try:
            from kernelwright.problems import resolve_problem

            problem = resolve_problem(manifest[rel]["problem"])
            module = runpy.run_path(str(problem.path))
            start = time.perf_counter()
            inline = runpy.run_path(str(path))
            built = time.perf_counter() - start
            fast = runpy.run_path(str(SLICE / rel))
            torch.manual_seed(0)
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module["get_inputs"]()]
            init = module["get_init_inputs"]()
            torch.manual_seed(42)
            a = inline["ModelNew"](*init).cuda()
            torch.manual_seed(42)
            b = fast["ModelNew"](*init).cuda()
            with torch.no_grad():
                ya, yb = a(*inputs), b(*inputs)
            torch.cuda.synchronize()
            diff = (ya.float() - yb.float()).abs().max().item() if ya.numel() else 0.0
            ok = ya.shape == yb.shape and ya.dtype == yb.dtype and diff == 0.0
            print(f"{'OK' if ok else 'DIFF'} {rel}: build {built:.1f} s, max |inline - fast| {diff}", flush=True)
            failed += not ok
        except Exception as exc:  # one file's failure is a line of the report
            print(f"FAIL {rel}: {type(exc).__name__}: {str(exc)[-800:]}", flush=True)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
