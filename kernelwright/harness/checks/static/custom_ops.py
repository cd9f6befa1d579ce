"""Operators the candidate registers itself, so that `torch.ops.NS.NAME(...)` in forward is read as
a call of the candidate's own implementation, not of PyTorch.

Registrations read (Python): `@torch.library.custom_op("ns::name")` (and its `register_kernel`
overrides), `torch.library.define` + `torch.library.impl` / `register_kernel`, and a
`torch.library.Library("ns", ...)` object's `define` / `impl`. In the C++/CUDA sources:
`TORCH_LIBRARY(ns, m) { m.def("name(...)", impl); }`, `TORCH_LIBRARY_FRAGMENT` and
`TORCH_LIBRARY_IMPL(ns, KEY, m) { m.impl("name", impl); }`.

An operator is the candidate's own when its namespace is not one of PyTorch's and an implementation
reaches the candidate's own code: a Python implementation is followed by the forward analysis like
any function forward calls (so one that only calls torch ops stays a fallback, by the same rule as
forward itself); an extension function (`ext.fn`) is own; a C++ implementation is own when it is
defined in the candidate's sources and (transitively through functions defined there) launches one
of the candidate's `__global__` kernels, or, in a source without kernels (a CPU extension), runs a
loop of its own. Fake/meta implementations (`register_fake`, key `Meta`) never run on real inputs
and are ignored. Registering anything in a PyTorch namespace (aten, prims, ...) changes PyTorch's
own operators, for the baselines too: `patched_torch`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tree_sitter import Node

from kernelwright.harness.checks.static.common import FindingSink, cuda_parser, line_of, text, walk
from kernelwright.harness.checks.static.pysource import PyModule, Resolved

# Operator namespaces PyTorch (or a library of its ecosystem) owns: an op there is never the
# candidate's, and registering one there patches PyTorch.
TORCH_OP_NAMESPACES = frozenset(
    {
        "aten", "prim", "prims", "_prims", "quantized", "_quantized", "quantized_decomposed", "quantization",
        "torchvision", "torchaudio", "torchtext", "c10d", "c10d_functional", "_c10d_functional",
        "_c10d_functional_autograd", "_dtensor", "_native", "_test", "_inductor_test", "debug_mode_ops",
        "debugprims", "rngprims", "export", "inductor", "inductor_prims", "mkl", "mkldnn",
        "mkldnn_prepacked", "onednn", "onnx", "onnx_symbolic", "profiler", "sparse", "static_runtime",
        "symm_mem", "streams", "fsdp", "flex_lib", "higher_order", "fbgemm", "xnnpack", "cuda", "torch",
        "at", "c10", "caffe2", "_caffe2",
    }
)  # fmt: skip

_CUSTOM_OP = {"torch.library.custom_op", "torch._library.custom_ops.custom_op"}
_DEFINE = {"torch.library.define"}
_IMPL = {"torch.library.impl", "torch.library.register_kernel"}
_LIBRARY = {"torch.library.Library"}
_FAKE_KEYS = {"meta", "fake"}
_LOOPS = {"for_statement", "for_range_loop", "while_statement", "do_statement"}
_LAUNCH_APIS = {"cudaLaunchKernel", "cudaLaunchKernelEx", "cudaLaunchCooperativeKernel", "cuLaunchKernel"}


def in_torch_op_namespace(namespace: str) -> bool:
    return namespace in TORCH_OP_NAMESPACES


@dataclass
class CustomOps:
    """The candidate's own operator registrations, keyed by (namespace, name)."""

    registered: set[tuple[str, str]] = field(default_factory=set)
    python_impls: dict[tuple[str, str], list[Node]] = field(default_factory=dict)  # function defs / lambdas
    native_impls: set[tuple[str, str]] = field(default_factory=set)  # own extension or C++ implementations
    companions: dict[int, list[Node]] = field(default_factory=dict)  # impl node id -> the op's other impls

    def op_of(self, qualified: str) -> tuple[str, str] | None:
        """(ns, name) for `torch.ops.ns.name[.overload]` when the candidate registered ns::name."""
        parts = qualified.split(".")
        if len(parts) < 4 or parts[:2] != ["torch", "ops"]:
            return None
        key = (parts[2], parts[3])
        return key if key in self.registered and not in_torch_op_namespace(key[0]) else None

    def implemented(self, key: tuple[str, str]) -> bool:
        """Whether the candidate registered an implementation of its own (Python or native) for `key`."""
        return key in self.python_impls or key in self.native_impls

    @property
    def own(self) -> tuple[str, ...]:
        """`ns::name` of every op registered with an implementation (Python or native)."""
        keys = set(self.python_impls) | self.native_impls
        return tuple(sorted(f"{ns}::{name}" for ns, name in keys if (ns, name) in self.registered))


