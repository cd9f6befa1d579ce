"""The own-model flow on the CPU (issue #32): one round on the `up` region of the shipped MLP
example (`kernelwright/ownmodel/examples/mlp_block.py`), an nn.Linear with a bias, as
`kernelwright model extract FILE:mlp_block --region up` writes it (`region_up.py`, problem name
`region_up`: registered as `region_up-cpu`, the name `batch optimize --scripted` looks up).

The coder's one reply is a correct C++ kernel in the fast-build form: one output element per
(row, column), single-threaded (no second OpenMP runtime beside torch's). Its parameters are drawn
as the problem's `Model` (an nn.Linear) draws them and keep their names (weight, bias), so the
user's state_dict loads into the exported op's module strictly. It works for any Linear with a
bias at any leading shape; the round is judged correct, not fast (the run's target is not met
unless this machine's eager Linear is slower than a naive loop).

    kernelwright model extract kernelwright/ownmodel/examples/mlp_block.py:mlp_block --region up --out regions
    kernelwright optimize regions/region_up.py --scripted region_up-cpu --device cpu --rounds 1
"""

from __future__ import annotations

from kernelwright.agent.scripted import ScriptedSession
from kernelwright.agent.scripts.rounds import session_of

NAME = "region_up-cpu"

LINEAR = '''```python
import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>

extern "C" int linear(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; ++i) {
        const float* xr = x + i * k;
        for (int64_t j = 0; j < n; ++j) {
            const float* wr = w + j * k;
            float acc = 0.f;
            for (int64_t t = 0; t < k; ++t) acc += xr[t] * wr[t];
            y[i * n + j] = acc + b[j];
        }
    }
    return 0;
}
"""

lib = load_kernels("kw_mlp_region_linear", SOURCE, {"linear": "ptr, ptr, ptr, ptr, i64, i64, i64"}, lang="cpp")


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
```
'''


def session() -> ScriptedSession:
    plans = [
        (
            "A direct C++ kernel for the Linear: one dot product of an input row and a weight row per "
            "output element, plus the bias; keep the parameters' names so the model's state_dict loads.",
            0.5,
        )
    ]
    reviews = [
        {
            "decision": "iterate",
            "feedback": "Correct on every trial and shape variant; a naive loop, far from the BLAS baseline.",
            "lesson": "A region's ModelNew keeps the submodule's parameter names and draws them as the "
            "reference does, so the user's state_dict loads into the exported op strictly.",
        }
    ]
    return session_of(NAME, plans, [LINEAR], reviews, ["correct"])
