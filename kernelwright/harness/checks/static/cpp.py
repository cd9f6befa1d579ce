"""Static checks over the C++/CUDA sources embedded in a candidate (tree-sitter-cuda)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tree_sitter import Node

from kernelwright.harness.checks.static.common import FindingSink, Severity, cuda_parser, text, walk
from kernelwright.harness.checks.static.pysource import Resolved
from kernelwright.harness.checks.torch_ops import CALLED_NOT_WORK, TENSOR_COMPUTE_METHODS

_LAUNCH_APIS = {
    "cudaLaunchKernel",
    "cudaLaunchKernelEx",
    "cudaLaunchCooperativeKernel",
    "cuLaunchKernel",
    "cudaLaunchKernelExC",
}
_STREAM_CREATORS = {"cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority", "cuStreamCreate"}
_CURRENT_STREAM = {"getCurrentCUDAStream", "getDefaultCUDAStream"}
_DEFAULT_STREAMS = {"0", "nullptr", "NULL", "cudaStreamDefault", "cudaStreamLegacy", "cudaStreamPerThread"}
_THREADS = {"std::thread", "std::jthread", "std::async", "pthread_create", "boost::thread"}
_GRAPHS = {"cudaGraphLaunch", "cudaStreamBeginCapture", "cudaGraphInstantiate", "cudaGraphCreate"}
_HALF_TYPES = {
    "__half",
    "half",
    "__half2",
    "half2",
    "__nv_bfloat16",
    "__nv_bfloat162",
    "nv_bfloat16",
    "nv_bfloat162",
    "__nv_fp8_e4m3",
    "__nv_fp8_e5m2",
}
_HALF_QUALIFIED = {"Half", "BFloat16", "kHalf", "kFloat16", "kBFloat16", "tf32"}
_HALF_CALL_PREFIXES = (
    "__float2half", "__half2float", "__float22half2", "__half22float2", "__float2bfloat16",
    "__bfloat162float", "__float_to_tf32", "__float2tf32", "__hadd", "__hsub", "__hmul",
    "__hfma", "__hdiv", "__hneg", "hexp", "hsqrt", "hrsqrt",
)  # fmt: skip


@dataclass
class CppFacts:
    """What the C++/CUDA sources of all extensions define, launch and do."""

    kernels: dict[str, int | None] = field(default_factory=dict)  # __global__ name -> file line
    launched: set[str] = field(default_factory=set)  # called with <<<...>>>
    api_launched: set[str] = field(default_factory=set)  # names inside cudaLaunchKernel(...) and friends
    referenced: set[str] = field(default_factory=set)  # identifiers used outside their definition
    bound_functions: set[str] = field(default_factory=set)  # m.def("name", ...)
    torch_ops: list[str] = field(default_factory=list)
    half_kernels: set[str] = field(default_factory=set)  # __global__ kernels whose signature takes half types


def _leaves(node: Node) -> set[str]:
    kinds = ("identifier", "field_identifier", "type_identifier", "namespace_identifier")
    return {text(n) for n in walk(node) if n.type in kinds}


def _function_name(node: Node | None) -> str:
    """Last name part of a call's function (`ns::f<T>` -> `f`)."""
    if node is None:
        return ""
    if node.type == "template_function":
        return _function_name(node.child_by_field_name("name"))
    if node.type == "qualified_identifier":
        return _function_name(node.child_by_field_name("name"))
    if node.type == "field_expression":
        return text(node.child_by_field_name("field")).split("<")[0]
    return text(node).split("<")[0].strip()


def _qualified(node: Node | None) -> str:
    return "".join(text(node).split()).split("<")[0]


def _function_declarator(definition: Node) -> Node | None:
    declarator = definition.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    return declarator


def _enclosing_function(node: Node) -> Node | None:
    parent = node.parent
    while parent is not None and parent.type != "function_definition":
        parent = parent.parent
    return parent


def _is_device_code(function: Node | None) -> bool:
    return function is not None and any(c.type in ("__global__", "__device__") for c in function.children)


