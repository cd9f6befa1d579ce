"""A Triton session on the built-in `relu` problem (GPU only): what `optimize --backend triton
--scripted relu-triton` replays, to run the agent end to end in Triton (#30).

1. one program per 1024 elements, but the grid is `n // BLOCK`: the tail of a size that is not a
   multiple of the block is never written -> incorrect on the held-out odd shapes; the coder, shown
   the trial that failed and where the outputs first differ, repairs its own draft with an edit
   (`triton.cdiv`) -> correct;
2. bigger programs (4096 elements, 8 warps) so each moves more bytes -> correct.

ReLU is bandwidth-bound: at the default size torch.compile is at the memory limit too, so whether
a kernel is accepted is the timing's call on the day (an honest "not faster" is the expected end).
"""

from __future__ import annotations

from kernelwright.agent.scripted import ScriptedSession
from kernelwright.agent.scripts.rounds import session_of

_FILE = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
%s
        return y
"""

TAIL_BUG = "```python\n" + _FILE % "        relu_kernel[(n // 1024,)](x, y, n, BLOCK=1024)" + "```\n"
TAIL_FIX = (
    "The grid rounds down: the last partial block is never launched. Round up.\n"
    "<<<<<<< SEARCH\n        relu_kernel[(n // 1024,)](x, y, n, BLOCK=1024)\n=======\n"
    "        relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)\n>>>>>>> REPLACE\n"
)
WIDE = (
    "```python\n" + _FILE % "        relu_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096, num_warps=8)" + "```\n"
)


def session() -> ScriptedSession:
    plans = [
        ("A Triton elementwise kernel: one program per 1024 elements, masked loads and stores.", 0.9),
        ("Bigger programs: 4096 elements and 8 warps each, fewer programs for the same bytes.", 1.05),
    ]
    reviews = [
        {
            "decision": "iterate",
            "feedback": "The first draft skipped the tail (grid rounded down); the repair is correct. "
            "ReLU is bandwidth-bound: the room left is what the speed of light says.",
            "lesson": "A grid of n // BLOCK drops the tail: use triton.cdiv and mask.",
        },
        {
            "decision": "iterate",
            "feedback": "Correct with bigger programs; compare the times with the bandwidth limit.",
            "lesson": "For a memory-bound elementwise op the block size moves little once the grid is full.",
        },
    ]
    return session_of("relu-triton", plans, [TAIL_BUG, TAIL_FIX, WIDE], reviews, ["incorrect", "correct", "correct"])
