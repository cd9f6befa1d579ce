"""The own-model flow at real size (issue #32): one round on the `mlp.act_norm` region of the
shipped transformer block (`kernelwright/ownmodel/examples/transformer_block.py`), an
`nn.Sequential(nn.GELU(), nn.LayerNorm(hidden))` in bfloat16, as `kernelwright model extract
FILE:transformer_block_large --region mlp.act_norm` writes it (`region_mlp_act_norm.py`, problem
name `region_mlp_act_norm`: registered as `region_mlp_act_norm-cuda` and `-cpu`, the names
`batch optimize --scripted` looks up on each device).

Eager runs the chain as two memory-bound kernels (the GELU writes a tensor the LayerNorm reads
back); the coder's one reply fuses them: each row is read once, its GELU values (rounded to
bfloat16, as the module's GELU output is, so the LayerNorm sees the same numbers) kept on chip
for the mean and the centred variance, and the normalised, affine row written once. On CUDA a
block per row keeps the row in shared memory as floats, with 16-byte loads and stores when the
row length and the pointers allow (any row length and row count work); on the CPU a plain
single-threaded C++ loop (the CPU session checks the flow, not speed). Both keep the LayerNorm's
parameters under the names the model gives them (`1.weight`, `1.bias`), drawn as the problem's
`Model` draws them, so the user's state_dict loads into the exported op strictly.

    kernelwright model extract kernelwright/ownmodel/examples/transformer_block.py:transformer_block_large \\
        --region mlp.act_norm --device cuda --out regions
    kernelwright batch optimize regions --out batch --scripted --device cuda --rounds 1
"""

from __future__ import annotations

from kernelwright.agent.scripted import ScriptedSession
from kernelwright.agent.scripts.rounds import session_of

PROBLEM = "region_mlp_act_norm"
NAME_CUDA = f"{PROBLEM}-cuda"
NAME_CPU = f"{PROBLEM}-cpu"

_MODEL = '''

class _Affine(nn.Module):
    """The LayerNorm's weight and bias under the names the model gives them (`1.weight`, `1.bias`)."""

    def __init__(self, norm):
        super().__init__()
        self.weight, self.bias = norm.weight, norm.bias


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        # Drawn as the problem's Model draws them: nn.Sequential(nn.GELU(), nn.LayerNorm(...)).
        norm = nn.LayerNorm(normalized_shape, eps=1e-05, elementwise_affine=True, bias=True, dtype=torch.bfloat16)
        self.eps = norm.eps
        self.add_module("1", _Affine(norm))

    def forward(self, x):
        affine = getattr(self, "1")
        n = affine.weight.numel()
        if x.dtype != torch.bfloat16 or x.shape[-1] != n:
            raise ValueError(f"expected bfloat16 rows of {n} values, got {x.dtype} {tuple(x.shape)}")
        x = x.contiguous()
        y = torch.empty_like(x)
        weight, bias = affine.weight.contiguous(), affine.bias.contiguous()
        lib.gelu_layer_norm(x, weight, bias, y, x.numel() // n, n, self.eps)
        return y
```
'''

CUDA_SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

// GELU (erf form), then LayerNorm over each row of n values: one block per row. The row's GELU
// values, rounded to bfloat16 as the module's GELU output is, wait in shared memory as floats
// between the three passes (mean, centred variance, output): x is read once and y written once.
// Each thread keeps the chunks it loaded at its own places in shared memory ([k][chunk]:
// consecutive threads hit consecutive banks) and only ever reads those back.

template <int V>
struct alignas(2 * V) Pack {
    __nv_bfloat16 v[V];
};

__device__ __forceinline__ float gelu_rounded(__nv_bfloat16 h) {
    const float f = __bfloat162float(h);
    const float g = 0.5f * f * (1.0f + erff(f * 0.70710678118654752f));
    return __bfloat162float(__float2bfloat16(g));
}

__device__ __forceinline__ float block_sum(float v, float* partial) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = lane < warps ? partial[lane] : 0.f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();  // `partial` is written again by the next sum
    return v;
}

template <int V>
__global__ void gelu_layer_norm_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                                       const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y,
                                       int64_t n, float eps) {
    extern __shared__ float row[];
    __shared__ float partial[32];
    const int64_t chunks = n / V;
    const Pack<V>* xr = reinterpret_cast<const Pack<V>*>(x + (int64_t)blockIdx.x * n);
    Pack<V>* yr = reinterpret_cast<Pack<V>*>(y + (int64_t)blockIdx.x * n);
    const Pack<V>* wp = reinterpret_cast<const Pack<V>*>(w);
    const Pack<V>* bp = reinterpret_cast<const Pack<V>*>(b);

    float sum = 0.f;
#pragma unroll 4
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
        const Pack<V> p = xr[c];
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const float g = gelu_rounded(p.v[k]);
            row[k * chunks + c] = g;
            sum += g;
        }
    }
    const float mean = block_sum(sum, partial) / (float)n;

    float squares = 0.f;
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const float d = row[k * chunks + c] - mean;
            squares += d * d;
        }
    }
    const float rstd = rsqrtf(block_sum(squares, partial) / (float)n + eps);

#pragma unroll 4
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
        const Pack<V> wv = wp[c], bv = bp[c];
        Pack<V> out;
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const float normed = (row[k * chunks + c] - mean) * rstd;
            out.v[k] = __float2bfloat16(normed * __bfloat162float(wv.v[k]) + __bfloat162float(bv.v[k]));
        }
        yr[c] = out;
    }
}

