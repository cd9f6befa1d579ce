import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        block = 256
        cuda = f'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>

template <typename T>
__global__ void styled_relu(const T* __restrict__ x, T* __restrict__ scratch, T* __restrict__ y, int64_t n) {{
    int64_t i = blockIdx.x * (int64_t){block} + threadIdx.x;
    if (i < n) {{ scratch[i] = x[i] > T(0) ? x[i] : T(0); y[i] = scratch[i]; }}
}}

torch::Tensor styled(torch::Tensor x) {{
    static torch::Tensor scratch;  // a workspace recomputed every call, not a cache
    auto xc = x.contiguous();
    if (!scratch.defined() || scratch.numel() < xc.numel()) scratch = torch::empty({{xc.numel()}}, xc.options());
    auto y = torch::zeros_like(xc);
    int64_t n = xc.numel();
    int64_t blocks = (n + {block} - 1) / {block};
    switch (xc.scalar_type()) {{
        case at::kHalf:
            TORCH_CHECK(false, "float32 only here; at::Half is ", sizeof(at::Half), " bytes");
            break;
        case at::kFloat:
            styled_relu<float><<<blocks, {block}, 0, at::cuda::getCurrentCUDAStream()>>>(
                xc.data_ptr<float>(), scratch.data_ptr<float>(), y.data_ptr<float>(), n);
            break;
        default:
            TORCH_CHECK(false, "unsupported dtype");
    }}
    return y;
}}
'''
        self.ext = load_inline(name="kw_test_styled_cuda", cpp_sources="torch::Tensor styled(torch::Tensor x);",
                               cuda_sources=cuda, functions=["styled"], verbose=False)

    def forward(self, x):
        return self.ext.styled(x)
