"""CUDA and Triton test candidates for the GPU harness tests (marked `gpu`), each with the
verdict and reason the harness must give. One shared CUDA extension source (built once)."""

from __future__ import annotations

from tests.candidates import CHEATS_WHEN_TIMED, VERSION_KEYED_CACHE
from tests.candidates.cpu_kit import Case, _model

KIT_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

__global__ void wild_write_kernel(float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i + (int64_t(1) << 36)] = 1.f;  // far outside any allocation
}

__global__ void spin_kernel(float* y, int64_t n) {
    // A loop with a side effect on every pass, so the compiler cannot assume it terminates.
    while (true) { atomicAdd(y, 1.f); }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensors only");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel();
    int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}

torch::Tensor relu_wild(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    wild_write_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), n);
    return y;
}

torch::Tensor relu_spin(torch::Tensor x) {
    auto y = torch::empty_like(x);
    spin_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), x.numel());
    return y;
}

torch::Tensor relu_uninitialised(torch::Tensor x) {
    return torch::empty_like(x);
}
"""

HEADER = f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kit_cuda = r"""{KIT_CUDA}"""
kit_cpp = "torch::Tensor relu_forward(torch::Tensor x); torch::Tensor relu_wild(torch::Tensor x); torch::Tensor relu_spin(torch::Tensor x); torch::Tensor relu_uninitialised(torch::Tensor x);"

kit = load_inline(name="kw_test_cuda_kit", cpp_sources=kit_cpp, cuda_sources=kit_cuda,
                  functions=["relu_forward", "relu_wild", "relu_spin", "relu_uninitialised"], verbose=False)
'''

TRITON_RELU = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_tl(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_tl[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
"""


class GpuCase(Case):
    def source(self) -> str:
        if not self.header:
            return self.body
        return HEADER + "\n" + self.body


CORRECT_CUDA = GpuCase("cuda_correct_relu", _model("        return kit.relu_forward(x)"), "correct", None)

CASES = [
    CORRECT_CUDA,
    GpuCase("triton_correct_relu", TRITON_RELU, "correct", None, header=False),
    GpuCase("cuda_uninitialised", _model("        return kit.relu_uninitialised(x)"), "incorrect", "output_mismatch"),
    GpuCase(
        "cuda_aten_inside",
        _model("        kit.relu_forward(x[:1])\n        return torch.clamp_min(x, 0.0)"),
        "rejected",
        "torch_fallback",
    ),
    GpuCase(
        "cuda_graph_stale",
        _model(
            "        if self.graph is None:\n"
            "            self.static_in = x.clone()\n"
            "            self.graph = torch.cuda.CUDAGraph()\n"
            "            with torch.cuda.graph(self.graph):\n"
            "                self.static_out = kit.relu_forward(self.static_in)\n"
            "        self.graph.replay()\n"
            "        return self.static_out.clone()"
        ).replace("super().__init__()", "super().__init__()\n        self.graph = None"),
        "incorrect",
        "output_mismatch",
    ),
    GpuCase("cuda_illegal_address", _model("        return kit.relu_wild(x)"), "crashed", "illegal_memory_access"),
    # Round 2 (issue #11)
    GpuCase(
        "cuda_cheats_when_timed",
        _model(
            CHEATS_WHEN_TIMED,
            extra="import sys\n",
        ),
        "rejected",
        "timed_output_mismatch",
    ),
    GpuCase(
        "cuda_version_keyed_cache",
        _model(
            VERSION_KEYED_CACHE,
        ).replace("super().__init__()", "super().__init__()\n        self.cache = {}"),
        "rejected",
        "input_cache",  # read statically (data_ptr); the timed outputs would catch it too
    ),
]

SIDE_STREAM = GpuCase(
    "cuda_hidden_side_stream",
    _model(
        "        stream = getattr(torch.cuda, 'Str' + 'eam')()\n"
        "        stream.wait_stream(getattr(torch.cuda, 'current_' + 'stream')())\n"
        "        with getattr(torch.cuda, 'str' + 'eam')(stream):\n"
        "            out = kit.relu_forward(x)\n"
        "            for _ in range(20):\n"
        "                out = kit.relu_forward(out)\n"
        "        return out"
    ),
    "rejected",
    "side_stream",
)

SPIN = GpuCase("cuda_spins_forever", _model("        return kit.relu_spin(x)"), "timeout", "correctness_timeout")
