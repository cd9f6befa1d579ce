"""What `ModelNew.forward` reaches: the functions it calls, the PyTorch ops they run and whether
any custom kernel is reached; plus the rules that need that call graph (fallbacks, caches).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tree_sitter import Node

from kernelwright.harness.checks.static.common import FindingSink, line_of, text, walk
from kernelwright.harness.checks.static.custom_ops import CustomOps
from kernelwright.harness.checks.static.pysource import PyModule
from kernelwright.harness.checks.torch_ops import CALLED_NOT_WORK, TENSOR_COMPUTE_METHODS

_TORCH_NON_COMPUTE = {"cuda", "utils", "backends", "autograd", "jit", "distributed", "testing", "library", "nn"}
_TORCH_COMPUTE_NAMESPACES = {"linalg", "fft", "special", "ops", "sparse", "_C", "nested"}
_LAYERS_NOT_COMPUTE = {"Parameter", "ParameterList", "ParameterDict", "Buffer", "Identity", "Module", "ModuleDict"}
_FALLBACK_KEYS = {
    "is_cuda", "device", "dtype", "shape", "size", "dim", "ndim", "numel", "is_contiguous",
    "is_available", "is_floating_point", "requires_grad", "training", "type", "is_grad_enabled",
}  # fmt: skip
_POINTER_CALLS = {"data_ptr", "storage", "untyped_storage", "_cdata"}
_KEY_METHODS = {"get", "setdefault", "pop", "__contains__", "__getitem__"}


@dataclass
class ForwardFacts:
    has_modelnew: bool = False
    has_forward: bool = False
    reached: list[Node] = field(default_factory=list)  # function_definition nodes
    torch_ops: list[tuple[str, int]] = field(default_factory=list)
    reaches_kernel: bool = False


class ForwardAnalysis:
    def __init__(
        self, module: PyModule, ext_functions: set[str], sink: FindingSink, custom_ops: CustomOps | None = None
    ) -> None:
        self.m = module
        self.custom_ops = custom_ops or CustomOps()
        self.sink = sink
        self.ext_functions = ext_functions
        self.holders = {h for ext in module.extensions for h in ext.holders}
        self.owner: dict[int, Node] = {}  # function node id -> class node
        self.attr_class: dict[str, Node] = {}
        self.attr_layer: dict[str, str] = {}
        self.facts = ForwardFacts()
        self.model_new = self._find_model_new()

    # ---- structure ---------------------------------------------------------------------
    def _find_model_new(self) -> Node | None:
        node = self.m.classes.get("ModelNew")
        if node is None:
            node = next((n for n in walk(self.m.root) if n.type == "class_definition" and _name(n) == "ModelNew"), None)
        return node

    def methods(self, cls: Node, seen: set[int] | None = None) -> dict[str, Node]:
        seen = seen or set()
        if cls.id in seen:
            return {}
        seen.add(cls.id)
        found: dict[str, Node] = {}
        bases = cls.child_by_field_name("superclasses")
        for base in bases.named_children if bases is not None else []:
            local = self.m.classes.get(text(base))
            if local is not None:
                found.update(self.methods(local, seen))
        body = cls.child_by_field_name("body")
        for child in body.named_children if body is not None else []:
            definition = child.child_by_field_name("definition") if child.type == "decorated_definition" else child
            if definition is not None and definition.type == "function_definition":
                found[_name(definition)] = definition
                self.owner[definition.id] = cls
        return found

    def class_chain(self, cls: Node) -> list[str]:
        """Names of `cls`'s bases, following classes defined in the file."""
        out: list[str] = []
        bases = cls.child_by_field_name("superclasses")
        for base in bases.named_children if bases is not None else []:
            out.append(text(base))
            local = self.m.classes.get(text(base))
            if local is not None and local is not cls:
                out.extend(self.class_chain(local))
        return out

    def _index_self_attributes(self, functions: Iterable[Node]) -> None:
        for function in functions:
            for node in walk(function):
                if node.type != "assignment":
                    continue
                left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
                dotted = self.m.dotted(left) or ""
                if not dotted.startswith("self.") or right is None or right.type != "call":
                    continue
                attr = dotted.split(".", 1)[1]
                callee = self.m.call_name(right) or ""
                if callee in self.m.classes:
                    self.attr_class[attr] = self.m.classes[callee]
                elif callee.startswith("torch.nn.") and callee.count(".") == 2:
                    layer = callee.rsplit(".", 1)[1]
                    if layer not in _LAYERS_NOT_COMPUTE and layer[:1].isupper():
                        self.attr_layer[attr] = f"nn.{layer}"

    # ---- reachability ------------------------------------------------------------------
    def run(self) -> ForwardFacts:
        facts = self.facts
        if self.model_new is None:
            return facts
        facts.has_modelnew = True
        methods = self.methods(self.model_new)
        forward = methods.get("forward")
        if forward is None:
            return facts
        facts.has_forward = True
        self._index_self_attributes(methods.values())
        facts.reached = self.reach([forward])
        for function in facts.reached:
            facts.torch_ops.extend(self.ops_in(function))
            if self._references_kernel(function):
                facts.reaches_kernel = True
        self._exception_fallbacks(facts.reached)
        self._cache_writes(facts.reached, forward)
        self._returns(forward)
        return facts

    def reach(self, start: list[Node]) -> list[Node]:
        """Functions reachable from `start` (lenient: any reference to a local function counts)."""
        order: list[Node] = []
        seen: set[int] = set()
        queue = list(start)
        while queue:
            function = queue.pop(0)
            if function.id in seen or _name(function) in self.m.triton_kernels:
                continue
            seen.add(function.id)
            if function.type in ("function_definition", "lambda"):
                order.append(function)
            queue.extend(self.custom_ops.companions.get(function.id, []))  # a custom op's other kernels
            owner = self.owner.get(function.id) or self.model_new
            own_methods = self.methods(owner) if owner is not None else {}
            for node in walk(function):
                if node.type == "identifier" and node.parent is not None and node.parent.type != "attribute":
                    name = text(node)
                    if name in self.m.functions:
                        queue.append(self.m.functions[name])
                    elif name in self.m.classes:
                        queue.extend(self.methods(self.m.classes[name]).values())
                elif node.type == "attribute":
                    dotted = self.m.dotted(node) or ""
                    if dotted.startswith("self.") and dotted.count(".") == 1:
                        attr = dotted[5:]
                        if attr in own_methods:
                            queue.append(own_methods[attr])
                        elif attr in self.attr_class:
                            queue.extend(self.methods(self.attr_class[attr]).values())
                    elif dotted.split(".")[0] in self.m.classes:
                        queue.extend(self.methods(self.m.classes[dotted.split(".")[0]]).values())
                    op = self.custom_ops.op_of(self.m.qualify(node) or "")
                    if op is not None:  # torch.ops.NS.NAME the candidate registered: its Python kernels
                        queue.extend(self.custom_ops.python_impls.get(op, []))
        return order

    def _references_kernel(self, scope: Node) -> bool:
        """Whether `scope` mentions a Triton kernel, an extension module or an extension function."""
        bare = set(self.m.triton_kernels) | self.holders
        for node in walk(scope):
            if node.type == "attribute" and self.custom_ops.native_impls:
                op = self.custom_ops.op_of(self.m.qualify(node) or "")
                if op is not None and op in self.custom_ops.native_impls:
                    return True  # an op the candidate registered with its own C++/extension kernel
            if node.type != "identifier":
                continue
            name = text(node)
            parent = node.parent
            is_attribute_name = (
                parent is not None and parent.type == "attribute" and parent.child_by_field_name("attribute") == node
            )
            if not is_attribute_name and name in bare:
                return True
            if is_attribute_name and parent is not None and (name in self.ext_functions or name in self.holders):
                owner = self.m.qualify(parent.child_by_field_name("object")) or ""
                if not owner.startswith(("torch", "triton")):
                    return True
        return False

    # ---- torch ops ---------------------------------------------------------------------
    def ops_in(self, scope: Node) -> list[tuple[str, int]]:
        ops: list[tuple[str, int]] = []
        for node in walk(scope):
            if node.type == "call":
                op = self._call_op(node)
                if op:
                    ops.append((op, line_of(node)))
            elif node.type in ("binary_operator", "augmented_assignment") and text(
                node.child_by_field_name("operator")
            ) in ("@", "@="):
                ops.append(("@", line_of(node)))
        return ops

    def _call_op(self, call: Node) -> str | None:
        function = call.child_by_field_name("function")
        dotted = self.m.dotted(function) or ""
        name = self.m.qualify(function) or ""
        if dotted.startswith("self.") and dotted[5:] in self.attr_layer:
            return self.attr_layer[dotted[5:]]
        if name.startswith("torch.nn.functional."):
            return "F." + name.rsplit(".", 1)[1]
        if name.startswith("torch."):
            parts = name.split(".")
            op = self.custom_ops.op_of(name)
            if op is not None and self.custom_ops.implemented(op):
                return None  # the candidate's own operator: its implementations are reached instead
            if parts[1] in _TORCH_COMPUTE_NAMESPACES:
                return name
            if parts[1] in _TORCH_NON_COMPUTE or len(parts) != 2 or parts[1] in CALLED_NOT_WORK:
                return None
            return name
        if function is None or function.type != "attribute":
            return None
        method = text(function.child_by_field_name("attribute"))
        root = dotted.split(".")[0] if dotted else ""
        if method not in TENSOR_COMPUTE_METHODS or method in self.ext_functions:
            return None
        if root in self.m.aliases or root in self.holders or root in ("tl", "triton", "math", "np"):
            return None
        if dotted.startswith("self.") and dotted.split(".")[1] in self.holders:
            return None
        return f".{method}"

    def ops_reached_from(self, block: Node) -> list[tuple[str, int]]:
        ops = self.ops_in(block)
        for function in self.reach([block]):
            if function.id != block.id:
                ops.extend(self.ops_in(function))
        return ops

    # ---- fallbacks ---------------------------------------------------------------------
    def _exception_fallbacks(self, reached: list[Node]) -> None:
        reached_ids = {f.id for f in reached}
        for node in walk(self.m.root):
            if node.type == "try_statement":
                body = node.child_by_field_name("body")
                inside = any(a.id in reached_ids for a in _ancestors(node))
                if not inside and not (body is not None and self._references_kernel(body)):
                    continue
                for handler in node.children:
                    if handler.type not in ("except_clause", "else_clause"):
                        continue
                    ops = self.ops_reached_from(handler)
                    if ops:
                        kind = "except" if handler.type == "except_clause" else "else"
                        what = f"The {kind} branch of a try around the kernel computes with PyTorch ({ops[0][0]})."
                        self.sink.add("exception_fallback", what, line_of(handler), "reject")
            elif node.type == "if_statement" and any(a.id in reached_ids for a in _ancestors(node)):
                condition = node.child_by_field_name("condition")
                keys = {text(n) for n in walk(condition)} & _FALLBACK_KEYS if condition else set()
                if not keys:
                    continue
                for branch in node.children:
                    if branch.type not in ("block", "elif_clause", "else_clause"):
                        continue
                    ops = self.ops_reached_from(branch)
                    if ops:
                        key = sorted(keys)[0]
                        what = f"A branch keyed on {key} computes with PyTorch ({ops[0][0]}) instead of the kernel."
                        self.sink.add("exception_fallback", what, line_of(branch), "flag")

    # ---- caches ------------------------------------------------------------------------
    def pointer_keys(self) -> None:
        """Reject `data_ptr()` / `id(x)` / `storage()` used as a key or compared."""
        for node in walk(self.m.root):
            if node.type != "call":
                continue
            function = node.child_by_field_name("function")
            name = self.m.dotted(function) or ""
            last = name.rsplit(".", 1)[-1]
            if not ((last in _POINTER_CALLS and "." in name) or name == "id"):
                continue
            if _name(_enclosing_def(node)) in self.m.triton_kernels:
                continue
            use = _key_use(node)
            if use is None:
                use = self._key_use_via_variable(node)
            if use is not None:
                what = f"Uses {text(node)} as a {use}: results would be cached by input address."
                self.sink.add("input_cache", what, line_of(node), "reject")

    def _key_use_via_variable(self, node: Node) -> str | None:
        holder = node.parent
        while holder is not None and holder.type in ("tuple", "parenthesized_expression", "expression_list"):
            holder = holder.parent
        if holder is None or holder.type != "assignment":
            return None
        target = self.m.dotted(holder.child_by_field_name("left"))
        scope = _enclosing_def(holder) if not (target or "").startswith("self.") else self.model_new
        if target is None or scope is None:
            return None
        for other in walk(scope):
            if other.type in ("identifier", "attribute") and self.m.dotted(other) == target and other.id != node.id:
                use = _key_use(other)
                if use is not None:
                    return use
        return None

    def _cache_writes(self, reached: list[Node], forward: Node) -> None:
        params = {text(p) for p in walk(forward.child_by_field_name("parameters") or forward) if p.type == "identifier"}
        params.discard("self")
        for function in reached:
            for node in walk(function):
                if node.type != "assignment":
                    continue
                left = node.child_by_field_name("left")
                if left is None or left.type != "subscript":
                    continue
                container = self.m.dotted(left.child_by_field_name("value")) or ""
                if not (container.startswith("self.") or container in self.m.assigns):
                    continue
                key = left.child_by_field_name("subscript")
                leaves = {text(n) for n in walk(key)} if key is not None else set()
                if key is not None and (key.type == "identifier" and text(key) in params):
                    what = f"Stores results in {container} keyed by the input tensor object itself."
                    self.sink.add("input_cache", what, line_of(node), "reject")
                elif leaves & _POINTER_CALLS or "id" in leaves:
                    continue  # reported by pointer_keys
                elif leaves & {"shape", "size", "dtype", "device", "stride"}:
                    what = f"forward writes a shape-keyed cache {container}[...] (fine for launch configs)."
                    self.sink.add("input_cache", what, line_of(node), "flag")
                else:
                    self.sink.add("input_cache", f"forward writes a cache {container}[...].", line_of(node), "flag")

    def _returns(self, forward: Node) -> None:
        nested = {_name(n) for n in walk(forward) if n.type == "function_definition" and n.id != forward.id}
        assigned = {
            self.m.dotted(n.child_by_field_name("left"))
            for function in self.facts.reached
            for n in walk(function)
            if n.type == "assignment"
        }
        for node in walk(forward):
            if node.type != "return_statement" or not node.named_children:
                continue
            value = node.named_children[0]
            if value.type == "lambda" or (value.type == "identifier" and text(value) in nested):
                self.sink.add("lazy_output", "forward returns a callable instead of a tensor.", line_of(node), "flag")
            dotted = self.m.dotted(value) or ""
            if dotted.startswith("self.") and dotted in assigned:
                what = f"forward returns the stored attribute {dotted}, which may replay an earlier result."
                self.sink.add("input_cache", what, line_of(node), "flag")


def _name(node: Node | None) -> str:
    return text(node.child_by_field_name("name")) if node is not None else ""


def _ancestors(node: Node) -> Iterable[Node]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _enclosing_def(node: Node) -> Node | None:
    return next((a for a in _ancestors(node) if a.type == "function_definition"), None)


def _key_use(node: Node) -> str | None:
    """How a pointer-like value is used, when that use is as a lookup key or comparison."""
    child, parent = node, node.parent
    while parent is not None and parent.type in ("tuple", "parenthesized_expression", "expression_list", "list"):
        child, parent = parent, parent.parent
    if parent is None:
        return None
    if parent.type == "subscript" and parent.child_by_field_name("subscript") == child:
        return "dictionary key"
    if parent.type == "comparison_operator":
        return "comparison"
    if parent.type == "pair" and parent.child_by_field_name("key") == child:
        return "dictionary key"
    if parent.type == "argument_list" and parent.parent is not None:
        function = parent.parent.child_by_field_name("function")
        if (
            function is not None
            and function.type == "attribute"
            and text(function.child_by_field_name("attribute")) in _KEY_METHODS
        ):
            return "dictionary key"
    return None
