"""File-wide rules over the candidate's Python code: monkey-patching, global flags, streams,
threads, CUDA graphs, torch.compile, tensor subclasses, caching decorators, precision, reference use.

Rules look only at nodes tree-sitter gave us (assignments, calls, attributes, imports), so
comments and string contents never trigger them.
"""

from __future__ import annotations

from tree_sitter import Node

from kernelwright.harness.checks.static.common import FindingSink, Severity, line_of, text, walk
from kernelwright.harness.checks.static.pysource import PyModule, decorator_names

_TIMERS = {
    "torch.cuda.Event",
    "torch.cuda.synchronize",
    "torch.cuda.current_stream",
    "torch.cuda.default_stream",
    "torch.cuda.Stream",
    "torch.cuda.Event.elapsed_time",
    "torch.cuda.Stream.synchronize",
    "triton.testing.do_bench",
}
_TIMER_PREFIXES = ("time.", "torch.cuda.Event.", "torch.cuda.Stream.", "torch.cuda.event.")
_GLOBAL_CALLS = {
    "torch.set_float32_matmul_precision",
    "torch.set_default_dtype",
    "torch.set_default_tensor_type",
    "torch.set_default_device",
    "torch.use_deterministic_algorithms",
    "torch.set_deterministic_debug_mode",
    "torch.set_num_threads",
    "torch.set_num_interop_threads",
    "torch.set_flush_denormal",
}
_STREAMS = {
    "torch.cuda.Stream",
    "torch.cuda.stream",
    "torch.cuda.ExternalStream",
    "torch.Stream",
    "torch.cuda.set_stream",
}
_GRAPHS = ("torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.make_graphed_callables", "torch.cuda.graphs")
_COMPILERS = ("torch.compile", "torch._dynamo", "torch.jit.script", "torch.jit.trace", "torch._inductor")
# Running source text as code hides it from every static rule (a fallback inside an exec'd string).
_DYNAMIC_CODE = {"exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile", "__import__"}
_LAZY = ("torch.Tensor._make_subclass", "torch.utils._python_dispatch", "torch.overrides.TorchFunctionMode")
_TENSOR_BASES = {"torch.Tensor", "torch._C._TensorBase", "torch._C.TensorBase"}
_LOW_PRECISION = {
    "torch.float16",
    "torch.half",
    "torch.bfloat16",
    "torch.float8_e4m3fn",
    "torch.float8_e5m2",
    "torch.autocast",
    "torch.cuda.amp.autocast",
    "torch.amp.autocast",
    "triton.language.float16",
    "triton.language.bfloat16",
    "triton.language.float8e4nv",
    "triton.language.float8e5",
}
_CACHE_DECORATORS = {"functools.lru_cache", "functools.cache", "lru_cache", "cache"}
_CONCURRENCY = ("threading", "concurrent.futures", "multiprocessing", "asyncio", "_thread")
_KNOWN_LIBRARIES = ("torch", "triton", "numpy", "math", "os", "sys", "typing", "functools", "dataclasses")


