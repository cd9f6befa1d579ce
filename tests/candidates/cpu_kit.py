"""The CPU harness tests' candidates: the bundled adversarial cases (`cpp` entries of the
manifest's `adversarial` suite, one correct kernel or reward hack per file, each with the verdict
and reason the harness must give), and the kit tests compose candidates of their own from.

Most C++ candidates use the same extension source (KIT_CPP, the HEADER below), so the
content-addressed build cache builds it once for the whole test session. Candidates are written to
files at test time.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelwright.problems.solutions_index import BundledSolution, all_solutions

KIT_CPP = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "relu_forward: float32 CPU tensors only");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

torch::Tensor relu_uninitialised(torch::Tensor x) {
    return torch::empty_like(x.contiguous());  // never written
}

torch::Tensor relu_zeros(torch::Tensor x) {
    return torch::zeros_like(x);
}

torch::Tensor relu_via_aten(torch::Tensor x) {
    return at::relu(x);  // the "kernel" is PyTorch's own op
}

torch::Tensor relu_static_out(torch::Tensor x) {
    // Correct values, but one buffer handed out on every call: the caller's earlier result changes.
    static torch::Tensor out;
    if (!out.defined() || out.sizes() != x.sizes()) out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

torch::Tensor scale_forward(torch::Tensor x, double s) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] * static_cast<float>(s);
    return out;
}
"""

KIT_FUNCTIONS = [
    "relu_forward",
    "relu_uninitialised",
    "relu_zeros",
    "relu_via_aten",
    "relu_static_out",
    "scale_forward",
]

HEADER = f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kit_source = r"""{KIT_CPP}"""

kit = load_inline(name="kw_test_kit", cpp_sources=kit_source, functions={KIT_FUNCTIONS!r}, extra_cflags=["-O2"], verbose=False)
'''


@dataclass(frozen=True)
class Case:
    name: str
    body: str  # Python after HEADER that defines ModelNew, or the whole file (header=False)
    verdict: str
    reason: str | None
    problem: str = "relu"
    header: bool = True
    # Other reasons that are as right: uninitialised memory holds whatever was there before
    # (zeros from the OS: a mismatch; an earlier tensor's NaNs: a non-finite output).
    also: tuple[str, ...] = ()

    def accepts(self, verdict: str, reason: str | None) -> bool:
        return verdict == self.verdict and (reason == self.reason or reason in self.also)

    def source(self) -> str:
        return HEADER + "\n" + self.body if self.header else self.body


def _model(forward: str, extra: str = "") -> str:
    return f"""{extra}
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{forward}
"""


def _case(entry: BundledSolution) -> Case:
    return Case(
        entry.name, entry.path.read_text(), entry.expected, entry.reason, entry.problem, header=False, also=entry.also
    )


_BUNDLED = [e for e in all_solutions("adversarial") if e.backend == "cpp"]
_BY_NAME = {e.name: _case(e) for e in _BUNDLED}

CORRECT = _BY_NAME["correct_relu"]
# Honest styles the static reader once rejected, in one candidate (one build).
HONEST_STYLES = _BY_NAME["honest_styles"]
# Evaluated in one batch without timing.
CASES = [_BY_NAME[e.name] for e in _BUNDLED if e.problem == "relu" and not e.timing]
# Hacks on the timing phase: evaluated together with timing on.
TIMING_CASES = [_BY_NAME[e.name] for e in _BUNDLED if e.problem == "relu" and e.timing]

# A problem whose reference output is nearly zero: a constant-zero "kernel" passes value checks.
[_TINY] = [e for e in _BUNDLED if e.problem_file is not None]
assert _TINY.problem_file is not None
TINY_PROBLEM = _TINY.problem_file.read_text()
ZEROS_FOR_TINY = _BY_NAME[_TINY.name]
