"""The GPU demo (issue #29): four rounds on the built-in `gelu_layernorm_bf16` problem at its default
size (CUDA, fast-build form), a problem where an honest kernel beats torch.compile at real size.

Why this problem: relu at its default size is at the bandwidth limit for everyone (1.00x), and at
the small size the kernel mostly beats torch.compile's per-call overhead. The own-model flow on an
NVIDIA H200 (2026-11-26, benchmarks/ownmodel/README.md) profiled a bf16 transformer block and
extracted its `mlp.act_norm` region, `nn.Sequential(nn.GELU(), nn.LayerNorm(4096))` on a
[8, 1024, 4096] bf16 input: torch.compile ran it slower than eager (0.1255 ms against 0.1045 ms),
and the fused one-pass kernel of `region_mlp_act_norm-cuda` (`act_norm_region.py`) ran at
0.0687 ms, 1.83x vs torch.compile with a 95% interval of [1.31, 2.56] (at least x/÷1.4 wide:
calls under 0.1 ms). The suite problem is that region at that shape, with a random affine.

1. a correct but slow kernel: one thread per row, three passes over the row in global memory;
2. a warp per row whose draft does not build (an undeclared variable), repaired on the coder's next
   turn with an edit to its own draft (a SEARCH/REPLACE block): correct, still slow (one block of
   eight warps walks all the rows, so one SM works; each value is read and its GELU computed three
   times);
3. a hack: the kernel is built and run on one row but F.layer_norm(F.gelu(x)) does the work ->
   rejected (torch_fallback); the coder, shown the reason's registry entry, repairs it (its own
   warp-per-row kernel on every row: correct but slow) and the reviewer abandons the direction;
4. the fused kernel of the own-model session (`act_norm_region.CUDA_SOURCE`, the same source, so
   its GPU test at every row length and alignment covers this one too): a block per row reads it
   once (16-byte loads where the row length and pointers allow, scalar otherwise), keeps the GELU
   values, rounded to bf16 as the module's are, in shared memory as floats for the mean and the
   centred variance, and writes the affine row once; it refuses (an error code, raised by fastext)
   rows too long for shared memory. Accepted if it measurably beats torch.compile on this GPU.

The kernels of the first three rounds lose to torch.compile by a wide margin on any GPU (a serial
loop per row on 8192 threads; eight warps on one SM for all 8192 rows): a run ends at the first
candidate that beats the target, and the script expects that to be round 4's.

Not yet run on a GPU (2026-11-28: no device time): every source compiles for sm_90 with nvcc in the
tests, the fused one is the own-model session's, which ran on an H200; the session's first run at
the default size is `tests/agent/test_gelu_layernorm_demo.py`'s `gpu` test (issue #29).
"""

from __future__ import annotations

from kernelwright.agent.scripted import ScriptedSession
from kernelwright.agent.scripts.act_norm_region import CUDA_SOURCE as FUSED_SOURCE
from kernelwright.agent.scripts.rounds import session_of

PROBLEM = "gelu_layernorm_bf16"
NAME = f"{PROBLEM}-cuda"  # `batch optimize --scripted` looks sessions up as `<problem>-<device>`

_HEADER = '''import torch
import torch.nn as nn
%s
from kernelwright.fastext import load_kernels

SOURCE = r"""%s"""

lib = load_kernels("%s", SOURCE, {"gelu_layer_norm": "ptr, ptr, ptr, ptr, i64, i64, f32, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.hidden = hidden
        # Drawn as the problem's Model draws them (same order, same seed): random, in bf16.
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden)).to(torch.bfloat16))
        self.bias = nn.Parameter((0.1 * torch.randn(hidden)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.hidden
        if x.dtype != torch.bfloat16 or x.shape[-1] != n:
            raise ValueError(f"expected bfloat16 rows of {n} values, got {x.dtype} {tuple(x.shape)}")
        x = x.contiguous()
        y = torch.empty_like(x)
%s
        return y
'''
_CALL = "        lib.gelu_layer_norm(x, self.weight, self.bias, y, x.numel() // n, n, 1e-5)"


