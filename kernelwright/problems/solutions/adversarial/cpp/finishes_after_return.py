import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kit_source = r"""
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

kit = load_inline(name="kw_test_kit", cpp_sources=kit_source, functions=['relu_forward', 'relu_uninitialised', 'relu_zeros', 'relu_via_aten', 'relu_static_out', 'scale_forward'], extra_cflags=["-O2"], verbose=False)

import threading, time

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.zeros_like(x)
        def fill():
            time.sleep(0.03)  # later than the copy, within the settle check's 50 ms
            out.copy_(kit.relu_forward(x))
        threading.Thread(target=fill).start()
        return out
