"""The Python side of a candidate as tree-sitter sees it: imports, names, strings, extensions.

`PyModule` indexes one parsed candidate file: what each imported name stands for, module-level
assignments (to resolve kernel sources held in variables), functions, classes, `@triton.jit`
kernels and every `load_inline` / `load` call with its sources resolved to text.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field

from tree_sitter import Node

from kernelwright.harness.checks.static.common import Extension, line_of, python_parser, text, walk

# Conventional names a candidate may use without importing them the usual way.
_DEFAULT_ALIASES = {
    "torch": "torch",
    "nn": "torch.nn",
    "F": "torch.nn.functional",
    "tl": "triton.language",
    "triton": "triton",
}
_TRITON_DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics"}


@dataclass(frozen=True)
class Resolved:
    """A string expression resolved statically; `rows` maps text rows back to file lines."""

    text: str
    rows: tuple[tuple[int, int | None], ...]  # (first row in `text`, file line of that row)
    ok: bool

    def file_line(self, row: int) -> int | None:
        """The candidate-file line of 0-based `row` of `text`, when it came from a literal."""
        best: tuple[int, int | None] | None = None
        for start, line in self.rows:
            if start <= row:
                best = (start, line)
        if best is None or best[1] is None:
            return None
        return best[1] + (row - best[0])


_EMPTY = Resolved("", (), True)


def _join(parts: list[Resolved], sep: str) -> Resolved:
    out = ""
    rows: list[tuple[int, int | None]] = []
    ok = True
    for i, part in enumerate(parts):
        if i:
            out += sep
        base = out.count("\n")
        rows.extend((base + start, line) for start, line in part.rows)
        out += part.text
        ok = ok and part.ok
    return Resolved(out, tuple(rows), ok)


@dataclass
class ExtensionCall:
    """A load_inline / load call found in the file, before it is frozen into an `Extension`."""

    node: Node
    name: str | None
    cpp: Resolved
    cuda: Resolved
    functions: tuple[str, ...]
    functions_ok: bool
    file_sources: tuple[str, ...] = ()  # `load(sources=[...])` file names
    with_cuda: bool = False
    holders: set[str] = field(default_factory=set)  # names the built module is bound to
    # fastext launchers: function -> the C parameter the loader fills with the current stream
    loader_streams: dict[str, int] = field(default_factory=dict)

    def frozen(self) -> Extension:
        return Extension(
            name=self.name,
            cpp_sources=self.cpp.text,
            cuda_sources=self.cuda.text,
            functions=self.functions,
            line=line_of(self.node),
            resolved=self.cpp.ok and self.cuda.ok and not self.file_sources,
        )


class PyModule:
    """Index of one candidate file parsed by tree-sitter-python."""

    def __init__(self, source: str) -> None:
        self.tree = python_parser().parse(source.encode("utf-8"))
        self.root: Node = self.tree.root_node
        self.aliases: dict[str, str] = {}
        self.assigns: dict[str, Node] = {}
        self.functions: dict[str, Node] = {}
        self.classes: dict[str, Node] = {}
        self.triton_kernels: dict[str, Node] = {}
        self.imports: list[tuple[str, Node]] = []  # (module or module.name, node)
        self._index_module()
        self.extensions: list[ExtensionCall] = self._find_extensions()

    # ---- names -------------------------------------------------------------------------
    def dotted(self, node: Node | None) -> str | None:
        """`a.b.c` for an identifier/attribute chain, None for anything else."""
        if node is None:
            return None
        if node.type == "identifier":
            return text(node)
        if node.type == "attribute":
            obj = self.dotted(node.child_by_field_name("object"))
            attr = node.child_by_field_name("attribute")
            if obj is None or attr is None:
                return None
            return f"{obj}.{text(attr)}"
        return None

    def qualify(self, node: Node | None) -> str | None:
        """The dotted name with its first part replaced by what the import bound it to."""
        dotted = self.dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        target = self.aliases.get(head) or _DEFAULT_ALIASES.get(head)
        if target is None:
            return dotted
        return f"{target}.{rest}" if rest else target

    def call_name(self, call: Node) -> str | None:
        return self.qualify(call.child_by_field_name("function"))

    # ---- indexing ----------------------------------------------------------------------
    def _index_module(self) -> None:
        for node in walk(self.root):
            if node.type == "import_statement":
                self._index_import(node, None)
            elif node.type == "import_from_statement":
                module = node.child_by_field_name("module_name")
                self._index_import(node, text(module))
        for child in self.root.named_children:
            definition, decorators = _undecorate(child)
            if definition.type == "function_definition":
                name = text(definition.child_by_field_name("name"))
                self.functions[name] = definition
                if any(self.qualify(_decorator_target(d)) in _TRITON_DECORATORS for d in decorators):
                    self.triton_kernels[name] = definition
            elif definition.type == "class_definition":
                self.classes[text(definition.child_by_field_name("name"))] = definition
            elif child.type == "expression_statement" and child.named_children:
                stmt = child.named_children[0]
                if stmt.type == "assignment":
                    left = stmt.child_by_field_name("left")
                    right = stmt.child_by_field_name("right")
                    if left is not None and left.type == "identifier" and right is not None:
                        self.assigns[text(left)] = right

    def _index_import(self, node: Node, module: str | None) -> None:
        for name_node in node.children_by_field_name("name"):
            if name_node.type == "aliased_import":
                real = text(name_node.child_by_field_name("name"))
                bound = text(name_node.child_by_field_name("alias"))
                full = f"{module}.{real}" if module else real
                self.aliases[bound] = full
            else:
                real = text(name_node)
                full = f"{module}.{real}" if module else real
                bound = real if module else real.split(".")[0]
                self.aliases[bound] = full if module else bound
            self.imports.append((full, node))
        if module is not None and any(c.type == "wildcard_import" for c in node.children):
            self.imports.append((f"{module}.*", node))

    # ---- strings -----------------------------------------------------------------------
    def resolve_string(self, node: Node | None, depth: int = 0) -> Resolved:
        """Resolve a string-valued expression: literals, names, `+`, lists, simple f-strings."""
        if node is None or depth > 20:
            return Resolved("", (), False)
        kind = node.type
        if kind == "string":
            return self._resolve_literal(node, depth)
        if kind == "concatenated_string":
            return _join([self._resolve_literal(c, depth) for c in node.named_children], "")
        if kind == "parenthesized_expression" and node.named_children:
            return self.resolve_string(node.named_children[0], depth + 1)
        if kind == "identifier" and text(node) in self.assigns:
            return self.resolve_string(self.assigns[text(node)], depth + 1)
        if kind in ("integer", "float"):
            return Resolved(text(node), (), True)
        if kind == "binary_operator" and text(node.child_by_field_name("operator")) == "+":
            left = self.resolve_string(node.child_by_field_name("left"), depth + 1)
            right = self.resolve_string(node.child_by_field_name("right"), depth + 1)
            return _join([left, right], "")
        if kind in ("list", "tuple"):
            return _join([self.resolve_string(c, depth + 1) for c in node.named_children], "\n")
        if kind == "call":
            return self._resolve_string_call(node, depth)
        return Resolved("", (), False)

    def _resolve_string_call(self, node: Node, depth: int) -> Resolved:
        func = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        positional = [a for a in (args.named_children if args else []) if a.type != "keyword_argument"]
        name = self.qualify(func)
        if name in ("textwrap.dedent", "dedent", "inspect.cleandoc") and positional:
            inner = self.resolve_string(positional[0], depth + 1)
            return Resolved(textwrap.dedent(inner.text), inner.rows, inner.ok)
        if func is not None and func.type == "attribute":
            method = text(func.child_by_field_name("attribute"))
            obj = func.child_by_field_name("object")
            if method in ("strip", "lstrip", "rstrip") and not positional:
                inner = self.resolve_string(obj, depth + 1)
                return Resolved(inner.text, inner.rows, inner.ok)  # keeps rows approximately
            if method == "join" and len(positional) == 1:
                sep = self.resolve_string(obj, depth + 1)
                parts = positional[0]
                if parts.type in ("list", "tuple"):
                    items = [self.resolve_string(c, depth + 1) for c in parts.named_children]
                    joined = _join(items, sep.text)
                    return Resolved(joined.text, joined.rows, joined.ok and sep.ok)
        return Resolved("", (), False)

    def _resolve_literal(self, node: Node, depth: int) -> Resolved:
        line = line_of(node)
        if not any(c.type == "interpolation" for c in node.children):
            try:
                value = ast.literal_eval(text(node))
            except (ValueError, SyntaxError):
                return Resolved("", (), False)
            if isinstance(value, bytes):
                value = value.decode("utf-8", errors="replace")
            return Resolved(str(value), ((0, line),), True)
        # f-string: literal parts kept, `{name}` substituted when the name resolves.
        pieces: list[str] = []
        ok = True
        for child in node.children:
            if child.type == "string_content":
                content = text(child)
                if "f" in text(node.child(0)).lower():
                    content = content.replace("{{", "{").replace("}}", "}")
                pieces.append(content)
            elif child.type == "escape_sequence":
                pieces.append(_unescape(text(child)))
            elif child.type == "interpolation":
                expr = child.child_by_field_name("expression")
                value = self.resolve_string(expr, depth + 1)
                ok = ok and value.ok
                pieces.append(value.text)
        return Resolved("".join(pieces), ((0, line),), ok)

    # ---- extensions --------------------------------------------------------------------
    def _find_extensions(self) -> list[ExtensionCall]:
        found: list[ExtensionCall] = []
        for node in walk(self.root):
            if node.type != "call":
                continue
            name = self.call_name(node) or ""
            if name == "load_inline" or name.endswith("cpp_extension.load_inline"):
                found.append(self._inline_extension(node))
            elif name.endswith("cpp_extension.load"):
                found.append(self._file_extension(node))
            elif name == "load_kernels" or name.endswith("fastext.load_kernels"):
                found.append(self._fast_extension(node))
        return found

    def _fast_extension(self, call: Node) -> ExtensionCall:
        """`kernelwright.fastext.load_kernels(name, source, {fn: signature}, lang=...)`."""
        args = self._arguments(call, ("name", "source", "functions"))
        source = self.resolve_string(args["source"]) if "source" in args else Resolved("", (), False)
        lang = self.resolve_string(args["lang"]).text if "lang" in args else "cuda"
        functions: tuple[str, ...] = ()
        functions_ok = False
        node = args.get("functions")
        if node is not None and node.type == "identifier" and text(node) in self.assigns:
            node = self.assigns[text(node)]
        streams: dict[str, int] = {}
        if node is not None and node.type == "dictionary":
            pairs = [pair for pair in node.named_children if pair.type == "pair"]
            keys = [self.resolve_string(pair.child_by_field_name("key")) for pair in pairs]
            functions, functions_ok = tuple(k.text for k in keys if k.ok), all(k.ok for k in keys)
            for key, pair in zip(keys, pairs, strict=True):
                signature = self.resolve_string(pair.child_by_field_name("value"))
                kinds = [k.strip() for k in signature.text.split(",")] if key.ok and signature.ok else []
                if kinds.count("stream") == 1:  # the loader's rule: at most one, filled in, never passed
                    streams[key.text] = kinds.index("stream")
        cpp, cuda = (_EMPTY, source) if lang == "cuda" else (source, _EMPTY)
        ext = ExtensionCall(
            call,
            self._ext_name(args),
            cpp,
            cuda,
            functions,
            functions_ok,
            with_cuda=lang == "cuda",
            loader_streams=streams if lang == "cuda" else {},
        )
        ext.holders = self._holders(call)
        return ext

    def _arguments(self, call: Node, order: tuple[str, ...]) -> dict[str, Node]:
        args = call.child_by_field_name("arguments")
        out: dict[str, Node] = {}
        position = 0
        for arg in args.named_children if args else []:
            if arg.type == "keyword_argument":
                key = text(arg.child_by_field_name("name"))
                value = arg.child_by_field_name("value")
                if value is not None:
                    out[key] = value
            elif arg.type not in ("list_splat", "dictionary_splat", "comment"):
                if position < len(order):
                    out[order[position]] = arg
                position += 1
        return out

    def _inline_extension(self, call: Node) -> ExtensionCall:
        args = self._arguments(call, ("name", "cpp_sources", "cuda_sources", "functions"))
        cpp = self.resolve_string(args["cpp_sources"]) if "cpp_sources" in args else _EMPTY
        cuda = self.resolve_string(args["cuda_sources"]) if "cuda_sources" in args else _EMPTY
        if "cuda_sources" in args and args["cuda_sources"].type == "none":
            cuda = _EMPTY
        functions, functions_ok = self._functions(args.get("functions"))
        with_cuda = "with_cuda" in args and text(args["with_cuda"]) == "True"
        # CUDA sources the reader cannot resolve (made in __init__, an f-string) are still CUDA.
        with_cuda = with_cuda or ("cuda_sources" in args and args["cuda_sources"].type != "none" and not cuda.ok)
        ext = ExtensionCall(call, self._ext_name(args), cpp, cuda, functions, functions_ok, with_cuda=with_cuda)
        ext.holders = self._holders(call)
        return ext

    def _file_extension(self, call: Node) -> ExtensionCall:
        args = self._arguments(call, ("name", "sources"))
        files: tuple[str, ...] = ("<unresolved>",)
        if "sources" in args:
            resolved = self.resolve_string(args["sources"])
            files = tuple(f for f in resolved.text.split("\n") if f) or ("<unresolved>",)
        with_cuda = "with_cuda" in args and text(args["with_cuda"]) == "True"
        ext = ExtensionCall(
            call, self._ext_name(args), _EMPTY, _EMPTY, (), False, file_sources=files, with_cuda=with_cuda
        )
        ext.holders = self._holders(call)
        return ext

    def _ext_name(self, args: dict[str, Node]) -> str | None:
        if "name" not in args:
            return None
        resolved = self.resolve_string(args["name"])
        return resolved.text if resolved.ok else None

    def _functions(self, node: Node | None) -> tuple[tuple[str, ...], bool]:
        if node is None or node.type == "none":
            return (), False
        if node.type == "identifier" and text(node) in self.assigns:
            node = self.assigns[text(node)]
        if node.type == "string":
            one = self.resolve_string(node)
            return (one.text,), one.ok
        if node.type not in ("list", "tuple"):
            return (), False
        names = [self.resolve_string(c) for c in node.named_children]
        return tuple(n.text for n in names if n.ok), all(n.ok for n in names)

    def _holders(self, call: Node) -> set[str]:
        """Last name part of what the built module is assigned to (`ext`, `self.ext` -> `ext`)."""
        parent = call.parent
        if parent is not None and parent.type == "assignment":
            dotted = self.dotted(parent.child_by_field_name("left"))
            if dotted:
                return {dotted.split(".")[-1]}
        return set()


def _undecorate(node: Node) -> tuple[Node, list[Node]]:
    if node.type != "decorated_definition":
        return node, []
    definition = node.child_by_field_name("definition")
    decorators = [c for c in node.children if c.type == "decorator"]
    return (definition if definition is not None else node), decorators


def _decorator_target(decorator: Node) -> Node | None:
    expr = decorator.named_children[0] if decorator.named_children else None
    if expr is not None and expr.type == "call":
        return expr.child_by_field_name("function")
    return expr


def decorators_of(definition: Node) -> list[Node]:
    parent = definition.parent
    if parent is not None and parent.type == "decorated_definition":
        return [c for c in parent.children if c.type == "decorator"]
    return []


def decorator_names(module: PyModule, definition: Node) -> list[str]:
    return [module.qualify(_decorator_target(d)) or "" for d in decorators_of(definition)]


def _unescape(sequence: str) -> str:
    try:
        return str(ast.literal_eval(f'"{sequence}"'))
    except (ValueError, SyntaxError):
        return sequence
