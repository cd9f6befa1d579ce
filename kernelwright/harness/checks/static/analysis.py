"""Static analysis of a candidate kernel file with tree-sitter.

Reads a KernelBench-style candidate (`class ModelNew(nn.Module)` with kernels from
`load_inline` or Triton) without running it, and reports what it defines, launches and calls,
plus findings named by `verdicts.Reason` values. `reject` findings end the candidate; `flag`
findings are evidence the dynamic checks (profiler, re-verification) decide on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kernelwright.harness.checks.static.common import (
    Backend,
    Extension,
    Finding,
    FindingSink,
    Severity,
    line_of,
    text,
    walk,
)
from kernelwright.harness.checks.static.cpp import CppFacts, analyze_sources
from kernelwright.harness.checks.static.custom_ops import find_custom_ops
from kernelwright.harness.checks.static.forward import ForwardAnalysis, ForwardFacts
from kernelwright.harness.checks.static.pyrules import ModuleRules
from kernelwright.harness.checks.static.pysource import ExtensionCall, PyModule

__all__ = ["Backend", "CandidateAnalysis", "Extension", "Finding", "analyze_candidate", "detect_backend"]

logger = logging.getLogger(__name__)

_FP32 = {"float32", "fp32", "torch.float32", "float"}


@dataclass(frozen=True)
class CandidateAnalysis:
    backend: Backend
    has_modelnew: bool
    syntax_error: str | None
    extensions: tuple[Extension, ...]
    cuda_kernels: tuple[str, ...]
    launched_kernels: tuple[str, ...]
    triton_kernels: tuple[str, ...]
    torch_ops_in_forward: tuple[str, ...]
    findings: tuple[Finding, ...]
    half_kernels: tuple[str, ...] = ()
    """`__global__` kernels whose parameters are half/bf16 types: rejected if one runs (float32 problem)."""
    fp32: bool = True
    own_ops: tuple[str, ...] = ()
    """`ns::name` of operators the candidate registers itself (torch.library / TORCH_LIBRARY) with an
    implementation: `torch.ops.ns.name` in forward is its own code, not PyTorch's."""

    @property
    def own_kernels(self) -> tuple[str, ...]:
        """The kernels the candidate defines itself (CUDA __global__ and @triton.jit functions)."""
        return self.cuda_kernels + self.triton_kernels

    @property
    def rejections(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "reject")


def detect_backend(source: str) -> Backend:
    """cuda, triton, cpp or python, from the extensions and `@triton.jit` functions in `source`."""
    return _backend(PyModule(source))


def _backend(module: PyModule) -> Backend:
    def has_cuda(ext: ExtensionCall) -> bool:
        return (
            bool(ext.cuda.text.strip()) or ext.with_cuda or any(f.endswith((".cu", ".cuh")) for f in ext.file_sources)
        )

    if any(has_cuda(ext) for ext in module.extensions):
        return "cuda"
    if module.triton_kernels:
        return "triton"
    if module.extensions:
        return "cpp"
    return "python"


