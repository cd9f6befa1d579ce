"""The operator signature of a problem: which torch operators its reference runs, in what order,
on which shapes and dtypes. Memory uses it to find *similar* problems (a gemm+bias+relu is close
to a gemm+bias+gelu; a relu is close to a leaky relu) whatever their names.

The reference is traced on meta tensors under a TorchDispatchMode: every aten operator is seen
with its arguments' shapes, and nothing is allocated or computed, so a problem with gigabytes of
inputs costs milliseconds. Where tracing fails (a model that insists on a real device, an
operator without a meta kernel), the signature falls back to a static read of the source: the
torch calls, `nn` modules and operators it names, in order.
"""

from __future__ import annotations

import ast
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from kernelwright.problems import Problem

log = logging.getLogger(__name__)
SIGNATURE_VERSION = 1
_MAX_OPS = 20_000  # a reference looping over a long sequence: its first ops say what it is
_MAX_SECONDS = 5.0
_PATTERN_LEN = 8


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Operators that move or describe data without computing: left out of the signature.
_SHAPE_ONLY = frozenset(
    _words(
        "view reshape t transpose permute expand expand_as view_as unsqueeze squeeze select slice split "
        "split_with_sizes chunk unbind clone contiguous detach alias empty empty_like empty_strided new_zeros "
        "new_empty new_ones new_full zeros zeros_like ones ones_like full full_like to_copy copy lift_fresh "
        "as_strided fill arange scalar_tensor local_scalar_dense item resize set unsafe_view flatten unflatten "
        "to type_as size dim numel stride"
    )
)
_ALIASES = {
    **dict.fromkeys(("addmm", "mm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "einsum", "dot", "mv"), "matmul"),
    **dict.fromkeys(("convolution", "conv1d", "conv2d", "conv3d", "cudnn_convolution", "conv_transpose2d"), "conv"),
    **dict.fromkeys(
        (
            "scaled_dot_product_attention",
            "scaled_dot_product_flash_attention",
            "scaled_dot_product_efficient_attention",
        ),
        "attention",
    ),
    "safe_softmax": "softmax",
    "max_pool2d_with_indices": "max_pool2d",
    "linalg_vector_norm": "norm",
}
_CLASSES: dict[str, tuple[str, ...]] = {
    "matmul": ("matmul",),
    "conv": ("conv",),
    "attention": ("attention",),
    "softmax": ("softmax", "log_softmax"),
    "normalization": ("layer_norm", "batch_norm", "group_norm", "rms_norm", "instance_norm"),
    "reduction": _words(
        "sum mean amax amin max min argmax argmin prod var std var_mean std_mean norm logsumexp all any"
    ),
    "scan": ("cumsum", "cumprod", "logcumsumexp"),
    "pooling": (
        "max_pool1d",
        "max_pool2d",
        "max_pool3d",
        "avg_pool1d",
        "avg_pool2d",
        "avg_pool3d",
        "adaptive_avg_pool2d",
    ),
    "loss": ("mse_loss", "nll_loss", "cross_entropy", "kl_div", "huber_loss", "smooth_l1_loss", "binary_cross_entropy"),
    "indexing": ("gather", "scatter", "scatter_add", "index_select", "embedding", "index", "index_put"),
    "data_movement": ("cat", "stack", "constant_pad_nd", "pad", "roll", "flip", "repeat"),
}
_HEAVY = frozenset({"matmul", "conv", "attention"})
_CLASS_OF = {op: cls for cls, ops in _CLASSES.items() for op in ops}
# Static fallback: `nn` modules named in __init__ and the operator they run.
_MODULES = {
    "Linear": "matmul",
    "Bilinear": "matmul",
    "Conv1d": "conv",
    "Conv2d": "conv",
    "Conv3d": "conv",
    "ConvTranspose2d": "conv",
    "LayerNorm": "layer_norm",
    "RMSNorm": "rms_norm",
    "GroupNorm": "group_norm",
    "BatchNorm1d": "batch_norm",
    "BatchNorm2d": "batch_norm",
    "InstanceNorm2d": "instance_norm",
    "MaxPool2d": "max_pool2d",
    "AvgPool2d": "avg_pool2d",
    "AdaptiveAvgPool2d": "adaptive_avg_pool2d",
    "Embedding": "embedding",
    "MultiheadAttention": "attention",
    "Softmax": "softmax",
    "ReLU": "relu",
    "GELU": "gelu",
    "SiLU": "silu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Hardswish": "hardswish",
    "Dropout": "dropout",
}
_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.MatMult: "matmul", ast.Pow: "pow"}


def normalize_op(name: str) -> str | None:
    """`_softmax` -> softmax, `relu_` -> relu, `addmm` -> matmul; None for shape-only operators."""
    base = name.split(".")[0].strip("_")
    base = base.removeprefix("native_")
    base = _ALIASES.get(base, base)
    return None if base in _SHAPE_ONLY or not base else base


def op_class(op: str) -> str:
    return _CLASS_OF.get(op, "elementwise")


class OpSignature(BaseModel):
    """Which operators a problem's reference runs (normalised: `addmm` is matmul), their classes,
    the fusion pattern (classes in order, repeats collapsed) and the inputs' shapes and dtypes."""

    version: int = SIGNATURE_VERSION
    method: Literal["traced", "static", "none"] = "none"
    ops: dict[str, int] = Field(default_factory=dict)
    classes: list[str] = Field(default_factory=list)
    pattern: list[str] = Field(default_factory=list)
    inputs: list[str] = Field(default_factory=list, description="`float32[16384, 12288]` per tensor input.")
    dtypes: list[str] = Field(default_factory=list)
    note: str = ""

    def terms(self) -> set[str]:
        """Operators and classes: what lessons and searches match on."""
        return set(self.ops) | set(self.classes)

    def pattern_text(self) -> str:
        return " -> ".join(self.pattern) or "(unknown)"

    def describe(self) -> str:
        ops = ", ".join(sorted(self.ops)) or "unknown ops"
        where = f" on {', '.join(self.inputs)}" if self.inputs else ""
        return f"{ops} ({self.pattern_text()}){where}"

    def similarity(self, other: OpSignature) -> float:
        """0..1: 1 for the same operators and pattern. Operators weigh more than classes; the same
        fusion pattern counts as similar on its own (relu and leaky_relu are both one elementwise op);
        a matmul, convolution or attention on one side only makes problems much less alike."""
        if not self.ops or not other.ops:
            return 0.0
        score = 0.7 * _jaccard(set(self.ops), set(other.ops)) + 0.3 * _jaccard(set(self.classes), set(other.classes))
        if self.pattern and self.pattern == other.pattern:
            score = max(score, 0.75)
        if (set(self.classes) ^ set(other.classes)) & _HEAVY:
            score *= 0.6  # a matmul's problem is not much like one without (its time is the matmul)
        return round(score, 3)

    def why_similar(self, other: OpSignature) -> str:
        shared = sorted(set(self.ops) & set(other.ops))
        parts = []
        if shared:
            parts.append("same ops: " + ", ".join(shared))
        if self.pattern and self.pattern == other.pattern:
            parts.append(f"same fusion pattern: {self.pattern_text()}")
        elif set(self.classes) & set(other.classes):
            parts.append("shared op classes: " + ", ".join(sorted(set(self.classes) & set(other.classes))))
        if other.dtypes and self.dtypes and other.dtypes != self.dtypes:
            parts.append(f"other dtypes ({', '.join(other.dtypes)})")
        return "; ".join(parts) or "similar operators"


@dataclass(frozen=True)
class ProblemKey:
    """A problem as memory knows it: the hash of its reference source (its identity), its
    qualified name, its signature."""

    sha256: str
    name: str
    signature: OpSignature


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def _from_ops(
    names: list[str], method: Literal["traced", "static"], inputs: list[str], dtypes: list[str]
) -> OpSignature:
    ops = [op for name in names if (op := normalize_op(name)) is not None]
    pattern: list[str] = []
    for op in ops:
        cls = op_class(op)
        if cls == "data_movement" or (pattern and pattern[-1] == cls):
            continue
        pattern.append(cls)
    classes = sorted({op_class(op) for op in ops} - {"data_movement"})
    return OpSignature(
        method=method,
        ops=dict(Counter(ops)),
        classes=classes,
        pattern=pattern[:_PATTERN_LEN],
        inputs=inputs,
        dtypes=dtypes,
    )


def _describe_input(value: Any) -> str | None:
    import torch

    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}[{', '.join(map(str, value.shape))}]"
    return None