template <int V>
static cudaError_t launch(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b, __nv_bfloat16* y,
                          int64_t rows, int64_t n, float eps, cudaStream_t stream) {
    const int64_t chunks = n / V;
    int64_t threads = ((chunks + 3) / 4 + 31) / 32 * 32;  // about four chunks a thread, whole warps
    threads = threads < 64 ? 64 : (threads > 1024 ? 1024 : threads);
    const size_t shared = (size_t)n * sizeof(float);
    if (shared > 48 * 1024) {  // a long row: opt in to more shared memory (fails cleanly past the device's limit)
        const cudaError_t err =
            cudaFuncSetAttribute(gelu_layer_norm_kernel<V>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared);
        if (err != cudaSuccess) return err;
    }
    gelu_layer_norm_kernel<V><<<(unsigned)rows, (unsigned)threads, shared, stream>>>(x, w, b, y, n, eps);
    return cudaGetLastError();
}

extern "C" int gelu_layer_norm(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b,
                               __nv_bfloat16* y, int64_t rows, int64_t n, float eps, cudaStream_t stream) {
    if (rows == 0) return 0;
    if (n <= 0 || rows > 0x7fffffff || n > (int64_t)1 << 24) return (int)cudaErrorInvalidValue;
    const uintptr_t address = (uintptr_t)x | (uintptr_t)w | (uintptr_t)b | (uintptr_t)y;
    const bool wide = n % 8 == 0 && address % 16 == 0;  // 16-byte loads and stores of 8 values
    return (int)(wide ? launch<8>(x, w, b, y, rows, n, eps, stream) : launch<1>(x, w, b, y, rows, n, eps, stream));
}
"""
"""The CUDA session's kernels (see the module doc); also what `scripts/check_cuda_sources.py` and the
tests compile."""

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

// bfloat16 is the high half of a float; rounding to nearest even, as torch rounds (NaN kept quiet).
static inline float from_bf16(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// GELU (erf form) rounded to bfloat16 as the module's GELU output is, then LayerNorm of each row:
// the row's GELU values kept in a buffer for the mean, the centred variance and the output.
extern "C" int gelu_layer_norm(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y,
                               int64_t rows, int64_t n, float eps) {
    if (n <= 0) return rows == 0 ? 0 : 1;
    std::vector<float> row((size_t)n);
    for (int64_t r = 0; r < rows; ++r) {
        const uint16_t* xr = x + r * n;
        uint16_t* yr = y + r * n;
        double sum = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            const float f = from_bf16(xr[i]);
            const float g = from_bf16(to_bf16(0.5f * f * (1.0f + std::erf(f * 0.70710678118654752f))));
            row[i] = g;
            sum += g;
        }
        const float mean = (float)(sum / (double)n);
        double squares = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            const float d = row[i] - mean;
            squares += (double)d * d;
        }
        const float rstd = 1.0f / std::sqrt((float)(squares / (double)n) + eps);
        for (int64_t i = 0; i < n; ++i)
            yr[i] = to_bf16((row[i] - mean) * rstd * from_bf16(w[i]) + from_bf16(b[i]));
    }
    return 0;
}
"""
"""The CPU session's kernel (see the module doc)."""


def _reply(source: str, name: str, signature: str, lang: str) -> str:
    header = (
        "```python\nimport torch\nimport torch.nn as nn\n\nfrom kernelwright.fastext import load_kernels\n\n"
        f'SOURCE = r"""{source}"""\n\n'
        f'lib = load_kernels("{name}", SOURCE, {{"gelu_layer_norm": "{signature}"}}, lang="{lang}")\n'
    )
    return header + _MODEL


CUDA_REPLY = _reply(CUDA_SOURCE, "kw_act_norm_cuda", "ptr, ptr, ptr, ptr, i64, i64, f32, stream", "cuda")
CPP_REPLY = _reply(CPP_SOURCE, "kw_act_norm_cpp", "ptr, ptr, ptr, ptr, i64, i64, f32", "cpp")

_PLAN = (
    "Fuse the GELU into the LayerNorm: read each row once, keep its GELU values (rounded to bfloat16 "
    "as the module's output is) on chip for the mean and the centred variance, write the normalised "
    "affine row once; keep the LayerNorm's parameter names (1.weight, 1.bias) so the state_dict loads."
)
_REVIEW = {
    "decision": "iterate",
    "feedback": "Correct on every trial; one read of the input and one write of the output, against "
    "eager's two kernels and the intermediate tensor between them.",
    "lesson": "A chain of memory-bound ops over rows fuses into one pass when the row fits on chip; "
    "rounding the intermediate as the reference does keeps a low-precision region exact.",
}


def session() -> ScriptedSession:
    """`region_mlp_act_norm-cuda`: the fused kernel on a GPU."""
    return session_of(NAME_CUDA, [(_PLAN, 1.6)], [CUDA_REPLY], [_REVIEW], ["correct"])


def cpu_session() -> ScriptedSession:
    """`region_mlp_act_norm-cpu`: the same fusion in C++, to run the flow on a CPU."""
    return session_of(NAME_CPU, [(_PLAN, 1.0)], [CPP_REPLY], [_REVIEW], ["correct"])
