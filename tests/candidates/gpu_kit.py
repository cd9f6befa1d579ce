"""CUDA and Triton test candidates for the GPU harness tests (marked `gpu`), each with the
verdict and reason the harness must give. One shared CUDA extension source (built once)."""

from __future__ import annotations

from tests.candidates import CHEATS_WHEN_TIMED, VERSION_KEYED_CACHE
from tests.candidates.cpu_kit import CASES as CPU_CASES
from tests.candidates.cpu_kit import TIMING_CASES as CPU_TIMING
from tests.candidates.cpu_kit import Case, _model

# Hacks written in Python over the kit's functions: the same body runs on the CUDA kit (its
# relu_forward and relu_uninitialised have the same names).
_SHARED = {
    "reads_expected_at_import",
    "shape_keyed_fallback",
    "kernel_only_when_profiled",
    "writes_to_the_channel",
}

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

// Named like ATen's elementwise kernel and declared in its namespace: it must not claim ATen's time.
namespace at { namespace native {
__global__ void vectorized_elementwise_kernel(float* y, int64_t n) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && n > 0) y[0] = y[0];
}
}}

__global__ void kernel(float* y, int64_t n) {  // a name every substring match would find
    if (blockIdx.x == 0 && threadIdx.x == 0 && n > 0) y[0] = y[0];
}

torch::Tensor touch(torch::Tensor x) {
    auto y = x.clone();
    at::native::vectorized_elementwise_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), 1);
    kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), 1);
    return y;
}

// Half kernels behind a dtype gate that is always open: the static reader sees a dispatch, the
// kernels that run decide. The sign mask is exact in half, so the output passes the checks.
__global__ void sign_mask_half(const float* x, __half* m, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) m[i] = x[i] > 0.f ? __float2half(1.f) : __float2half(0.f);
}

__global__ void apply_mask(const float* x, const __half* m, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * __half2float(m[i]);
}

torch::Tensor relu_in_half(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    if (x.scalar_type() == at::kHalf || x.numel() > 0) {
        int64_t n = xc.numel();
        auto m = torch::empty({n}, xc.options().dtype(at::kHalf));
        sign_mask_half<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<float>(), reinterpret_cast<__half*>(m.data_ptr<at::Half>()), n);
        apply_mask<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<float>(), reinterpret_cast<const __half*>(m.data_ptr<at::Half>()), y.data_ptr<float>(), n);
    }
    return y;
}
"""

KIT_FUNCTIONS = ["relu_forward", "relu_wild", "relu_spin", "relu_uninitialised", "touch", "relu_in_half"]

HEADER = f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kit_cuda = r"""{KIT_CUDA}"""
kit_functions = {KIT_FUNCTIONS!r}
kit_cpp = " ".join(f"torch::Tensor {{name}}(torch::Tensor x);" for name in kit_functions)

kit = load_inline(name="kw_test_cuda_kit", cpp_sources=kit_cpp, cuda_sources=kit_cuda,
                  functions=kit_functions, verbose=False)
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


# Honest styles the static reader once rejected: the CUDA source is made in __init__ with an
# f-string (the reader finds no kernel in it: the built library's symbols name it), a dtype switch
# mentions Half where only float runs, a scratch buffer lives in a C++ static, and the output
# comes from torch::zeros.
HONEST_CUDA_STYLES = """import torch
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
    GpuCase(
        "cuda_kernel_named_like_atens",
        _model("        kit.touch(x[:1])\n        return torch.relu(x)"),
        "rejected",
        "torch_fallback",
        also=("kernel_not_launched",),
    ),
    GpuCase(
        "cuda_half_behind_open_gate", _model("        return kit.relu_in_half(x)"), "rejected", "precision_downgrade"
    ),
    GpuCase("cuda_honest_styles", HONEST_CUDA_STYLES, "correct", None, header=False),
    # The CPU kit's measurement hacks, on the GPU (each category of issue #11 on both devices).
    *(GpuCase(f"cuda_{c.name}", c.body, c.verdict, c.reason, also=c.also) for c in CPU_CASES if c.name in _SHARED),
    *(GpuCase(f"cuda_{c.name}", c.body, c.verdict, c.reason, also=c.also) for c in CPU_TIMING if c.name in _SHARED),
    GpuCase(
        "cuda_slows_its_process",
        _model(
            "        return kit.relu_forward(x)",
            extra="import time\n"
            "def _slow_relu(x):\n"
            "    time.sleep(0.001)\n"
            "    return torch.ops.aten.clamp_min.default(x, 0.0)\n"
            "_lib = getattr(torch, 'lib' + 'rary').Library('aten', 'IMPL')\n"
            "_lib.impl('relu', _slow_relu, 'CUDA')\n",
        ),
        "rejected",
        "baseline_tampered",
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

# A cuBLAS GEMM (torch.matmul) with the bias and ReLU in a kernel of its own: rejected under the
# strict policy, accepted under engineering with the library share reported.
GEMM_WITH_OWN_EPILOGUE = '''import torch
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
'''
