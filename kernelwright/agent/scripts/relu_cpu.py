"""The CPU demo: four rounds on the built-in `relu` problem (C++, fast-build form).

1. a correct but slow kernel (it recomputes the output 64 times);
2. a build error (an undeclared variable), repaired on the coder's next turn with an edit to its
   own draft (a SEARCH/REPLACE block), still doing 16 passes;
3. a hack: the kernel is built but torch.relu does the work -> rejected; the coder, shown the
   reason's registry entry, repairs it (its own kernel on the whole tensor, still 16 passes: correct
   but slow) and the reviewer abandons the direction;
4. one pass over the data, OpenMP-parallel for large tensors -> accepted if it measurably beats
   torch.compile (the target baseline) on this machine.
"""

from __future__ import annotations

from kernelwright.agent.scripted import ScriptedSession
from kernelwright.agent.scripts.rounds import session_of

_HEADER = '''import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>

extern "C" int relu(const float* x, float* y, int64_t n) {
%s
    return 0;
}
"""

lib = load_kernels("%s", SOURCE, {"relu": "ptr, ptr, i64"}, lang="cpp")


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
    return "```python\n" + _HEADER % (body, name, call) + "```\n"


SLOW = _file(
    "    for (int pass = 0; pass < 64; ++pass)\n        for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;",
    "kw_demo_relu_slow",
)
BROKEN = _file(
    "    for (int pass = 0; pass < 16; ++pass)\n        for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : zero;",
    "kw_demo_relu_unrolled",
)
FIX = (
    "`zero` is not declared: declare it before the loop.\n"
    "<<<<<<< SEARCH\n    for (int pass = 0; pass < 16; ++pass)\n=======\n"
    "    const float zero = 0.f;\n    for (int pass = 0; pass < 16; ++pass)\n>>>>>>> REPLACE\n"
)
HACK = _file(
    "    const float zero = 0.f;\n    for (int pass = 0; pass < 16; ++pass)\n"
    "        for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : zero;",
    "kw_demo_relu_hack",
    "        lib.relu(x[:1], y[:1], 1)\n        y = torch.relu(x)",
)
UNHACK = (
    "torch.relu did the work, which never counts: our kernel takes the whole tensor.\n"
    "<<<<<<< SEARCH\n        lib.relu(x[:1], y[:1], 1)\n        y = torch.relu(x)\n=======\n"
    "        lib.relu(x, y, x.numel())\n>>>>>>> REPLACE\n"
)
FAST = _file(
    "    #pragma omp parallel for schedule(static) if (n > (1 << 18))\n"
    "    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;",
    "kw_demo_relu_fast",
)


def session() -> ScriptedSession:
    plans = [
        ("Start with a straightforward C++ loop to get a correct baseline kernel.", 0.5),
        ("Cut the redundant passes and name the zero constant; expect to approach eager.", 0.9),
        ("Let torch.relu handle the bulk and keep the kernel for the first element.", 3.0),
        ("One pass over the data, branch-free select the compiler vectorizes; OpenMP only for large tensors.", 1.5),
    ]
    reviews = [
        {
            "decision": "iterate",
            "feedback": "Correct but 64 passes over the data: do the work once.",
            "lesson": "Repeated passes over memory cost linearly; an elementwise op needs one.",
        },
        {
            "decision": "iterate",
            "feedback": "The retry built and is correct, but 16 passes are still 16x the traffic.",
            "lesson": "Read the compiler error's first line: an undeclared name is fixed by declaring it.",
        },
        {
            "decision": "abandon",
            "feedback": "Rejected as torch_fallback: torch.relu computed the output, our kernel touched one element. "
            "The repair does the work in our kernel, but with round 2's 16 passes: drop this direction.",
            "lesson": "Calling the PyTorch op for the main work is a reward hack and is always rejected.",
        },
        {
            "decision": "iterate",
            "feedback": "One pass, correct on every trial and shape variant.",
            "lesson": "For memory-bound elementwise ops on the CPU, one vectorized pass is the whole game.",
        },
    ]
    return session_of(
        "relu-cpu",
        plans,
        [SLOW, BROKEN, FIX, HACK, UNHACK, FAST],
        reviews,
        ["correct", "build_error", "correct", "rejected", "correct", "correct"],
    )
