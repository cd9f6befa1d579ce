"""CUDA graphs on a GPU (#28), self-contained: an honest candidate that captures its own kernel
in a CUDA graph (on first use, per shape) and replays it on the current stream over static
buffers, copying each call's fresh input in and returning a copy of the static output, is judged
`correct` (its graph-replayed kernels are its own work, `graph_replayed_kernels`); the same graph
replayed without copying the new input in (a stale graph: every call answers the first call's
input) is not. Marked `gpu`: `pytest -m gpu tests/harness/test_graph_replay_gpu.py` on a GPU host."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.harness.session import evaluate
from kernelwright.problems import resolve_problem
from tests.candidates import harness_options, write_case

pytestmark = pytest.mark.gpu

_GRAPH_CANDIDATE = r'''
"""A ReLU kernel replayed from a CUDA graph captured on first use, per input shape."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void graph_relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

void relu_into(torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "x: contiguous float32 CUDA");
    const int64_t n = x.numel();
    if (n == 0) return;
    const int threads = 256;
    const int64_t want = (n + threads - 1) / threads;
    const int blocks = (int)(want < 65535 * 8 ? want : 65535 * 8);
    graph_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""

graph_relu = load_inline(
    name="kw_graph_relu_cuda",
    cpp_sources="void relu_into(torch::Tensor x, torch::Tensor y);",
    cuda_sources=cuda_source,
    functions=["relu_into"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graphs = {}

    def _capture(self, x):
        static_x = torch.empty_like(x, memory_format=torch.contiguous_format)
        static_y = torch.empty_like(static_x)
        static_x.copy_(x)
        graph_relu.relu_into(static_x, static_y)  # warm-up outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            graph_relu.relu_into(static_x, static_y)
        return graph, static_x, static_y

    def forward(self, x):
        key = tuple(x.shape)
        if key not in self.graphs:
            self.graphs[key] = self._capture(x)
        graph, static_x, static_y = self.graphs[key]
        COPY_IN
        graph.replay()
        return static_y.clone()
'''

HONEST_GRAPH = _GRAPH_CANDIDATE.replace("COPY_IN", "static_x.copy_(x)")
"""Copies every call's input into the captured buffer, then replays: the kernel runs on the new values."""

STALE_GRAPH = _GRAPH_CANDIDATE.replace("COPY_IN", "pass  # the new input is never copied in").replace(
    "kw_graph_relu_cuda", "kw_graph_relu_cuda_stale"
)
"""Replays the graph over the input it was captured with: every later call answers the first."""


def test_an_honest_graph_replay_is_correct_and_a_stale_one_is_not(tmp_path: Path, shared_home: Path) -> None:
    paths = [write_case(tmp_path, "honest_graph", HONEST_GRAPH), write_case(tmp_path, "stale_graph", STALE_GRAPH)]
    opts = harness_options(shared_home, "cuda", timing=True, baselines=("eager", "compile"))
    honest, stale = evaluate(resolve_problem("relu"), paths, opts)
    codes = [f.code for f in honest.flags]
    assert honest.verdict.value == "correct", (honest.message, codes)
    assert "graph_replayed_kernels" in codes, codes
    assert any(f.code == "cuda_graph_replay" for f in honest.flags)  # the static flag stays
    assert stale.verdict.value != "correct", stale.message
    assert stale.reason is not None and stale.reason.value in (
        "output_mismatch",
        "constant_output",
        "timed_output_mismatch",
        "profiled_output_mismatch",
    ), stale.message