class _SourceChecker:
    """Checks one embedded source; findings carry candidate-file lines where they can be mapped."""

    def __init__(
        self,
        source: Resolved,
        label: str,
        fp32: bool,
        facts: CppFacts,
        sink: FindingSink,
        loader_streams: Mapping[str, int] | None = None,
    ) -> None:
        self.source = source
        # fastext launchers: function -> the parameter its loader fills with the current stream
        self.loader_streams = dict(loader_streams or {})
        self.label = label
        self.fp32 = fp32
        self.facts = facts
        self.sink = sink
        self.root = cuda_parser().parse(source.text.encode("utf-8")).root_node
        self.good_streams: set[str] = set()
        self.bad_streams: set[str] = set()
        self.static_pointers: set[str] = set()
        self.precision_seen: set[tuple[str, str]] = set()

    def where(self, node: Node) -> tuple[int | None, str]:
        row = node.start_point.row
        line = self.source.file_line(row)
        if line is not None:
            return line, f"{self.label}"
        return None, f"{self.label}, line {row + 1} of that source"

    def add(self, code: str, what: str, node: Node, severity: Severity) -> None:
        line, place = self.where(node)
        self.sink.add(code, f"{what} ({place}).", line, severity)

    def run(self) -> None:
        self._index_streams_and_statics()
        for node in walk(self.root):
            kind = node.type
            if kind == "function_definition" and any(c.type == "__global__" for c in node.children):
                self._kernel_definition(node)
            elif kind == "call_expression":
                self._call(node)
            elif kind == "declaration":
                self._declaration(node)
            elif kind == "binary_expression":
                self._comparison(node)
            elif kind == "gnu_asm_expression":
                self._asm(node)
            elif kind in ("type_identifier", "qualified_identifier", "identifier"):
                self._name(node)

    # ---- passes ------------------------------------------------------------------------
    def _index_streams_and_statics(self) -> None:
        for node in walk(self.root):
            if node.type == "init_declarator":
                target = node.child_by_field_name("declarator")
                value = node.child_by_field_name("value")
                if target is not None and value is not None:
                    self._classify_stream_var(_function_name(target), value)
            elif node.type == "assignment_expression":
                target = node.child_by_field_name("left")
                value = node.child_by_field_name("right")
                if target is not None and target.type == "identifier" and value is not None:
                    self._classify_stream_var(text(target), value)
            elif node.type == "call_expression" and _function_name(node.child_by_field_name("function")) in (
                _STREAM_CREATORS
            ):
                self.bad_streams |= _leaves(node.child_by_field_name("arguments") or node)
            elif node.type == "declaration" and _is_static(node):
                for declarator in node.children_by_field_name("declarator"):
                    if "*" in text(declarator).split("=")[0] or "ptr" in text(node.child_by_field_name("type")):
                        self.static_pointers.add(_declared_name(declarator))

    def _classify_stream_var(self, name: str, value: Node) -> None:
        names = _leaves(value)
        if "getStreamFromPool" in names or names & self.bad_streams:
            self.bad_streams.add(name)
        elif names & _CURRENT_STREAM or names & self.good_streams:
            self.good_streams.add(name)

    def _kernel_definition(self, node: Node) -> None:
        declarator = _function_declarator(node)
        if declarator is None:
            return
        name = _function_name(declarator.child_by_field_name("declarator"))
        self.facts.kernels.setdefault(name, self.where(node)[0])

    def _call(self, node: Node) -> None:
        function = node.child_by_field_name("function")
        name = _function_name(function)
        qualified = _qualified(function)
        config = next((c for c in node.children if c.type == "kernel_call_syntax"), None)
        if config is not None:
            self.facts.launched.add(name)
            self._launch_stream(node, config)
        if name in _LAUNCH_APIS:
            self.facts.api_launched |= _leaves(node.child_by_field_name("arguments") or node)
        if name in _STREAM_CREATORS or name == "getStreamFromPool":
            self.add("side_stream", f"Creates a side CUDA stream with {qualified}", node, "reject")
        if qualified in _THREADS or name == "pthread_create":
            self.add("side_stream", f"Starts host work on another thread with {qualified}", node, "reject")
        if name in _GRAPHS:
            self.add("cuda_graph_replay", f"Uses CUDA graphs ({name})", node, "flag")
        if name == "def" and function is not None and function.type == "field_expression" and not _in_op_library(node):
            args = node.child_by_field_name("arguments")
            first = args.named_children[0] if args and args.named_children else None
            if first is not None and first.type == "string_literal":
                self.facts.bound_functions.add(text(first).strip('"'))
        if self.fp32 and name.startswith(_HALF_CALL_PREFIXES):
            self._precision(name, node)
        if config is None and not _is_device_code(_enclosing_function(node)):  # a launch is not an ATen call
            self._torch_call(node, function, name, qualified)

    def _torch_call(self, node: Node, function: Node | None, name: str, qualified: str) -> None:
        head = qualified.split("::")[0]
        if _bypasses_dispatcher(qualified, name):
            self.facts.torch_ops.append(qualified)
            what = (
                f"Calls PyTorch's kernel {qualified} directly, bypassing the dispatcher: the profiler cannot see "
                "that work, so it cannot be counted (as the candidate's or as PyTorch's)"
            )
            self.add("torch_fallback", what, node, "reject")
        elif head in ("torch", "at") and "::cuda::" not in qualified and name not in CALLED_NOT_WORK:
            if qualified.count("::") >= 1 and not name[:1].isupper():
                self.facts.torch_ops.append(qualified)
                self.add("torch_fallback", f"Calls the PyTorch op {qualified} from C++", node, "flag")
        elif function is not None and function.type == "field_expression" and name in TENSOR_COMPUTE_METHODS:
            self.facts.torch_ops.append(f".{name}")
            self.add("torch_fallback", f"Calls the tensor method .{name}() from C++", node, "flag")
        elif name.startswith(("cublas", "cudnn")):
            self.add("torch_fallback", f"Calls the vendor library function {name} instead of a kernel", node, "flag")

    def _launch_stream(self, call: Node, config: Node) -> None:
        args = [c for c in config.named_children if c.type != "comment"]
        if len(args) < 4:
            return
        stream = args[3]
        names = _leaves(stream)
        if text(stream) in _DEFAULT_STREAMS or stream.type == "null":
            return
        if "getStreamFromPool" in names or names & self.bad_streams:
            self.add("side_stream", f"Launches on a non-default stream '{text(stream)}'", call, "reject")
        elif not (names & _CURRENT_STREAM or names & self.good_streams or self._loader_stream(call, stream)):
            what = f"Launches on stream '{text(stream)}', which is not provably the current stream"
            self.add("side_stream", what, call, "flag")

    def _loader_stream(self, call: Node, stream: Node) -> bool:
        """Whether `stream` is the parameter that `kernelwright.fastext` fills with the current
        stream when Python calls this launcher (`{"fn": "..., stream"}`): only while the launcher is
        reached from Python alone (its name used nowhere in the sources but where it is declared:
        a call or a pointer to it could pass another stream) and the parameter is never assigned
        in it."""
        function = _enclosing_function(call)
        if stream.type != "identifier" or function is None:
            return False
        declarator = _function_declarator(function)
        if declarator is None:
            return False
        name = _function_name(declarator.child_by_field_name("declarator"))
        index = self.loader_streams.get(name)
        parameters = declarator.child_by_field_name("parameters")
        if index is None or parameters is None:
            return False
        declared = [p for p in parameters.named_children if p.type == "parameter_declaration"]
        if index >= len(declared) or _declared_name(declared[index]) != text(stream):
            return False
        for node in walk(self.root):
            declaration = node.parent is not None and node.parent.type == "function_declarator"
            if node.type == "identifier" and text(node) == name and not declaration:
                return False
        for node in walk(function):
            if node.type in ("assignment_expression", "update_expression"):
                target = node.child_by_field_name("left") or node.child_by_field_name("argument")
                if target is not None and text(stream) in _leaves(target):
                    return False
            elif node.type == "pointer_expression" and text(stream) in _leaves(node):
                return False  # its address taken: written through a pointer
        return True

    def _declaration(self, node: Node) -> None:
        declarators = node.children_by_field_name("declarator")
        if not declarators or all(d.type == "function_declarator" for d in declarators):
            return
        type_text = text(node.child_by_field_name("type"))
        at_namespace_scope = node.parent is not None and node.parent.type in ("translation_unit", "declaration_list")
        if "Tensor" in type_text and (_is_static(node) or at_namespace_scope):
            names = ", ".join(_declared_name(d) for d in declarators)
            what = (
                f"Keeps a tensor in a static/global variable '{names}' across calls: a scratch buffer is fine, "
                "a result cache fails the checks on fresh inputs, and a returned buffer is `output_reused`"
            )
            self.add("input_cache", what, node, "flag")

    def _comparison(self, node: Node) -> None:
        if text(node.child_by_field_name("operator")) not in ("==", "!="):
            return
        names = _leaves(node)
        if names & self.static_pointers and names & {"data_ptr", "const_data_ptr", "mutable_data_ptr", "data"}:
            what = "Compares an input's data pointer with a pointer saved in a static variable"
            self.add("input_cache", what, node, "reject")

    def _asm(self, node: Node) -> None:
        if not self.fp32:
            return
        body = " ".join(text(s) for s in walk(node) if s.type == "string_content")
        if ("mma" in body or "cvt" in body) and any(t in body for t in (".f16", ".bf16", ".tf32", ".e4m3")):
            self._precision("inline PTX with f16/bf16/tf32 operands", node)

    def _name(self, node: Node) -> None:
        if node.type == "type_identifier" and text(node) in _HALF_TYPES and self.fp32:
            self._precision(text(node), node)
        elif node.type == "qualified_identifier" and (
            node.parent is None or node.parent.type != "qualified_identifier"
        ):
            qualified = _qualified(node)
            if qualified.split("::")[-1] in _HALF_QUALIFIED and self.fp32:
                self._precision(qualified, node)
            parent = node.parent
            is_callee = parent is not None and parent.type == "call_expression"
            if qualified in _THREADS and not is_callee:  # calls are reported by _call
                self.add("side_stream", f"Starts host work on another thread with {qualified}", node, "reject")

    def _precision(self, token: str, node: Node) -> None:
        """Reduced precision is judged on what runs. A `__global__` kernel that uses a half type
        (in its parameters or its body) is recorded, and the work share rejects it if it runs; a
        mention in host code that only a half input would reach (a dispatch macro, a `case
        kHalf:`, an `if (dtype == kHalf)` branch, a dtype comparison) is a flag; anything else
        (a `__device__` helper, ungated host code) is a rejection."""
        function = _enclosing_function(node)
        severity: Severity = "reject"
        kernel = _global_kernel_of(node)
        if kernel is not None:
            self.facts.half_kernels.add(kernel)
            severity = "flag"
        elif not _is_device_code(function) and _dtype_gated(node):
            severity = "flag"
        if (token, severity) in self.precision_seen:
            return
        self.precision_seen.add((token, severity))
        if severity == "flag":
            what = f"Mentions reduced precision ({token}) where only a half/bf16 input or kernel would use it"
        else:
            what = f"Uses reduced precision ({token}) in a float32 problem"
        self.add("precision_downgrade", what, node, severity)


