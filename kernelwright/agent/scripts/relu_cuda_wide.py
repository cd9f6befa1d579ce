"""A wide CUDA session for a host with several GPUs (issue #33): two rounds of one idea drawn four
times (`--ideas 1 --width 4`) on the built-in `relu` problem, every sample a correct grid-stride
kernel with float4 accesses that differs from the others in its block size and grid cap, so no
two share a build. Each reply is keyed to its sample, so the same candidates come out whatever
order the replies finish in and however many devices judge them: a one-GPU run and a two-GPU run
of this session judge the same eight kernels.

    kernelwright optimize relu --scripted relu-cuda-wide --device cuda --ideas 1 --width 4 --rounds 2
"""

from __future__ import annotations

from kernelwright.agent.scripted import Keyed, ScriptedSession, keyed
from kernelwright.agent.scripts.relu_cuda import _LAUNCH, VEC4_KERNELS, _file
from kernelwright.agent.scripts.rounds import session_of

_BODY = """const int threads = %d;
    const int64_t cap = %d;
    const bool aligned = ((uintptr_t)x %% 16 == 0) && ((uintptr_t)y %% 16 == 0);
    const int64_t n4 = aligned ? n / 4 : 0;
    if (n4 > 0) {
        int64_t blocks = (n4 + threads - 1) / threads;
        if (blocks > cap) blocks = cap;
        relu_vec4<<<(unsigned)blocks, threads, 0, stream>>>((const float4*)x, (float4*)y, n4);
    }
    const int64_t rest = n - n4 * 4;
    if (rest > 0) {
        int64_t blocks = (rest + threads - 1) / threads;
        if (blocks > cap) blocks = cap;
        relu_scalar<<<(unsigned)blocks, threads, 0, stream>>>(x, y, n4 * 4, n);
    }"""
ROUNDS = (
    ((128, 65535), (256, 65535), (512, 65535), (1024, 65535)),
    ((256, 1024), (256, 4096), (512, 2048), (1024, 528)),
)
"""(threads per block, most blocks) of each round's four samples."""


def reply(threads: int, cap: int) -> str:
    return _file(VEC4_KERNELS + _LAUNCH % (_BODY % (threads, cap)), f"kw_wide_relu_t{threads}_c{cap}")


def session() -> ScriptedSession:
    plans = [
        ("A full grid of float4 grid-stride blocks; try four block sizes at once.", 1.0),
        ("Cap the grid at a few waves of blocks and let each thread stride further.", 1.05),
    ]
    reviews = [
        {"decision": "iterate", "feedback": "All four correct; the block size hardly matters at the memory limit."},
        {"decision": "iterate", "feedback": "Capping the grid changes little: ReLU is at the bandwidth limit."},
    ]
    coder: list[Keyed] = [
        keyed(r + 1, 1, k + 1, reply(*shape)) for r, shapes in enumerate(ROUNDS) for k, shape in enumerate(shapes)
    ]
    return session_of("relu-cuda-wide", plans, coder, reviews, ["correct"] * len(coder))