def _split(qualname: str) -> tuple[str, str] | None:
    ns, sep, name = qualname.partition("::")
    if not sep or not ns or not name:
        return None
    return ns, name.split(".")[0]


def _schema_name(schema: str) -> str:
    return schema.split("(")[0].strip().split(".")[0]


class _PythonRegistrations:
    def __init__(self, module: PyModule, ext_functions: set[str], ops: CustomOps, sink: FindingSink) -> None:
        self.m = module
        self.ext_functions = ext_functions
        self.ops = ops
        self.sink = sink
        self.libraries: dict[str, str] = {}  # variable -> namespace of a torch.library.Library
        self.op_objects: dict[str, tuple[str, str]] = {}  # Python name of a custom op -> (ns, name)

    def run(self) -> None:
        for node in walk(self.m.root):  # libraries and custom ops first: later calls refer to them
            if node.type == "assignment":
                self._library_assignment(node)
            elif node.type == "decorated_definition":
                self._decorated(node, first_pass=True)
        for node in walk(self.m.root):
            if node.type == "decorated_definition":
                self._decorated(node, first_pass=False)
            elif node.type == "call" and not (node.parent is not None and node.parent.type == "decorator"):
                self._call(node)

    # ---- helpers -----------------------------------------------------------------------
    def _string(self, node: Node | None) -> str | None:
        resolved: Resolved = self.m.resolve_string(node)
        return resolved.text if resolved.ok and node is not None else None

    def _register(self, key: tuple[str, str] | None, node: Node) -> bool:
        if key is None:
            return False
        if in_torch_op_namespace(key[0]):
            what = (
                f"Registers {key[0]}::{key[1]} in PyTorch's operator namespace '{key[0]}': that replaces or extends "
                "PyTorch's own operators, for the baselines too."
            )
            self.sink.add("patched_torch", what, line_of(node), "reject")
            return False
        self.ops.registered.add(key)
        return True

    def _implement(self, key: tuple[str, str] | None, impl: Node | None, dispatch: str | None, node: Node) -> None:
        if key is None or impl is None or (dispatch or "").lower() in _FAKE_KEYS:
            return
        if in_torch_op_namespace(key[0]):
            self._register(key, node)
            return
        target = impl
        if target.type == "identifier" and text(target) in self.m.functions:
            target = self.m.functions[text(target)]
        if target.type in ("function_definition", "lambda"):
            impls = self.ops.python_impls.setdefault(key, [])
            if all(t.id != target.id for t in impls):
                impls.append(target)
        elif target.type == "attribute":
            attribute = text(target.child_by_field_name("attribute"))
            owner = self.m.qualify(target.child_by_field_name("object")) or ""
            qualified = self.m.qualify(target) or ""
            if attribute in self.ext_functions and not owner.startswith(("torch", "triton")):
                self.ops.native_impls.add(key)
            elif qualified.startswith("torch."):
                what = (
                    f"The implementation registered for {key[0]}::{key[1]} is PyTorch's {qualified}; the profiler "
                    "decides whether it does the main work."
                )
                self.sink.add("torch_fallback", what, line_of(node), "flag")

    def _args(self, call: Node) -> tuple[list[Node], dict[str, Node]]:
        args = call.child_by_field_name("arguments")
        positional: list[Node] = []
        keywords: dict[str, Node] = {}
        for arg in args.named_children if args else []:
            if arg.type == "keyword_argument":
                value = arg.child_by_field_name("value")
                if value is not None:
                    keywords[text(arg.child_by_field_name("name"))] = value
            elif arg.type not in ("comment", "list_splat", "dictionary_splat"):
                positional.append(arg)
        return positional, keywords

    def _arg(self, positional: list[Node], keywords: dict[str, Node], index: int, name: str) -> Node | None:
        if name in keywords:
            return keywords[name]
        return positional[index] if index < len(positional) else None

    def _library_key(self, lib: Node | None, name: Node | None) -> tuple[str, str] | None:
        """(ns, name) for `lib, "name"` (a Library object) or a qualified `"ns::name"`."""
        op = self._string(name)
        if op is None:
            return None
        if "::" in op:
            return _split(op)
        ns = self.libraries.get(text(lib)) if lib is not None else None
        return (ns, _schema_name(op)) if ns else None

    # ---- forms -------------------------------------------------------------------------
    def _library_assignment(self, node: Node) -> None:
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None or right.type != "call":
            return
        name = self.m.call_name(right) or ""
        positional, keywords = self._args(right)
        if name in _LIBRARY:
            ns = self._string(self._arg(positional, keywords, 0, "ns"))
            if ns:
                self.libraries[text(left)] = ns
                if in_torch_op_namespace(ns):
                    what = (
                        f"Opens torch.library.Library('{ns}', ...): registering in PyTorch's operator namespace "
                        "changes PyTorch's own operators, for the baselines too."
                    )
                    self.sink.add("patched_torch", what, line_of(node), "reject")
        elif name in _CUSTOM_OP:  # op = custom_op("ns::name", fn, mutates_args=...)
            key = _split(self._string(self._arg(positional, keywords, 0, "name")) or "")
            if self._register(key, node) and key is not None:
                self.op_objects[text(left)] = key
                self._implement(key, self._arg(positional, keywords, 1, "fn"), None, node)

    def _decorated(self, node: Node, *, first_pass: bool) -> None:
        definition = node.child_by_field_name("definition")
        if definition is None or definition.type != "function_definition":
            return
        for decorator in (c for c in node.children if c.type == "decorator"):
            expr = decorator.named_children[0] if decorator.named_children else None
            call = expr if expr is not None and expr.type == "call" else None
            target = call.child_by_field_name("function") if call is not None else expr
            name = self.m.qualify(target) or ""
            positional, keywords = self._args(call) if call is not None else ([], {})
            if first_pass:
                if name in _CUSTOM_OP:
                    key = _split(self._string(self._arg(positional, keywords, 0, "name")) or "")
                    if self._register(key, node) and key is not None:
                        self.op_objects[text(definition.child_by_field_name("name"))] = key
                        self._implement(key, definition, None, node)
                continue
            self._impl_form(name, target, positional, keywords, definition, node)

    def _call(self, call: Node) -> None:
        function = call.child_by_field_name("function")
        name = self.m.call_name(call) or ""
        positional, keywords = self._args(call)
        if name in _DEFINE:
            self._register(_split(self._string(self._arg(positional, keywords, 0, "qualname")) or ""), call)
        elif function is not None and function.type == "attribute":
            method = text(function.child_by_field_name("attribute"))
            holder = text(function.child_by_field_name("object"))
            if method == "define" and holder in self.libraries:
                schema = self._string(self._arg(positional, keywords, 0, "schema"))
                if schema:
                    self._register((self.libraries[holder], _schema_name(schema)), call)
                return
            if method == "impl" and holder in self.libraries:
                key = self._library_key(
                    function.child_by_field_name("object"), self._arg(positional, keywords, 0, "op_name")
                )
                dispatch = self._string(self._arg(positional, keywords, 2, "dispatch_key"))
                if key is not None and in_torch_op_namespace(key[0]):
                    self._register(key, call)
                self._implement(key, self._arg(positional, keywords, 1, "fn"), dispatch, call)
                return
        self._impl_form(name, function, positional, keywords, None, call)

    def _impl_form(
        self,
        name: str,
        target: Node | None,
        positional: list[Node],
        keywords: dict[str, Node],
        definition: Node | None,
        node: Node,
    ) -> None:
        """`torch.library.impl(...)` / `register_kernel(...)` / `op.register_kernel(...)`, as a
        decorator of `definition` or as a call whose implementation is an argument."""
        if name in _IMPL:
            first = self._arg(positional, keywords, 0, "qualname")
            if first is not None and first.type == "identifier" and text(first) in self.libraries:
                key = self._library_key(first, self._arg(positional, keywords, 1, "name"))
                dispatch = self._string(self._arg(positional, keywords, 2, "dispatch_key"))
                func = definition
            else:
                key = _split(self._string(first) or "")
                dispatch = self._string(self._arg(positional, keywords, 1, "types"))
                func = definition or self._arg(positional, keywords, 2, "func")
            if key is not None and in_torch_op_namespace(key[0]):
                self._register(key, node)
            self._implement(key, func, dispatch, node)
        elif target is not None and target.type == "attribute":
            method = text(target.child_by_field_name("attribute"))
            holder = text(target.child_by_field_name("object"))
            if method == "register_kernel" and holder in self.op_objects:
                dispatch = self._string(self._arg(positional, keywords, 0, "device_types"))
                func = definition or self._arg(positional, keywords, 1, "fn")
                self._implement(self.op_objects[holder], func, dispatch, node)


