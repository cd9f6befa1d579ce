"""Your own model (issue #32): profile a user's `nn.Module` and cut its hot operators out as
KernelBench-format problems the rest of kernelwright already knows how to optimise.

    loaded = load_model("my_model.py:make_block", Device.CPU)
    report = profile_model(loaded)           # ranked aten ops, roofline room, eager vs compile
    path = extract_op(loaded, "1", Path("problems/"))
    regions = rank_regions(loaded)           # fusible submodules, by inclusive time
    path = extract_region(loaded, "mlp.fc1", Path("problems/"))
    files = write_verify(loaded, [RegionCandidate("mlp.fc1", Path("best.py"))], Path("verify/"))

- `loading`: `FILE.py:FACTORY` → the module and its example inputs, checked (UsageError, exit 2).
- `trace`: every aten call of one forward, below autograd, with its arguments, flops and bytes.
- `profiling`: torch.profiler's per-op self time, ranked, matched to the trace, with the roofline.
- `timing`: the whole model, eager against torch.compile.
- `extract`: one ranked operator written as a problem file.
- `report`: the pydantic report `model profile --json` writes (`regions.ModelReport` adds regions).
- `regions`: module regions: submodules whose ops torch.compile fuses into one chain, ranked.
- `layers`: standard torch.nn layers written back as code (a region's standalone `Model`).
- `region_problem`: one region written as a problem file, with `PROBLEM["region"]`.
- `verify`: the whole model and the model with regions replaced, as a problem and a candidate
  (judged by the CLI through `tools.evaluate`, the path `kernelwright eval` takes).
- `compose`: several candidate files made into one (names that would collide renamed).

Layer 4 of DESIGN.md, beside `tools`: imports torch, `problems`, `hardware_specs`, `profiler`,
`config`, `errors` and `vocabulary`; never `harness`, `tools` or anything above.
"""

from kernelwright.ownmodel.extract import extract_op
from kernelwright.ownmodel.loading import LoadedModel, load_model, parse_spec
from kernelwright.ownmodel.profiling import profile_model
from kernelwright.ownmodel.region_problem import extract_region, find_region
from kernelwright.ownmodel.regions import ModelReport, RegionRow, rank_regions
from kernelwright.ownmodel.report import ModelProfile, OpRow, TensorSpec, Timing
from kernelwright.ownmodel.verify import RegionCandidate, VerifyFiles, write_verify

__all__ = [
    "LoadedModel",
    "ModelProfile",
    "ModelReport",
    "OpRow",
    "RegionCandidate",
    "RegionRow",
    "TensorSpec",
    "Timing",
    "VerifyFiles",
    "extract_op",
    "extract_region",
    "find_region",
    "load_model",
    "parse_spec",
    "profile_model",
    "rank_regions",
    "write_verify",
]
