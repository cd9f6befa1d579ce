import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void bias_relu_kernel(float* __restrict__ y, const float* __restrict__ b, int64_t n, int64_t cols) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) { float v = y[i] + b[i % cols]; y[i] = v > 0.f ? v : 0.f; }
}

torch::Tensor bias_relu(torch::Tensor y, torch::Tensor b) {
    auto out = y.contiguous();
    int64_t n = out.numel(), cols = b.numel();
    bias_relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        out.data_ptr<float>(), b.data_ptr<float>(), n, cols);
    return out;
}
"""

ext = load_inline(name="kw_test_gemm_epilogue", cpp_sources="torch::Tensor bias_relu(torch::Tensor y, torch::Tensor b);",
                  cuda_sources=cuda, functions=["bias_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.bias_relu(torch.matmul(x, self.linear.weight.t()), self.linear.bias)