# ATen's per-backend kernel namespaces: a call there runs PyTorch's kernel without the dispatcher,
# so torch.profiler records no op for it (`at::cuda::` also holds utilities: only op names count).
_DIRECT_KERNEL_NAMESPACES = (
    "at::cpu::",
    "at::native::",
    "at::meta::",
    "at::compositeexplicitautograd::",
    "at::compositeexplicitautogradnonfunctional::",
    "at::compositeimplicitautograd::",
)


def _bypasses_dispatcher(qualified: str, name: str) -> bool:
    if qualified.startswith(_DIRECT_KERNEL_NAMESPACES):
        return True
    if qualified.startswith("at::cuda::") and qualified.count("::") == 2:
        import torch  # the op registry: at::cuda::add is an op, at::cuda::getCurrentCUDAStream is not

        return hasattr(torch.ops.aten, name)
    return False


_HALF_WORDS = _HALF_TYPES | _HALF_QUALIFIED | {"Float16", "kFloat16"}


def _mentions_half(node: Node | None) -> bool:
    return node is not None and bool(_leaves(node) & _HALF_WORDS)


def _contains(outer: Node | None, inner: Node) -> bool:
    return outer is not None and outer.start_byte <= inner.start_byte and inner.end_byte <= outer.end_byte


def _dtype_gated(node: Node) -> bool:
    """Is `node` reached only for a half/bf16 input: inside a dtype comparison, a dispatch
    macro's arguments, a `case` labelled with a half type, or an `if` on a half dtype (its
    condition or its then-branch)?"""
    child, parent = node, node.parent
    while parent is not None and parent.type != "function_definition":
        kind = parent.type
        if kind == "binary_expression" and text(parent.child_by_field_name("operator")) in ("==", "!="):
            return True
        if kind == "call_expression" and _function_name(parent.child_by_field_name("function")).startswith(
            "AT_DISPATCH"
        ):
            return True
        if kind == "case_statement" and _mentions_half(parent.child_by_field_name("value")):
            return True
        if kind == "if_statement":
            condition = parent.child_by_field_name("condition")
            if _mentions_half(condition) and (
                _contains(condition, child) or _contains(parent.child_by_field_name("consequence"), child)
            ):
                return True
        child, parent = parent, parent.parent
    return False


