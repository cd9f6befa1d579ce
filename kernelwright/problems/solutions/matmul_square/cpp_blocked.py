"""Oracle: correct C++ (CPU) matrix multiplication with a cache-blocked i-k-j loop nest.

Works for any (M x K) @ (K x N), square or not; blocks are clamped at the matrix edges.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <algorithm>

constexpr int64_t BLOCK = 64;

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.device().is_cpu() && b.device().is_cpu(), "matmul_forward: tensors must be on the CPU");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "matmul_forward: tensors must be float32");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul_forward: bad shapes");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    const int64_t M = ac.size(0), K = ac.size(1), N = bc.size(1);
    auto out = torch::zeros({M, N}, ac.options());
    const float* A = ac.data_ptr<float>();
    const float* B = bc.data_ptr<float>();
    float* C = out.data_ptr<float>();
    for (int64_t i0 = 0; i0 < M; i0 += BLOCK) {
        const int64_t i1 = std::min(i0 + BLOCK, M);
        for (int64_t k0 = 0; k0 < K; k0 += BLOCK) {
            const int64_t k1 = std::min(k0 + BLOCK, K);
            for (int64_t j0 = 0; j0 < N; j0 += BLOCK) {
                const int64_t j1 = std::min(j0 + BLOCK, N);
                for (int64_t i = i0; i < i1; ++i) {
                    float* crow = C + i * N;
                    for (int64_t k = k0; k < k1; ++k) {
                        const float aik = A[i * K + k];
                        const float* brow = B + k * N;
                        for (int64_t j = j0; j < j1; ++j) crow[j] += aik * brow[j];
                    }
                }
            }
        }
    }
    return out;
}
"""

matmul_ext = load_inline(
    name="kw_matmul_square_cpp_blocked",
    cpp_sources=cpp_source,
    functions=["matmul_forward"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_forward(A, B)
