"""GPU specifications as short text: what the agent's `gpu_specs` tool returns to a model.

`answer(question, gpu)` is one figure or feature (with unit and source) of a named GPU or of this
machine's; `summary(gpu)` is the handful of figures a kernel plan is made from. Unknown fields,
GPUs or a machine without a GPU come back as text saying so (a model reads it), never raised.
"""

from __future__ import annotations

from kernelwright.errors import KernelwrightError
from kernelwright.hardware_specs import SpecAnswer, query_specs, spec_value

SUMMARY_FIELDS = (
    "architecture",
    "compute_capability",
    "sms",
    "memory.size_gb",
    "memory.bandwidth_gbs",
    "cache.l2_mb",
    "limits.shared_mem_per_sm_kb",
    "limits.shared_mem_per_block_kb",
    "limits.registers_per_thread",
    "limits.max_threads_per_sm",
    "cuda_core_tflops.fp32",
    "tensor_core_tflops.bf16",
    "ridge.cuda_fp32",
)
SUMMARY_WORDS = ("", "summary", "all", "overview", "specs")


def _line(found: SpecAnswer, with_source: bool = True) -> str:
    if found.value is None:
        return f"{found.field}: unknown ({found.note or 'not in the table'})"
    unit = f" {found.unit}" if found.unit else ""
    text = f"{found.field}: {found.value}{unit}"
    if with_source and found.source is not None:
        text += f" (source: {found.source.title})"
    return text


def _why(exc: KernelwrightError) -> str:
    hint = f" ({exc.hint})" if getattr(exc, "hint", None) else ""
    return f"{exc.message}{hint}"


def summary(gpu: str | None = None) -> str:
    """The figures a plan is made from, one per line, for a named GPU or (None) this machine's."""
    lines: list[str] = []
    name = ""
    for path in SUMMARY_FIELDS:
        try:
            found = spec_value(gpu, path)
        except KernelwrightError as exc:
            return f"no specs: {_why(exc)}"
        name = found.gpu
        lines.append(_line(found, with_source=False))
    return "\n".join([f"gpu: {name}", *lines])


def answer(question: str, gpu: str | None = None) -> str:
    """One figure or feature ('l2', 'memory.bandwidth_gbs', 'wgmma', 'ridge.tensor_bf16'), or the
    summary for 'summary' / an empty question."""
    if question.strip().lower() in SUMMARY_WORDS:
        return summary(gpu)
    try:
        found = query_specs(question, gpu)
    except KernelwrightError as exc:
        return f"no answer: {_why(exc)}"
    note = f" [{found.note}]" if found.note else ""
    return f"{found.gpu}: {_line(found)}{note}"
