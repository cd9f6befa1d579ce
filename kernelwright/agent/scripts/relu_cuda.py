"""The CUDA demo: four rounds on the built-in `relu` problem (CUDA, fast-build form).

1. a correct but slow kernel (one GPU thread walks the whole tensor);
2. a build error (an undeclared variable), repaired on the coder's next turn with an edit to its
   own draft (a SEARCH/REPLACE block), still one warp only;
3. a hack: the kernel is built but torch.relu does the work -> rejected; the coder, shown the
   reason's registry entry, repairs it (its own one-warp kernel on the whole tensor: correct but
   slow) and the reviewer abandons the direction;
4. a grid of blocks with float4 loads and stores (scalar path for a misaligned pointer or the tail)
   -> accepted if it measurably beats torch.compile (the target baseline) on this GPU.
"""

from __future__ import annotations

from kernelwright.agent.scripted import ScriptedSession
from kernelwright.agent.scripts.rounds import session_of

_HEADER = '''import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>

%s
"""

lib = load_kernels("%s", SOURCE, {"relu": "ptr, ptr, i64, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
%s
        return y
'''
_CALL = "        lib.relu(x, y, x.numel())"


def _file(body: str, name: str, call: str = _CALL) -> str:
    return "```python\n" + _HEADER % (body.strip("\n"), name, call) + "```\n"


_LAUNCH = """
extern "C" int relu(const float* x, float* y, int64_t n, cudaStream_t stream) {
    if (n == 0) return 0;
    %s
    return (int)cudaGetLastError();
}
"""

SLOW = _file(
    """
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
    + _LAUNCH % "relu_kernel<<<1, 1, 0, stream>>>(x, y, n);",
    "kw_demo_relu_cuda_slow",
)
_WARP = """
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    %s
    for (int64_t i = threadIdx.x; i < n; i += step) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
BROKEN = _file(_WARP % "" + _LAUNCH % "relu_kernel<<<1, 32, 0, stream>>>(x, y, n);", "kw_demo_relu_cuda_warp")
FIX = (
    "`step` is not declared: the warp's stride is blockDim.x.\n"
    "<<<<<<< SEARCH\n    for (int64_t i = threadIdx.x; i < n; i += step) y[i] = x[i] > 0.f ? x[i] : 0.f;\n=======\n"
    "    const int64_t step = blockDim.x;\n"
    "    for (int64_t i = threadIdx.x; i < n; i += step) y[i] = x[i] > 0.f ? x[i] : 0.f;\n>>>>>>> REPLACE\n"
)
HACK = _file(
    _WARP % "const int64_t step = blockDim.x;" + _LAUNCH % "relu_kernel<<<1, 32, 0, stream>>>(x, y, n);",
    "kw_demo_relu_cuda_hack",
    "        lib.relu(x[:1], y[:1], 1)\n        y = torch.relu(x)",
)
UNHACK = (
    "torch.relu did the work, which never counts: our kernel takes the whole tensor.\n"
    "<<<<<<< SEARCH\n        lib.relu(x[:1], y[:1], 1)\n        y = torch.relu(x)\n=======\n"
    "        lib.relu(x, y, x.numel())\n>>>>>>> REPLACE\n"
)
VEC4_KERNELS = """
__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
        y[i] = v;
    }
}

__global__ void relu_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
    for (int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
"""A grid-stride float4 ReLU and its scalar tail: the kernels of the demo's last round (and of
`relu_cuda_wide`'s samples, which launch them with other shapes)."""

FAST = _file(
    VEC4_KERNELS
    + _LAUNCH
    % """const int threads = 256;
    const bool aligned = ((uintptr_t)x % 16 == 0) && ((uintptr_t)y % 16 == 0);
    const int64_t n4 = aligned ? n / 4 : 0;
    if (n4 > 0) {
        int64_t blocks = (n4 + threads - 1) / threads;
        if (blocks > 65535) blocks = 65535;
        relu_vec4<<<(unsigned)blocks, threads, 0, stream>>>((const float4*)x, (float4*)y, n4);
    }
    const int64_t rest = n - n4 * 4;
    if (rest > 0) {
        int64_t blocks = (rest + threads - 1) / threads;
        if (blocks > 65535) blocks = 65535;
        relu_scalar<<<(unsigned)blocks, threads, 0, stream>>>(x, y, n4 * 4, n);
    }""",
    "kw_demo_relu_cuda_fast",
)


def session() -> ScriptedSession:
    plans = [
        ("Start with the simplest correct CUDA kernel to have a baseline.", 0.1),
        ("Spread the loop over a warp with a strided loop; expect a large gain over one thread.", 0.5),
        ("Let torch.relu handle the bulk and keep the kernel for the first element.", 3.0),
        ("A full grid of 256-thread blocks with float4 loads and stores, scalar tail.", 1.2),
    ]
    reviews = [
        {
            "decision": "iterate",
            "feedback": "Correct, but one GPU thread does all the work: use the whole GPU.",
            "lesson": "A kernel launched with one thread is serial code on a slow core.",
        },
        {
            "decision": "iterate",
            "feedback": "The retry built and is correct; one warp still leaves almost every SM idle.",
            "lesson": "nvcc's first error names the culprit: an undeclared name is fixed by declaring it.",
        },
        {
            "decision": "abandon",
            "feedback": "Rejected as torch_fallback: torch.relu computed the output and our kernel touched one "
            "element. The repair does the work in our kernel, but on one warp: drop this direction.",
            "lesson": "Calling the PyTorch op for the main work is a reward hack and is always rejected.",
        },
        {
            "decision": "iterate",
            "feedback": "A full grid with vector accesses, correct on every trial and shape variant.",
            "lesson": "Memory-bound elementwise kernels want a full grid and 16-byte accesses.",
        },
    ]
    return session_of(
        "relu-cuda",
        plans,
        [SLOW, BROKEN, FIX, HACK, UNHACK, FAST],
        reviews,
        ["correct", "build_error", "correct", "rejected", "correct", "correct"],
    )