def _global_kernel_of(node: Node) -> str | None:
    """The `__global__` kernel `node` is in (signature or body), if any."""
    parent = node.parent
    while parent is not None and parent.type != "function_definition":
        parent = parent.parent
    if parent is None or not any(c.type == "__global__" for c in parent.children):
        return None
    declarator = parent.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    return _function_name(declarator.child_by_field_name("declarator")) if declarator is not None else None


def _in_op_library(node: Node) -> bool:
    """Inside `TORCH_LIBRARY(ns, m) { ... }`: `m.def` there declares an operator schema, not a
    pybind11 function (see `custom_ops`)."""
    parent = node.parent
    while parent is not None:
        if parent.type == "function_definition":
            declarator = parent.child_by_field_name("declarator")
            if declarator is not None and declarator.type == "function_declarator":
                name = text(declarator.child_by_field_name("declarator"))
                if name in ("TORCH_LIBRARY", "TORCH_LIBRARY_FRAGMENT", "TORCH_LIBRARY_IMPL"):
                    return True
        parent = parent.parent
    return False


def _is_static(node: Node) -> bool:
    return any(c.type == "storage_class_specifier" and text(c) == "static" for c in node.children)


def _declared_name(declarator: Node) -> str:
    node: Node | None = declarator
    while node is not None and node.type not in ("identifier", "field_identifier"):
        node = node.child_by_field_name("declarator")
    return text(node) if node is not None else text(declarator)


def analyze_sources(
    sources: list[tuple[Resolved, str]],
    *,
    fp32: bool,
    sink: FindingSink,
    loader_streams: Sequence[Mapping[str, int]] | None = None,
) -> CppFacts:
    """Check every embedded source; `sources` pairs a resolved source with a label for messages;
    `loader_streams`, one per source, names the fastext launchers whose stream parameter the
    loader fills (function -> parameter index)."""
    facts = CppFacts()
    streams = list(loader_streams or [])
    for i, (source, label) in enumerate(sources):
        if not source.text.strip():
            continue
        checker = _SourceChecker(source, label, fp32, facts, sink, streams[i] if i < len(streams) else None)
        checker.run()
        for node in walk(checker.root):
            if node.type == "identifier" and node.parent is not None and node.parent.type != "function_declarator":
                facts.referenced.add(text(node))
    return facts
