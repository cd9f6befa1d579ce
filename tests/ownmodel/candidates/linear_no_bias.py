"""A WRONG region candidate for an nn.Linear (the MLP example's `up`): it skips the bias.
C++ in the fast-build form, one output element per (row, column), single-threaded (no second
OpenMP runtime beside torch's). Its parameters are drawn as the problem's `Model` (an nn.Linear)
draws them and keep their names (weight, bias), so the model's state_dict for the region loads
into it strictly."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>

extern "C" int linear(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
            const float* xr = x + i * k;
            const float* wr = w + j * k;
            float acc = 0.f;
            for (int64_t t = 0; t < k; ++t) acc += xr[t] * wr[t];
            y[i * n + j] = acc;  // wrong: the bias is skipped
        }
    }
    return 0;
}
"""

lib = load_kernels("kw_test_region_linear_no_bias", SOURCE, {"linear": "ptr, ptr, ptr, ptr, i64, i64, i64"}, lang="cpp")


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        reference = nn.Linear(in_features, out_features)  # drawn as the problem's Model draws them
        self.weight, self.bias = reference.weight, reference.bias

    def forward(self, x):
        rows = x.contiguous().reshape(-1, x.shape[-1])
        y = torch.empty(rows.shape[0], self.weight.shape[0], dtype=x.dtype, device=x.device)
        lib.linear(rows, self.weight.contiguous(), self.bias.contiguous(), y, rows.shape[0], rows.shape[1], y.shape[1])
        return y.reshape(*x.shape[:-1], y.shape[1])