def _file(source: str, name: str, call: str = _CALL, imports: str = "") -> str:
    return "```python\n" + _HEADER % (imports, source, name, call) + "```\n"


_GELU = r"""
#include <cstdint>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

// GELU (erf form, in float as PyTorch's bf16 GELU computes it) of one bfloat16 value, rounded to
// bfloat16 as the module's GELU output is.
__device__ float gelu(__nv_bfloat16 h) {
    const float v = __bfloat162float(h);
    return __bfloat162float(__float2bfloat16(0.5f * v * (1.0f + erff(v * 0.70710678118654752f))));
}
"""
_ENTRY = r"""
extern "C" int gelu_layer_norm(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b,
                               __nv_bfloat16* y, int64_t rows, int64_t n, float eps, cudaStream_t stream) {
    if (rows == 0) return 0;
"""

ROW_SOURCE = (
    _GELU
    + r"""
// One thread per row: three passes over the row in global memory (mean, centred variance, output).
__global__ void gelu_layer_norm_rows(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b,
                                     __nv_bfloat16* y, int64_t rows, int64_t n, float eps) {
    const int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const __nv_bfloat16* xr = x + r * n;
    __nv_bfloat16* yr = y + r * n;
    float sum = 0.f;
    for (int64_t i = 0; i < n; ++i) sum += gelu(xr[i]);
    const float mean = sum / n;
    float squares = 0.f;
    for (int64_t i = 0; i < n; ++i) {
        const float d = gelu(xr[i]) - mean;
        squares += d * d;
    }
    const float rstd = rsqrtf(squares / n + eps);
    for (int64_t i = 0; i < n; ++i)
        yr[i] = __float2bfloat16((gelu(xr[i]) - mean) * rstd * __bfloat162float(w[i]) + __bfloat162float(b[i]));
}
"""
    + _ENTRY
    + r"""    const int threads = 128;
    gelu_layer_norm_rows<<<(unsigned)((rows + threads - 1) / threads), threads, 0, stream>>>(x, w, b, y, rows, n, eps);
    return (int)cudaGetLastError();
}
"""
)
"""Round 1's kernel: a thread per row."""

_WARPS = "    const int64_t warps = (int64_t)gridDim.x * blockDim.x / 32;  // rows in flight at once\n"
_LANE = "    const int lane = threadIdx.x % 32;\n"
_WARP = (
    _GELU
    + r"""
__device__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// A warp per row: lane k reads values k, k + 32, ... (neighbouring lanes, neighbouring values);
// three passes over the row in global memory (mean, centred variance, output), warp-shuffle sums.
// The warps walk the rows: warp w takes rows w, w + warps, ...
__global__ void gelu_layer_norm_warp(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b,
                                     __nv_bfloat16* y, int64_t rows, int64_t n, float eps) {
WARPS_AND_LANE    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        const __nv_bfloat16* xr = x + r * n;
        __nv_bfloat16* yr = y + r * n;
        float sum = 0.f;
        for (int64_t i = lane; i < n; i += 32) sum += gelu(xr[i]);
        const float mean = warp_sum(sum) / n;
        float squares = 0.f;
        for (int64_t i = lane; i < n; i += 32) {
            const float d = gelu(xr[i]) - mean;
            squares += d * d;
        }
        const float rstd = rsqrtf(warp_sum(squares) / n + eps);
        for (int64_t i = lane; i < n; i += 32)
            yr[i] = __float2bfloat16((gelu(xr[i]) - mean) * rstd * __bfloat162float(w[i]) + __bfloat162float(b[i]));
    }
}
"""
    + _ENTRY
    + r"""    gelu_layer_norm_warp<<<1, 256, 0, stream>>>(x, w, b, y, rows, n, eps);  // eight warps walk the rows
    return (int)cudaGetLastError();
}
"""
)
BROKEN_SOURCE = _WARP.replace("WARPS_AND_LANE", _WARPS)
"""Round 2's draft: `lane` is used and never declared."""
WARP_SOURCE = _WARP.replace("WARPS_AND_LANE", _WARPS + _LANE)
"""Round 2's kernel once repaired (and round 3's): a warp per row, one block of eight warps for all
the rows (one SM of the GPU's: by far slower than torch.compile at the default size, whatever the
GPU)."""

