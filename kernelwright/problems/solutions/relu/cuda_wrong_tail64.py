"""Oracle, known WRONG: CUDA ReLU whose threads only cover full blocks of 64 elements.

Elements past the last multiple of 64 keep the zeros the output was allocated with: right when
numel is a multiple of 64 (the default inputs), wrong otherwise (the variants).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_blocks64_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t full) {
    // full = number of elements in complete 64-element blocks; one CUDA block per 64 elements.
    const int64_t i = blockIdx.x * (int64_t)64 + threadIdx.x;
    if (i < full) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "relu_forward: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: x must be float32");
    auto xc = x.contiguous();
    auto out = torch::zeros_like(xc);  // zeros: the unprocessed tail is deterministically wrong
    const int64_t blocks = xc.numel() / 64;  // BUG: the last partial block is dropped
    if (blocks == 0) return out;
    relu_blocks64_kernel<<<(unsigned int)blocks, 64, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), out.data_ptr<float>(), blocks * 64);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

relu_ext = load_inline(
    name="kw_relu_cuda_wrong_tail64",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_forward"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