def _syntax_error(source: str) -> str | None:
    # tree-sitter recovers from errors silently; CPython's compiler gives the precise message.
    try:
        compile(source, "<candidate>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # e.g. null bytes
        return f"line 1: {exc}"
    return None


def analyze_candidate(source: str, *, problem_dtype: str = "float32") -> CandidateAnalysis:
    """Analyze one candidate file; never raises on malformed input (see `syntax_error`)."""
    module = PyModule(source)
    extensions = tuple(ext.frozen() for ext in module.extensions)
    error = _syntax_error(source)
    if error is not None:
        return CandidateAnalysis(
            backend=_backend(module),
            has_modelnew=False,
            syntax_error=error,
            extensions=extensions,
            cuda_kernels=(),
            launched_kernels=(),
            triton_kernels=tuple(module.triton_kernels),
            torch_ops_in_forward=(),
            findings=(),
        )
    fp32 = problem_dtype.lower() in _FP32
    sink = FindingSink()
    sources = []
    loader_streams: list[dict[str, int]] = []  # per source, as `sources`
    for ext in module.extensions:
        label = f"extension '{ext.name}'" if ext.name else "extension"
        sources.append((ext.cpp, f"cpp_sources of {label}"))
        sources.append((ext.cuda, f"cuda_sources of {label}"))
        loader_streams += [{}, ext.loader_streams]
    cpp = analyze_sources(sources, fp32=fp32, sink=sink, loader_streams=loader_streams)
    ModuleRules(module, fp32=fp32, sink=sink).run()
    ext_functions = {f for ext in module.extensions for f in ext.functions} | cpp.bound_functions
    custom_ops = find_custom_ops(module, sources, set(cpp.kernels), ext_functions, sink)
    forward_analysis = ForwardAnalysis(module, ext_functions, sink, custom_ops)
    forward = forward_analysis.run()
    forward_analysis.pointer_keys()
    _reference_checks(forward_analysis, sink)
    _torch_op_flags(forward, sink)
    _triton_checks(module, fp32, sink)
    triton_launched = _kernel_checks(module, cpp, forward, ext_functions, sink)
    launched = sorted(cpp.launched | (cpp.api_launched & set(cpp.kernels))) + triton_launched
    ops = tuple(dict.fromkeys(op for op, _ in forward.torch_ops))
    findings = sink.items()
    logger.debug(
        "static analysis: %d findings, %d rejections", len(findings), sum(f.severity == "reject" for f in findings)
    )
    return CandidateAnalysis(
        backend=_backend(module),
        has_modelnew=forward.has_modelnew,
        syntax_error=None,
        extensions=extensions,
        cuda_kernels=tuple(cpp.kernels),
        launched_kernels=tuple(launched),
        triton_kernels=tuple(module.triton_kernels),
        torch_ops_in_forward=ops,
        findings=findings,
        half_kernels=tuple(sorted(cpp.half_kernels)) if fp32 else (),
        fp32=fp32,
        own_ops=custom_ops.own,
    )


def _reference_checks(analysis: ForwardAnalysis, sink: FindingSink) -> None:
    model_new = analysis.model_new
    if model_new is None:
        return
    for base in analysis.class_chain(model_new):
        if base == "Model" or base.endswith(".Model"):
            sink.add("calls_reference", f"ModelNew inherits from the reference {base}.", line_of(model_new), "reject")


def _torch_op_flags(forward: ForwardFacts, sink: FindingSink) -> None:
    first_line: dict[str, int] = {}
    for op, line in forward.torch_ops:
        first_line.setdefault(op, line)
    for op, line in first_line.items():
        what = f"ModelNew.forward reaches the PyTorch op {op}; the profiler decides whether it does the main work."
        sink.add("torch_fallback", what, line, "flag")


def _triton_checks(module: PyModule, fp32: bool, sink: FindingSink) -> None:
    if not fp32:
        return
    for name, kernel in module.triton_kernels.items():
        for node in walk(kernel):
            if node.type != "call" or module.call_name(node) != "triton.language.dot":
                continue
            args = node.child_by_field_name("arguments")
            keywords = {
                text(a.child_by_field_name("name")): text(a.child_by_field_name("value")).strip("'\"")
                for a in (args.named_children if args else [])
                if a.type == "keyword_argument"
            }
            precision = keywords.get("input_precision")
            allow = keywords.get("allow_tf32")
            if precision == "ieee" or (precision is None and allow == "False"):
                continue
            if precision == "tf32" or allow == "True":
                what = f"tl.dot in {name} is asked for TF32 in a float32 problem."
                sink.add("precision_downgrade", what, line_of(node), "reject")
            else:
                what = (
                    f"tl.dot in {name} uses TF32 by default for float32 inputs; pass input_precision='ieee' "
                    "or allow_tf32=False in a float32 problem."
                )
                sink.add("precision_downgrade", what, line_of(node), "flag")


def _kernel_checks(
    module: PyModule, cpp: CppFacts, forward: ForwardFacts, ext_functions: set[str], sink: FindingSink
) -> list[str]:
    """no_custom_kernel and kernel_not_launched; returns the Triton kernels that are launched."""
    if not module.extensions and not module.triton_kernels:
        sink.add(
            "no_custom_kernel", "No load_inline/load extension and no Triton kernel: nothing custom runs.", 1, "reject"
        )
        return []
    resolved = all(ext.cpp.ok and ext.cuda.ok for ext in module.extensions)
    used_cuda = {k for k in cpp.kernels if k in cpp.launched | cpp.api_launched | cpp.referenced}
    for kernel, line in cpp.kernels.items():
        if kernel not in used_cuda:
            severity: Severity = "reject" if not used_cuda and resolved else "flag"
            sink.add("kernel_not_launched", f"The __global__ kernel {kernel} is never launched.", line, severity)
    triton_used = _triton_references(module)
    for kernel, node in module.triton_kernels.items():
        if kernel not in triton_used:
            severity = "reject" if not triton_used else "flag"
            sink.add("kernel_not_launched", f"The Triton kernel {kernel} is never launched.", line_of(node), severity)
    used_functions = _extension_calls(module, ext_functions)
    if ext_functions and not used_functions and not any(ext.file_sources for ext in module.extensions):
        names = ", ".join(sorted(ext_functions))
        sink.add("kernel_not_launched", f"No extension function ({names}) is ever called.", None, "reject")
    elif used_functions:
        for name in sorted(ext_functions - used_functions):
            sink.add("kernel_not_launched", f"The extension function {name} is never called.", None, "flag")
    if forward.has_forward and not forward.reaches_kernel:
        sink.add("kernel_not_launched", "ModelNew.forward never reaches a custom kernel.", None, "reject")
    return [k for k in module.triton_kernels if k in triton_used]


def _triton_references(module: PyModule) -> set[str]:
    used: set[str] = set()
    names = set(module.triton_kernels)
    for node in walk(module.root):
        if node.type != "identifier" or text(node) not in names:
            continue
        parent = node.parent
        if parent is not None and parent.type == "function_definition" and parent.child_by_field_name("name") == node:
            continue
        used.add(text(node))
    return used


def _extension_calls(module: PyModule, ext_functions: set[str]) -> set[str]:
    used: set[str] = set()
    holders = {h for ext in module.extensions for h in ext.holders}
    for node in walk(module.root):
        if node.type == "attribute":
            attribute = text(node.child_by_field_name("attribute"))
            owner = module.qualify(node.child_by_field_name("object")) or ""
            if attribute in ext_functions and not owner.startswith(("torch", "triton")):
                used.add(attribute)
        elif node.type == "call" and module.call_name(node) == "getattr":
            args = node.child_by_field_name("arguments")
            first = args.named_children[0] if args and args.named_children else None
            if first is not None and (module.dotted(first) or "").split(".")[-1] in holders:
                used |= ext_functions
    return used