class _CppRegistrations:
    """TORCH_LIBRARY blocks of the embedded sources and whether their implementations are own."""

    def __init__(self, sources: list[tuple[Resolved, str]], kernels: set[str], ops: CustomOps, sink: FindingSink):
        self.ops = ops
        self.sink = sink
        self.kernels = kernels
        self.roots = [
            (cuda_parser().parse(source.text.encode("utf-8")).root_node, source, label)
            for source, label in sources
            if source.text.strip()
        ]
        self.functions: dict[str, list[Node]] = {}
        for root, _, _ in self.roots:
            for node in walk(root):
                if node.type == "function_definition" and not _macro_block(node):
                    self.functions.setdefault(_defined_name(node), []).append(node)
        self._own_memo: dict[int, bool] = {}

    def run(self) -> None:
        for root, source, label in self.roots:
            for node in walk(root):
                macro = _macro_block(node)
                if macro is None:
                    continue
                args = _macro_args(node)
                if not args:
                    continue
                ns = args[0]
                if in_torch_op_namespace(ns):
                    row = node.start_point.row
                    what = (
                        f"{macro}({ns}, ...) in {label} registers in PyTorch's operator namespace '{ns}': that "
                        "replaces or extends PyTorch's own operators, for the baselines too."
                    )
                    self.sink.add("patched_torch", what, source.file_line(row), "reject")
                    continue
                self._block(node, ns)

    def _block(self, block: Node, ns: str) -> None:
        body = block.child_by_field_name("body")
        for call in walk(body) if body is not None else []:
            if call.type != "call_expression":
                continue
            function = call.child_by_field_name("function")
            if function is None or function.type != "field_expression":
                continue
            method = text(function.child_by_field_name("field"))
            args = call.child_by_field_name("arguments")
            values = [a for a in (args.named_children if args else []) if a.type != "comment"]
            if method not in ("def", "impl") or not values or values[0].type != "string_literal":
                continue
            name = _schema_name(_cpp_string(values[0]))
            if not name:
                continue
            key = (ns, name)
            self.ops.registered.add(key)
            if len(values) > 1 and self._own_impl(values[1]):
                self.ops.native_impls.add(key)

    def _own_impl(self, impl: Node) -> bool:
        """Whether the implementation expression names (or is) code of the candidate's own."""
        if impl.type == "lambda_expression":
            return self._own_body(impl)
        for node in walk(impl):
            if node.type == "lambda_expression":
                return self._own_body(node)
        name_node = _last_name(impl)
        if name_node is None:
            return False
        qualified = "".join(text(name_node).split())
        if qualified.split("::")[0] in ("at", "torch", "c10", "std"):
            return False
        definitions = self.functions.get(qualified.split("::")[-1].split("<")[0], [])
        return any(self._own_body(d) for d in definitions)

    def _own_body(self, body: Node, depth: int = 0) -> bool:
        if body.id in self._own_memo:
            return self._own_memo[body.id]
        self._own_memo[body.id] = False  # recursion guard
        own = False
        for node in walk(body):
            if node.type == "call_expression":
                function = node.child_by_field_name("function")
                callee = _callee(function)
                launched = {callee} if any(c.type == "kernel_call_syntax" for c in node.children) else set()
                if callee in _LAUNCH_APIS:
                    launched = {text(n) for n in walk(node) if n.type == "identifier"}
                if launched & self.kernels:
                    own = True
                elif depth < 20 and not "".join(text(function).split()).startswith(("at::", "torch::", "c10::")):
                    own = any(self._own_body(d, depth + 1) for d in self.functions.get(callee, []))
            elif not self.kernels and node.type in _LOOPS:
                own = True  # a CPU extension computing itself
            if own:
                break
        self._own_memo[body.id] = own
        return own


