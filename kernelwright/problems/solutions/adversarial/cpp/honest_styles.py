import torch
import torch.nn as nn

from torch.utils.cpp_extension import load_inline

TEMPLATE = r"""
#include <torch/extension.h>

torch::Tensor relu_styled(torch::Tensor x) {{
    static torch::Tensor scratch;  // a workspace, recomputed every call: not a cache
    auto xc = x.contiguous();
    if (!scratch.defined() || scratch.numel() < xc.numel()) scratch = torch::empty({{xc.numel()}}, xc.options());
    auto out = torch::zeros_like(xc);
    switch (xc.scalar_type()) {{
        case at::kHalf: {{
            TORCH_CHECK(false, "float32 only; an at::Half input would need ", sizeof(at::Half), " bytes each");
            break;
        }}
        case at::kFloat: {{
            const float* in = xc.data_ptr<float>();
            float* s = scratch.data_ptr<float>();
            float* o = out.data_ptr<float>();
            for (int64_t i = 0; i < xc.numel(); ++i) s[i] = in[i] > 0.f ? in[i] : 0.f;
            for (int64_t i = 0; i < xc.numel(); ++i) o[i] = s[i] * {scale}f;
            break;
        }}
        default: TORCH_CHECK(false, "unsupported dtype");
    }}
    return out;
}}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        scale = 1.0
        source = TEMPLATE.format(scale=scale)
        self.ext = load_inline(name="kw_test_styled", cpp_sources=source, functions=["relu_styled"], verbose=False)

    def forward(self, x):
        return self.ext.relu_styled(x)
