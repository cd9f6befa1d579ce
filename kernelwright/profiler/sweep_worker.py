"""nsight-python sweep worker: `python sweep_worker.py SPEC.json OUT.json`.

nsight-python re-executes this very script under ncu (same argv), runs the decorated function
there and exits; back in the first process the decorated call returns the aggregated results.
So everything above the decorated call must be cheap and deterministic. The candidate is loaded
as the harness loads it (`kernelwright.problems.candidate`), its extensions from the spec's build cache.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def main(spec_path: str, out_path: str) -> int:
    import nsight  # type: ignore[import-not-found]

    from kernelwright.profiler.sweep import SweepPoint, SweepResult, SweepSpec, SweepStatus

    spec = SweepSpec.model_validate_json(Path(spec_path).read_text())
    state: dict[str, Any] = {}

    def setup() -> None:
        # Runs only inside the profiled child: the first process never executes the function body.
        import torch

        from kernelwright.config import load_settings
        from kernelwright.problems import resolve_problem
        from kernelwright.problems.candidate import load_candidate
        from kernelwright.problems.instance import materialize

        inst = materialize(resolve_problem(spec.problem), spec.size)  # type: ignore[arg-type]
        dev = torch.device("cuda")
        models: dict[str, Any] = {}
        torch.manual_seed(42)
        if spec.include_reference or not spec.candidate:
            models["reference"] = inst.make_model().to(dev).eval()
        if spec.candidate:
            build_cache = spec.build_cache or load_settings().build_cache_dir
            assert build_cache is not None  # Settings derives it from its home folder
            module = load_candidate(Path(spec.candidate), build_cache)
            models["candidate"] = module.ModelNew(*inst.init_inputs).to(dev).eval()
        sets = inst.input_sets()
        state["models"] = models
        state["inputs"] = [[v.to(dev) if isinstance(v, torch.Tensor) else v for v in s] for s in sets]

    n_sets = 1 + _variant_count(spec)
    configs = spec.input_sets if spec.input_sets is not None else list(range(n_sets))

    @nsight.analyze.kernel(
        configs=configs,
        runs=spec.runs,
        metrics=spec.metrics,
        output="quiet",
        combine_kernel_metrics=lambda x, y: x + y,
        output_prefix=str(Path(out_path).parent / "nspy_"),
    )
    def sweep(input_set: int) -> None:
        import torch

        if not state:
            setup()
        inputs = state["inputs"][input_set]
        with torch.no_grad():
            for name, model in state["models"].items():
                model(*inputs)  # warm-up outside the annotation: not profiled
                with nsight.annotate(name):
                    model(*inputs)

    results = sweep()
    frame = results.to_dataframe()
    points = [
        SweepPoint(
            annotation=str(row.get("Annotation")),
            input_set=int(row.get("input_set", -1)),
            metric=str(row.get("Metric")),
            mean=_num(row.get("AvgValue")),
            std=_num(row.get("StdDev")),
            ci95_low=_num(row.get("CI95_Lower")),
            ci95_high=_num(row.get("CI95_Upper")),
            runs=int(row["NumRuns"]) if _num(row.get("NumRuns")) is not None else None,
            stable=bool(row["StableMeasurement"]) if "StableMeasurement" in row else None,
            kernels=str(row.get("Kernel", ""))[:300],
        )
        for row in frame.to_dict("records")
    ]
    result = SweepResult(status=SweepStatus.OK, message=f"{len(points)} points", points=points)
    Path(out_path).write_text(result.model_dump_json(indent=2))
    return 0


def _variant_count(spec: Any) -> int:
    """How many shape variants the problem has, read without touching the GPU."""
    from kernelwright.problems import resolve_problem
    from kernelwright.problems.instance import import_module

    problem = resolve_problem(spec.problem)
    module = import_module(problem)
    name = "get_small_input_variants" if spec.size == "small" and hasattr(module, "get_small_inputs") else None
    name = name or "get_input_variants"
    fn = getattr(module, name, None)
    return len(fn()) if callable(fn) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