class ModuleRules:
    def __init__(self, module: PyModule, *, fp32: bool, sink: FindingSink) -> None:
        self.m = module
        self.fp32 = fp32
        self.sink = sink

    def add(self, code: str, message: str, node: Node, severity: Severity) -> None:
        self.sink.add(code, message, line_of(node), severity)

    def run(self) -> None:
        for node in walk(self.m.root):
            kind = node.type
            if kind in ("assignment", "augmented_assignment"):
                self._assignment(node)
            elif kind == "call":
                self._call(node)
            elif kind == "attribute" and _outermost(node):
                self._reference(node)
            elif kind == "function_definition":
                self._function(node)
            elif kind == "class_definition":
                self._class(node)
        self._imports()

    # ---- assignments -------------------------------------------------------------------
    def _assignment(self, node: Node) -> None:
        left = node.child_by_field_name("left")
        targets = left.named_children if left is not None and left.type in ("pattern_list", "tuple_pattern") else [left]
        for target in targets:
            if target is None:
                continue
            if target.type == "subscript":
                value = target.child_by_field_name("value")
                if value is not None and value.type == "attribute" and text(value).endswith(".__dict__"):
                    target = value.child_by_field_name("object")
            if target is None or target.type != "attribute":
                continue
            qualified = self.m.qualify(target) or ""
            self._patched(qualified, node.child_by_field_name("right"), node)

    def _patched(self, qualified: str, value: Node | None, node: Node) -> None:
        if qualified in _TIMERS or qualified.startswith(_TIMER_PREFIXES) or qualified == "time":
            self.add("patched_timer", f"Replaces the timing function {qualified}.", node, "reject")
        elif qualified.startswith("torch.backends."):
            last = qualified.rsplit(".", 1)[-1]
            enables = value is None or text(value) not in ("False", '"ieee"', "'ieee'", '"highest"', "'highest'")
            if self.fp32 and last in ("allow_tf32", "fp32_precision") and enables:
                what = f"Enables TF32 ({qualified}) in a float32 problem, lowering matmul precision."
                self.add("precision_downgrade", what, node, "reject")
            else:
                self.add("global_state", f"Changes the global PyTorch setting {qualified}.", node, "reject")
        elif qualified == "torch" or qualified.startswith("torch."):
            self.add("patched_torch", f"Monkey-patches {qualified}.", node, "reject")

    # ---- calls -------------------------------------------------------------------------
    def _call(self, node: Node) -> None:
        function = node.child_by_field_name("function")
        name = self.m.qualify(function) or ""
        args = node.child_by_field_name("arguments")
        positional = [a for a in (args.named_children if args else []) if a.type != "keyword_argument"]
        if name == "setattr" and positional:
            target = self.m.qualify(positional[0]) or ""
            attribute = text(positional[1]).strip("'\"") if len(positional) > 1 else "?"
            if target == "time" or target.startswith(("torch", "time.")):
                value = positional[2] if len(positional) > 2 else None
                self._patched(f"{target}.{attribute}", value, node)
        elif name in _GLOBAL_CALLS:
            arg = text(positional[0]).strip("'\"") if positional else ""
            if self.fp32 and name == "torch.set_float32_matmul_precision" and arg != "highest":
                what = f"Calls {name}({arg!r}), allowing TF32/bf16 matmuls in a float32 problem."
                self.add("precision_downgrade", what, node, "reject")
            else:
                self.add("global_state", f"Changes global PyTorch state with {name}().", node, "reject")
        elif name in _STREAMS:
            self.add("side_stream", f"Uses a side CUDA stream ({name}).", node, "reject")
        elif name in _DYNAMIC_CODE:
            what = f"Runs code built at run time with {name}(): the harness cannot read what it does."
            self.add("dynamic_code", what, node, "reject")
        elif function is not None and function.type == "attribute":
            method = text(function.child_by_field_name("attribute"))
            if self.fp32 and method in ("half", "bfloat16") and not positional:
                what = f"Converts a tensor with .{method}() in a float32 problem."
                self.add("precision_downgrade", what, node, "reject")
        if name == "Model" or name.endswith(".Model"):
            self.add("calls_reference", "Instantiates the reference Model.", node, "reject")

    def _reference(self, node: Node) -> None:
        qualified = self.m.qualify(node) or ""
        if _under(qualified, _COMPILERS):
            what = f"Uses {qualified}: PyTorch would generate the kernel, not the candidate."
            self.add("torch_fallback", what, node, "reject")
        elif qualified.startswith(_GRAPHS):
            self.add("cuda_graph_replay", f"Uses CUDA graphs ({qualified}).", node, "flag")
        elif qualified.startswith(_LAZY):
            self.add("lazy_output", f"Uses {qualified} to build tensor subclasses or dispatch modes.", node, "reject")
        elif self.fp32 and qualified in _LOW_PRECISION and not _in_comparison(node):
            what = f"Uses {qualified} in a float32 problem."
            self.add("precision_downgrade", what, node, "reject")
        dotted = self.m.dotted(node) or ""
        if dotted.split(".")[0] == "Model" and dotted != "Model":
            self.add("calls_reference", f"Refers to the reference {dotted}.", node, "reject")

    # ---- definitions and imports -------------------------------------------------------
    def _function(self, node: Node) -> None:
        name = text(node.child_by_field_name("name"))
        if name in ("__torch_function__", "__torch_dispatch__"):
            self.add("lazy_output", f"Defines {name}, intercepting tensor operations.", node, "reject")
        for decorator in decorator_names(self.m, node):
            if decorator in _CACHE_DECORATORS:
                what = f"Caches the results of {name}() with @{decorator}, which can replay stale outputs."
                self.add("input_cache", what, node, "reject")

    def _class(self, node: Node) -> None:
        name = text(node.child_by_field_name("name"))
        bases = node.child_by_field_name("superclasses")
        for base in bases.named_children if bases is not None else []:
            qualified = self.m.qualify(base) or ""
            if qualified in _TENSOR_BASES:
                self.add("lazy_output", f"Defines a tensor subclass {name}({text(base)}).", node, "reject")

    def _imports(self) -> None:
        for full, node in self.m.imports:
            root = full.split(".")[0]
            if full.startswith(_CONCURRENCY):
                what = f"Imports {full}: work on other threads or processes escapes the timer."
                self.add("side_stream", what, node, "flag")
            if full.endswith(".Model") and root not in _KNOWN_LIBRARIES:
                self.add("calls_reference", f"Imports the reference Model ({full}).", node, "reject")
            elif full.endswith(".*") and root not in _KNOWN_LIBRARIES:
                self.add(
                    "calls_reference", f"Star-imports {full[:-2]}, which may bring in the reference.", node, "flag"
                )


def _under(qualified: str, prefixes: tuple[str, ...]) -> bool:
    """`qualified` is one of `prefixes` or inside one (`torch.compile.x`), not merely spelled alike
    (`torch.compiler.is_compiling` is not `torch.compile`)."""
    return any(qualified == p or qualified.startswith(p + ".") for p in prefixes)


def _outermost(node: Node) -> bool:
    parent = node.parent
    return not (parent is not None and parent.type == "attribute" and parent.child_by_field_name("object") == node)


def _in_comparison(node: Node) -> bool:
    parent = node.parent
    while parent is not None and parent.type in ("tuple", "list", "set", "parenthesized_expression"):
        parent = parent.parent
    return parent is not None and parent.type == "comparison_operator"