def traced_signature(problem: Problem) -> OpSignature:
    """Run the reference on meta tensors and record every aten operator; raises what tracing raises."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from kernelwright.problems.instance import materialize
    from kernelwright.vocabulary import Size

    names: list[str] = []
    started = time.monotonic()

    class _Enough(Exception):
        pass

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            names.append(func.overloadpacket.__name__)
            if len(names) >= _MAX_OPS or time.monotonic() - started > _MAX_SECONDS:
                raise _Enough
            return func(*args, **(kwargs or {}))

    inst = materialize(problem, Size.DEFAULT, shapes_only=True)
    with torch.device("meta"):
        model = inst.make_model()
    note = ""
    try:
        with Recorder(), torch.no_grad():
            model(*inst.inputs)
    except _Enough:
        note = f"traced the first {len(names)} operators"
    inputs = [text for value in inst.inputs if (text := _describe_input(value))]
    dtypes = sorted({text.split("[")[0] for text in inputs})
    signature = _from_ops(names, "traced", inputs, dtypes)
    return signature.model_copy(update={"note": note})


def static_signature(source: str) -> OpSignature:
    """The torch calls, nn modules and arithmetic operators the source names, in evaluation order
    (roughly: by where each expression ends)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return OpSignature(method="none", note="the reference does not parse")
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        name: str | None = None
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                name = _MODULES.get(func.attr, func.attr) if func.attr[:1].isupper() else func.attr
            elif isinstance(func, ast.Name) and func.id in _MODULES:
                name = _MODULES[func.id]
        elif isinstance(node, ast.BinOp):
            name = _BINOPS.get(type(node.op))
        if name is not None and (name in _CLASS_OF or name in _ALIASES or name in _KNOWN_ELEMENTWISE):
            # By where each expression ends: an inner call ends before the call that consumes it.
            found.append((getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0, name))
    names = [name for _, _, name in sorted(found)]
    signature = _from_ops(names, "static", [], [])
    return signature.model_copy(update={"note": "read statically from the source (tracing failed)"})


_KNOWN_ELEMENTWISE = frozenset(
    _words(
        "relu leaky_relu gelu silu sigmoid tanh hardswish hardtanh softplus elu selu mish exp log sqrt rsqrt abs "
        "neg add sub mul div pow clamp clamp_min clamp_max where maximum minimum sin cos erf dropout masked_fill "
        "reciprocal sign floor ceil round"
    )
)


def signature_of(problem: Problem) -> OpSignature:
    """The problem's signature: traced when the reference runs on meta tensors, else static."""
    try:
        return traced_signature(problem)
    except Exception as exc:  # the problem's own code, on a device it never expected: read it instead
        log.debug("tracing %s on meta tensors failed: %s", problem.qualified, exc)
        signature = static_signature(problem.source)
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}" if str(exc) else type(exc).__name__
        return signature.model_copy(update={"note": f"{signature.note}; tracing failed: {reason}"})