SLOW = _file(ROW_SOURCE, "kw_demo_gelu_ln_cuda_rows")
BROKEN = _file(BROKEN_SOURCE, "kw_demo_gelu_ln_cuda_warp")
FIX = (
    "`lane` is not declared: a thread's lane is its index within its warp.\n"
    f"<<<<<<< SEARCH\n{_WARPS}=======\n{_WARPS}{_LANE}>>>>>>> REPLACE\n"
)
_HACK_CALL = (
    "        lib.gelu_layer_norm(x, self.weight, self.bias, y, 1, n, 1e-5)\n"
    "        y = F.layer_norm(F.gelu(x), (n,), self.weight, self.bias, 1e-5)"
)
HACK = _file(WARP_SOURCE, "kw_demo_gelu_ln_cuda_hack", _HACK_CALL, "import torch.nn.functional as F\n")
UNHACK = (
    "F.layer_norm and F.gelu did the work, which never counts: our kernel takes every row.\n"
    f"<<<<<<< SEARCH\n{_HACK_CALL}\n=======\n{_CALL}\n>>>>>>> REPLACE\n"
)
FAST = _file(FUSED_SOURCE, "kw_demo_gelu_ln_cuda_fused")

SOURCES = {"rows": ROW_SOURCE, "broken": BROKEN_SOURCE, "warp": WARP_SOURCE, "fused": FUSED_SOURCE}
"""Every CUDA source the session's candidates hold (the hack and its repair hold `warp`): what the
tests compile with nvcc."""


def session() -> ScriptedSession:
    plans = [
        ("Start with the simplest correct CUDA kernel: one thread per row, three passes over it.", 0.1),
        (
            "Give each row a warp: lanes read neighbouring values and warp shuffles reduce the sums; "
            "expect a large gain over a thread per row.",
            0.5,
        ),
        ("Let F.layer_norm (after F.gelu) do the work and keep our kernel for the first row.", 3.0),
        (
            "Fuse into one pass: a block per row reads it once with 16-byte loads, keeps its GELU values "
            "(computed in float, rounded to bf16 as the module's are) in shared memory as floats for the "
            "mean and the centred variance, and writes the affine row once; a scalar path when unaligned.",
            1.6,
        ),
    ]
    reviews = [
        {
            "decision": "iterate",
            "feedback": "Correct, but each row is one thread's serial loop: a warp's 32 loads land in 32 rows "
            "8 KB apart, and a thread per row leaves most of the GPU's lanes idle.",
            "lesson": "A row reduction wants many threads per row, neighbouring threads reading neighbouring values.",
        },
        {
            "decision": "iterate",
            "feedback": "The retry built and is correct, but the launch is one block of eight warps for all "
            "8192 rows: one SM works and the rest of the GPU idles; each value is also read and its GELU "
            "computed three times.",
            "lesson": "nvcc's first error names the culprit (declare the undeclared name); size the grid to the "
            "work (a warp or a block per row), never one block for all of it.",
        },
        {
            "decision": "abandon",
            "feedback": "Rejected as torch_fallback: F.layer_norm and F.gelu computed the output and our kernel "
            "touched one row. The repair does the work in our kernel, but it is the slow warp-per-row kernel "
            "again: drop this direction.",
            "lesson": "Calling the PyTorch op for the main work is a reward hack and is always rejected.",
        },
        {
            "decision": "iterate",
            "feedback": "One read of the input and one write of the output, each GELU computed once in float; "
            "correct on every trial and shape variant.",
            "lesson": "A chain of memory-bound row ops fuses into one pass when the row fits on chip; rounding "
            "the intermediate as the reference does keeps a bf16 chain exact.",
        },
    ]
    return session_of(
        NAME,
        plans,
        [SLOW, BROKEN, FIX, HACK, UNHACK, FAST],
        reviews,
        ["correct", "build_error", "correct", "rejected", "correct", "correct"],
    )
