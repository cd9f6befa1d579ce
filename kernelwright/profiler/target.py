"""What ncu profiles: one problem's reference (or a candidate's ModelNew) run on the GPU.

    python -m kernelwright.profiler.target PROBLEM [CANDIDATE] --warmup N --iters M [--build-cache DIR]
        [--private-build-cache DIR]

The candidate is loaded as the harness's worker loads it (`kernelwright.problems.candidate`), its
extensions taken from the build cache (`--build-cache`, else the configured one) when `eval` has
built them already; one line per build goes to stderr. Warm-up calls run first; the M measured
calls run between cudaProfilerStart/Stop, each inside an NVTX range, so
`ncu --profile-from-start off` sees exactly those launches. Exit codes: 0 ok, 2 bad
problem/candidate/configuration, 4 the model raised, 5 no GPU (the line `KW_NO_GPU` is printed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

NVTX_RANGE = "kernelwright_profile"
EXIT_USAGE, EXIT_CRASH, EXIT_NO_GPU = 2, 4, 5


def candidate_class(path: Path, build_cache: Path, private_cache: Path | None = None) -> Any:
    """The candidate's ModelNew, its extensions built in (or taken from) `build_cache`; with
    `private_cache` (a sandboxed target), `build_cache` is only read and new builds go there.
    Reports each build on stderr. Raises whatever loading the file raises."""
    from kernelwright.problems.candidate import load_candidate

    builds: list[dict[str, Any]] = []
    module = load_candidate(path, build_cache, builds=builds, private_root=private_cache)
    for build in builds:
        how = "from the build cache" if build["cached"] else "built"
        print(f"extension {build['name']}: {how} in {build['seconds']:.1f} s ({build_cache})", file=sys.stderr)
    return module.ModelNew


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernelwright.profiler.target", description=__doc__)
    parser.add_argument("problem", help="problem name or file")
    parser.add_argument("candidate", nargs="?", help="KernelBench-style candidate file (class ModelNew)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=1)
    parser.add_argument("--size", choices=("default", "small"), default="default")
    parser.add_argument("--build-cache", type=Path, help="build cache folder (default: the configured one)")
    parser.add_argument(
        "--private-build-cache", type=Path, help="read --build-cache only; build what is not complete there here"
    )
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("KW_NO_GPU: torch sees no CUDA GPU", file=sys.stderr)
        return EXIT_NO_GPU

    from kernelwright.config import load_settings
    from kernelwright.errors import KernelwrightError
    from kernelwright.problems import resolve_problem
    from kernelwright.problems.instance import materialize

    try:
        problem = resolve_problem(args.problem)
        inst = materialize(problem, args.size)
        build_cache = args.build_cache or load_settings().build_cache_dir
    except KernelwrightError as exc:
        print(exc.one_line(), file=sys.stderr)
        return EXIT_USAGE
    assert build_cache is not None  # Settings derives it from its home folder
    model_cls: Any = inst.model_class
    if args.candidate:
        try:
            model_cls = candidate_class(Path(args.candidate), build_cache, args.private_build_cache)
        except Exception as exc:  # the candidate is user code: report, don't crash the profiler
            print(f"bad candidate file: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    device = torch.device("cuda")
    torch.manual_seed(42)
    try:
        model = model_cls(*inst.init_inputs).to(device).eval()
        inputs = [v.to(device) if isinstance(v, torch.Tensor) else v for v in inst.inputs]
        with torch.no_grad():
            for _ in range(args.warmup):
                model(*inputs)
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            for i in range(args.iters):
                with torch.cuda.nvtx.range(f"{NVTX_RANGE}_{i}"):
                    model(*inputs)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
    except Exception as exc:  # user code raised: a value for the runner, not a traceback storm
        print(f"model raised {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_CRASH
    return 0


if __name__ == "__main__":
    sys.exit(main())
