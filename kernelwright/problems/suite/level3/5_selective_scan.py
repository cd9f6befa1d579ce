import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 3,
    "tags": ["block", "ssm", "scan", "recurrence"],
    "dtype": "float32",
    "description": "Mamba-style selective scan: an input-dependent diagonal linear recurrence over time.",
    # A recurrence over 64 steps, each a sum over the state dimension: rounding compounds.
    "atol": 1e-3,
    "rtol": 1e-3,
}

batch_size = 8
seq_len = 64
d_inner = 1024
d_state = 16


class Model(nn.Module):
    """For each time t (h starts at 0, state (batch, d_inner, d_state)):
        dt = softplus(delta[:, t] + dt_bias)                  (batch, d_inner)
        h  = exp(dt * A) * h + dt * B[:, t] * x[:, t]         A = -exp(A_log), (d_inner, d_state)
        y[:, t] = sum_n h[..., n] * C[:, t, n] + D * x[:, t]
    Inputs: x, delta (batch, seq, d_inner); B, C (batch, seq, d_state). Output (batch, seq, d_inner).
    """

    def __init__(self, d_inner: int, d_state: int):
        super().__init__()
        init = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_inner, 1)
        self.A_log = nn.Parameter(torch.log(init) + 0.1 * torch.randn(d_inner, d_state))
        self.D = nn.Parameter(torch.ones(d_inner) + 0.1 * torch.randn(d_inner))
        self.dt_bias = nn.Parameter(0.1 * torch.randn(d_inner) - 2.0)

    def forward(self, x: torch.Tensor, delta: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
        batch, seq, d_inner = x.shape
        A = -torch.exp(self.A_log)
        dt = F.softplus(delta + self.dt_bias)
        h = x.new_zeros(batch, d_inner, A.shape[1])
        ys = []
        for t in range(seq):
            dt_t = dt[:, t].unsqueeze(-1)
            h = torch.exp(dt_t * A) * h + dt_t * B[:, t].unsqueeze(1) * x[:, t].unsqueeze(-1)
            ys.append((h * C[:, t].unsqueeze(1)).sum(dim=-1))
        return torch.stack(ys, dim=1) + self.D * x


def _inputs(b, s, d, n):
    return [torch.randn(b, s, d), torch.randn(b, s, d), torch.randn(b, s, n), torch.randn(b, s, n)]


def get_inputs():
    return _inputs(batch_size, seq_len, d_inner, d_state)


def get_init_inputs():
    return [d_inner, d_state]


def get_input_variants():
    return [_inputs(3, 77, d_inner, d_state), _inputs(1, 301, d_inner, d_state)]


def get_small_inputs():
    return _inputs(2, 16, 32, 8)


def get_small_init_inputs():
    return [32, 8]


def get_small_input_variants():
    return [_inputs(3, 7, 32, 8), _inputs(1, 21, 32, 8)]