def _callee(function: Node | None) -> str:
    if function is None:
        return ""
    if function.type in ("template_function", "qualified_identifier"):
        return _callee(function.child_by_field_name("name"))
    if function.type == "field_expression":
        return text(function.child_by_field_name("field")).split("<")[0]
    return text(function).split("<")[0].strip()


def _last_name(impl: Node) -> Node | None:
    """The function an implementation expression names: `&f`, `f`, `TORCH_FN(f)`, `ns::f`,
    `torch::dispatch(key, &f)` (the last argument)."""
    node = impl
    while True:
        if node.type in ("identifier", "qualified_identifier", "template_function"):
            return node
        if node.type in ("pointer_expression", "parenthesized_expression", "cast_expression"):
            inner = node.named_children[-1] if node.named_children else None
        elif node.type == "call_expression":
            args = node.child_by_field_name("arguments")
            inner = args.named_children[-1] if args is not None and args.named_children else None
        else:
            return None
        if inner is None:
            return None
        node = inner


def _macro_block(node: Node) -> str | None:
    """`TORCH_LIBRARY`, `TORCH_LIBRARY_FRAGMENT` or `TORCH_LIBRARY_IMPL` for such a block."""
    if node.type != "function_definition":
        return None
    declarator = node.child_by_field_name("declarator")
    if declarator is None or declarator.type != "function_declarator":
        return None
    name = text(declarator.child_by_field_name("declarator"))
    return name if name in ("TORCH_LIBRARY", "TORCH_LIBRARY_FRAGMENT", "TORCH_LIBRARY_IMPL") else None


def _macro_args(node: Node) -> list[str]:
    declarator = node.child_by_field_name("declarator")
    parameters = declarator.child_by_field_name("parameters") if declarator is not None else None
    return [text(p).strip() for p in (parameters.named_children if parameters is not None else [])]


def _defined_name(definition: Node) -> str:
    declarator = definition.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    if declarator is None:
        return ""
    return _callee(declarator.child_by_field_name("declarator"))


def _cpp_string(node: Node) -> str:
    return "".join(text(c) for c in node.named_children if c.type == "string_content")


def find_custom_ops(
    module: PyModule,
    sources: list[tuple[Resolved, str]],
    kernels: set[str],
    ext_functions: set[str],
    sink: FindingSink,
) -> CustomOps:
    """Every operator the candidate registers, with its implementations; see the module docstring."""
    ops = CustomOps()
    _PythonRegistrations(module, ext_functions, ops, sink).run()
    _CppRegistrations(sources, kernels, ops, sink).run()
    for impls in ops.python_impls.values():
        for impl in impls:
            ops.companions.setdefault(impl.id, []).extend(i for i in impls if i.id != impl.id)
    return ops
