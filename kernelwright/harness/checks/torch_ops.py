"""Which PyTorch ops are real work, in one place for every check that asks.

A candidate may allocate, view, copy and query tensors with PyTorch around its own kernels; the
fallback checks look for PyTorch doing the computation itself. The same op names serve three
vocabularies: aten ops in a CPU profile (`dynamic.py`, as `aten::NAME`), `torch.NAME(...)` calls
reached from `forward` (`static/forward.py`) and `torch::NAME` / `at::NAME` calls in the C++
host code (`static/cpp.py`). Tensor *methods* are judged the other way round, by a list of the
ones that compute (`TENSOR_COMPUTE_METHODS`): a method name alone says little about its object.
"""

from __future__ import annotations

# Ops that do no arithmetic on tensor values: they allocate or fill with a constant, view or
# reorder, copy or move, or read a scalar or a property.
NOT_WORK_OPS = frozenset(
    {
        # allocate, or fill with a constant
        "empty", "empty_like", "empty_strided", "empty_affine_quantized", "zeros", "zeros_like",
        "ones", "ones_like", "full", "full_like", "fill_", "zero_", "resize_", "set_",
        # view, reshape or reorder
        "view", "view_as", "_unsafe_view", "reshape", "reshape_as", "_reshape_alias", "as_strided",
        "alias", "contiguous", "permute", "transpose", "t", "movedim", "expand", "expand_as",
        "unsqueeze", "unsqueeze_", "squeeze", "squeeze_", "flatten", "unfold", "select", "slice",
        "narrow", "unbind", "split", "chunk",
        # copy or move
        "clone", "copy_", "to", "_to_copy", "detach", "lift_fresh", "record_stream",
        # read a scalar, or describe a tensor
        "item", "_local_scalar_dense", "is_nonzero", "size", "stride", "numel", "dim", "result_type",
    }
)  # fmt: skip

# Make a tensor from host data, a range or random numbers. A forward that builds an index or a
# constant this way is not falling back to PyTorch for its result, so the static rules pass
# them; in a profile their time counts like any other op's.
TENSOR_MAKERS = frozenset({"tensor", "as_tensor", "from_numpy", "from_blob", "arange", "rand", "randn"})

# Names under `torch.` / `torch::` that compute nothing: types, grad modes, dtype facts, seeding.
NON_OPS = frozenset(
    {
        "device", "dtype", "Size", "is_tensor", "no_grad", "inference_mode", "enable_grad",
        "is_grad_enabled", "set_grad_enabled", "get_default_dtype", "finfo", "iinfo",
        "promote_types", "is_floating_point", "is_complex", "broadcast_shapes", "manual_seed",
    }
)  # fmt: skip

PROFILED_NOT_WORK = frozenset(f"aten::{op}" for op in NOT_WORK_OPS)
"""aten op names in a profile that do not count as library work."""

NOT_WORK_KERNEL_MARKERS = ("FillFunctor", "direct_copy_kernel")
"""Parts of the names of ATen's GPU kernels for the not-work ops above (zeros/full/fill_, and
copy_/clone/contiguous/to): in a CUDA profile they count as neither library work nor the
candidate's (only kernels in PyTorch's namespaces are matched, so a candidate cannot name its
own work like them)."""

NOT_WORK_TRANSFERS = frozenset({"Memcpy DtoD (Device -> Device)", "Memset (Device)"})
"""The profiler's names of the device-side copies and fills that copy_/clone/zero_ do without a
kernel (a contiguous same-dtype copy is one cudaMemcpyAsync): no arithmetic, like the kernels
above. Matched whole: a kernel's name is a C++ signature and cannot read like these. Copies to or
from the host stay library work (a result computed on the host arrives by one)."""

CALLED_NOT_WORK = NOT_WORK_OPS | TENSOR_MAKERS | NON_OPS
"""Names of `torch.NAME(...)` (Python) and `torch::NAME` / `at::NAME` (C++) calls that are no fallback."""

TENSOR_COMPUTE_METHODS = frozenset(
    {
        "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "softmax", "log_softmax", "sum", "mean",
        "exp", "log", "relu", "relu_", "sigmoid", "tanh", "gelu", "max", "min", "amax", "amin", "norm",
        "var", "std", "add", "add_", "mul", "mul_", "sub", "sub_", "div", "div_", "pow", "sqrt",
        "rsqrt", "abs", "clamp", "clamp_", "cumsum", "cumprod", "prod", "argmax", "argmin", "topk",
        "sort", "masked_fill", "where", "conv2d", "linear", "layer_norm", "dot", "matrix_power",
        "logsumexp", "square", "neg", "reciprocal", "erf", "sin", "cos", "softplus", "silu",
        "hardtanh", "leaky_relu", "elu", "selu", "mish", "floor", "ceil", "round", "any", "all",
    }
)  # fmt: skip
"""Tensor methods (`x.NAME(...)`, in Python or C++) that compute: a call of one is a PyTorch op."""
