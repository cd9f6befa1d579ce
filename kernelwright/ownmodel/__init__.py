"""Your own model (issue #32): profile a user's `nn.Module` and cut its hot operators out as
KernelBench-format problems the rest of kernelwright already knows how to optimise.

    loaded = load_model("my_model.py:make_block", Device.CPU)
    report = profile_model(loaded)           # ranked aten ops, roofline room, eager vs compile
    path = extract_op(loaded, report, "1", Path("problems/"))

- `loading`: `FILE.py:FACTORY` → the module and its example inputs, checked (UsageError, exit 2).
- `trace`: every aten call of one forward, below autograd, with its arguments, flops and bytes.
- `profiling`: torch.profiler's per-op self time, ranked, matched to the trace, with the roofline.
- `timing`: the whole model, eager against torch.compile.
- `extract`: one ranked operator written as a problem file.
- `report`: the pydantic report `model profile --json` writes.

Layer 4 of DESIGN.md, beside `tools`: imports torch, `problems`, `hardware_specs`, `profiler`,
`config`, `errors` and `vocabulary`; never `harness`, `tools` or anything above.
"""

from kernelwright.ownmodel.extract import extract_op
from kernelwright.ownmodel.loading import LoadedModel, load_model, parse_spec
from kernelwright.ownmodel.profiling import profile_model
from kernelwright.ownmodel.report import ModelProfile, OpRow, TensorSpec, Timing

__all__ = [
    "LoadedModel",
    "ModelProfile",
    "OpRow",
    "TensorSpec",
    "Timing",
    "extract_op",
    "load_model",
    "parse_spec",
    "profile_model",
]
