"""A candidate as a self-contained KernelBench file: the fast-build form (`kernelwright.fastext.
load_kernels`, ctypes) rewritten as plain `torch.utils.cpp_extension.load_inline` with the same
C++/CUDA source and the same function names, and the `load_inline` calls of a file found with
their literal arguments (what the package exporter builds ahead of time).

Read, never run: the file is parsed (`ast`) and the calls' arguments are taken from literals or
module-level names bound to literals. The kernel source itself may be any expression (it is
kept as written); the name, the function table, `lang` and `flags` must be literal.

The bindings: each `extern "C"` function gets a C++ wrapper that takes tensors (or None) where
the fast form passes data pointers, casts each argument to the parameter type the function
declares (read by the compiler through `decltype`, so no C prototype is parsed here), fills in
the current CUDA stream for a `stream` parameter, and raises when the function returns nonzero,
as the fast form's caller does. A pybind11 module names each wrapper after its function, so the
candidate's calls (`lib.relu(x, y, n)`) are unchanged.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from kernelwright.errors import UsageError

FASTEXT = "kernelwright.fastext"
_PY_TYPES = {
    "ptr": "const std::optional<at::Tensor>&",
    "i32": "int64_t",
    "i64": "int64_t",
    "f32": "double",
    "f64": "double",
}
_PREAMBLE = r"""
// kernelwright export: Python bindings of the extern "C" functions above. Tensors pass their
// data pointers; each argument is cast to the type the function declares.
#include <cstddef>
#include <optional>
#include <tuple>
namespace kw_export {
template <typename F> struct params;
template <typename R, typename... P> struct params<R (*)(P...)> { using type = std::tuple<P...>; };
template <typename F, std::size_t I> using param_t = std::tuple_element_t<I, typename params<F>::type>;
inline void* data(const std::optional<at::Tensor>& t) { return t.has_value() ? t->data_ptr() : nullptr; }
}  // namespace kw_export
"""


@dataclass(frozen=True)
class FastCall:
    """One `load_kernels(...)` call of a candidate."""

    node: ast.Call
    name: str
    source_expr: str  # the kernel source's expression as written (`SOURCE`)
    functions: dict[str, list[str]]  # function -> argument kinds
    lang: str
    flags: list[str]


@dataclass(frozen=True)
class InlineCall:
    """One `load_inline(...)` call with its literal keyword arguments (sources as text)."""

    node: ast.Call
    kwargs: dict[str, Any]


class _NotLiteral(Exception):
    """An expression with no literal value at module level."""


def _literal(node: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> Any:
    if depth > 20:
        raise _NotLiteral("too deep")
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise _NotLiteral(node.id)
        return _literal(names[node.id], names, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal(node.left, names, depth + 1) + _literal(node.right, names, depth + 1)
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e, names, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        keys = [k for k in node.keys if k is not None]
        if len(keys) != len(node.keys):
            raise _NotLiteral("**")
        return {
            _literal(k, names, depth + 1): _literal(v, names, depth + 1) for k, v in zip(keys, node.values, strict=True)
        }
    try:
        return ast.literal_eval(node)
    except ValueError as exc:
        raise _NotLiteral(ast.unparse(node)) from exc


def _module_names(tree: ast.Module) -> dict[str, ast.expr]:
    names: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            names[node.target.id] = node.value
    return names


def _parse(source: str, label: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise UsageError(f"{label}:{exc.lineno}: syntax error: {exc.msg}") from exc


def kernelwright_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        if any(name.split(".")[0] == "kernelwright" for name in names):
            found.append(node)
    return found


def _fast_callers(imports: list[ast.Import | ast.ImportFrom], label: str) -> tuple[set[str], set[str]]:
    """Names that call load_kernels directly (`load_kernels`) and module names holding it (`fastext`)."""
    direct: set[str] = set()
    holders: set[str] = set()
    for node in imports:
        if isinstance(node, ast.ImportFrom) and node.module == FASTEXT:
            for alias in node.names:
                if alias.name != "load_kernels":
                    raise UsageError(f"{label}: cannot export: it uses kernelwright.fastext.{alias.name}")
                direct.add(alias.asname or alias.name)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "kernelwright"
            and all(a.name == "fastext" for a in node.names)
        ):
            holders.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import) and all(a.name == FASTEXT and a.asname for a in node.names):
            holders.update(a.asname for a in node.names if a.asname)
        else:
            what = node.module if isinstance(node, ast.ImportFrom) else ", ".join(a.name for a in node.names)
            raise UsageError(
                f"{label}: cannot export: it imports {what}",
                hint="only kernelwright.fastext's load_kernels is rewritten (as plain load_inline)",
            )
    return direct, holders


def _is_call_to(node: ast.Call, direct: set[str], holders: set[str], attr: str) -> bool:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in direct
    return (
        isinstance(func, ast.Attribute)
        and func.attr == attr
        and isinstance(func.value, ast.Name)
        and func.value.id in holders
    )


def _arguments(node: ast.Call, order: list[str]) -> dict[str, ast.expr]:
    args: dict[str, ast.expr] = dict(
        zip(order, node.args, strict=False)
    )  # more positional arguments than named: not read
    args.update({k.arg: k.value for k in node.keywords if k.arg is not None})
    return args


def fast_calls(source: str, label: str) -> tuple[ast.Module, list[FastCall]]:
    """The file's tree and its `load_kernels` calls (UsageError for any other kernelwright import,
    or arguments with no literal value)."""
    tree = _parse(source, label)
    direct, holders = _fast_callers(kernelwright_imports(tree), label)
    names = _module_names(tree)
    calls: list[FastCall] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_call_to(node, direct, holders, "load_kernels")):
            continue
        args = _arguments(node, ["name", "source", "functions"])
        try:
            name = _literal(args["name"], names)
            functions = _literal(args["functions"], names)
            lang = _literal(args["lang"], names) if "lang" in args else "cuda"
            flags = list(_literal(args["flags"], names)) if "flags" in args else []
        except KeyError as exc:
            raise UsageError(f"{label}:{node.lineno}: load_kernels(...) without its {exc.args[0]} argument") from exc
        except _NotLiteral as exc:
            raise UsageError(
                f"{label}:{node.lineno}: cannot export: load_kernels(...) has an argument with no literal value ({exc})"
            ) from exc
        if (
            "source" not in args
            or not isinstance(name, str)
            or not isinstance(functions, dict)
            or lang not in ("cpp", "cuda")
        ):
            raise UsageError(
                f"{label}:{node.lineno}: cannot export: load_kernels(name, source, functions, lang=...) expected"
            )
        kinds = {fn: [k.strip() for k in str(sig).split(",") if k.strip()] for fn, sig in functions.items()}
        bad = sorted({k for ks in kinds.values() for k in ks} - {*_PY_TYPES, "stream"})
        if bad:
            raise UsageError(f"{label}:{node.lineno}: cannot export: unknown argument type(s) {bad}")
        calls.append(FastCall(node, name, ast.unparse(args["source"]), kinds, lang, [str(f) for f in flags]))
    return tree, calls


def _wrapper(fn: str, kinds: list[str], lang: str) -> tuple[str, str]:
    """(declaration, definition) of the C++ wrapper of `fn`."""
    params, values = [], []
    for i, kind in enumerate(kinds):
        cast = f"static_cast<kw_export::param_t<decltype(&{fn}), {i}>>"
        if kind == "stream":
            stream = "at::cuda::getCurrentCUDAStream().stream()" if lang == "cuda" else "nullptr"
            values.append(f"{cast}({stream})")
            continue
        params.append(f"{_PY_TYPES[kind]} a{i}")
        values.append(f"{cast}(kw_export::data(a{i}))" if kind == "ptr" else f"{cast}(a{i})")
    head = f"void kw_export_{fn}({', '.join(params)})"
    body = (
        f"{head} {{\n    const int status = {fn}({', '.join(values)});\n"
        f'    TORCH_CHECK(status == 0, "{fn} returned error code ", status);\n}}\n'
    )
    return head + ";\n", body


def bindings(call: FastCall) -> tuple[str, str]:
    """(wrappers, module): C++ compiled after the kernel source, and the pybind11 module (cpp)."""
    heads, bodies, defs = [], [], []
    for fn, kinds in call.functions.items():
        head, body = _wrapper(fn, kinds, call.lang)
        heads.append(head)
        bodies.append(body)
        defs.append(f'    m.def("{fn}", &kw_export_{fn});\n')
    stream_header = "#include <ATen/cuda/CUDAContext.h>\n" if call.lang == "cuda" else ""
    wrappers = _PREAMBLE + stream_header + "".join(bodies)
    module = "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + "".join(defs) + "}\n"
    if call.lang == "cuda":  # the wrappers live in the .cu file: the C++ file declares them
        module = "#include <optional>\n" + "".join(heads) + module
    return wrappers, module


def _module_name(name: str) -> str:
    cleaned = re.sub(r"\W", "_", name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"kw_{cleaned}"


def _load_inline_code(call: FastCall, index: int) -> tuple[str, str]:
    """(constants, call): the bindings as module-level strings and the `load_inline(...)` call."""
    wrappers, module = bindings(call)
    w, m = f"_KW_BINDINGS_{index}", f"_KW_MODULE_{index}"
    constants = f'{w} = r"""{wrappers}"""\n{m} = r"""{module}"""\n'
    name = _module_name(call.name)
    if call.lang == "cpp":
        flags = ["-O3", "-fopenmp", "-march=native", *call.flags]
        code = (
            f"load_inline(name={name!r}, cpp_sources=[{call.source_expr}, {w}, {m}], "
            f"extra_cflags={flags!r}, extra_ldflags=['-fopenmp'], verbose=False)"
        )
    else:
        flags = ["-O3", "-lineinfo", *call.flags]
        code = (
            f"load_inline(name={name!r}, cpp_sources=[{m}], cuda_sources=[{call.source_expr}, {w}], "
            f"extra_cuda_cflags={flags!r}, verbose=False)"
        )
    return constants, code


def _replace(source: str, edits: list[tuple[int, int, int, int, str]]) -> str:
    """Apply (line, col, end_line, end_col, text) edits (1-based lines, as ast gives them)."""
    offsets = [0]
    for text_line in source.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(text_line.encode()))  # ast's columns count UTF-8 bytes
    data = source.encode()
    for line, col, end_line, end_col, text in sorted(edits, reverse=True):
        start, end = offsets[line - 1] + col, offsets[end_line - 1] + end_col
        data = data[:start] + text.encode() + data[end:]
    return data.decode()


def to_load_inline(source: str, label: str) -> str:
    """`source` with no kernelwright import: fast-form calls rewritten (see the module doc); a file
    already free of kernelwright is returned as it is."""
    tree, calls = fast_calls(source, label)
    imports = kernelwright_imports(tree)
    if not imports:
        return source
    if not calls:
        raise UsageError(f"{label}: cannot export: it imports kernelwright.fastext but never calls load_kernels")
    edits: list[tuple[int, int, int, int, str]] = []
    for imported in imports:
        end_line, end_col = imported.end_lineno or imported.lineno, imported.end_col_offset or 0
        text = "from torch.utils.cpp_extension import load_inline"
        edits.append((imported.lineno, imported.col_offset, end_line, end_col, text))
    for index, call in enumerate(calls):
        constants, code = _load_inline_code(call, index)
        node = call.node
        edits.append((node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0, code))
        statement = next(s for s in tree.body if s.lineno <= node.lineno <= (s.end_lineno or s.lineno))
        edits.append((statement.lineno, 0, statement.lineno, 0, constants))
    return _replace(source, edits)


def inline_calls(source: str, label: str) -> tuple[ast.Module, list[InlineCall]]:
    """The `load_inline(...)` calls of a kernelwright-free file, with literal keyword arguments
    (list-valued sources as given); UsageError where an argument has no literal value."""
    tree = _parse(source, label)
    names = _module_names(tree)
    direct, holders = {"load_inline"}, {"cpp_extension"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "torch.utils.cpp_extension":
            direct.update(a.asname or a.name for a in node.names if a.name == "load_inline")
    calls: list[InlineCall] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_call_to(node, direct, holders, "load_inline")):
            continue
        args = _arguments(node, ["name", "cpp_sources", "cuda_sources", "functions"])
        try:
            kwargs = {key: _literal(value, names) for key, value in args.items()}
        except _NotLiteral as exc:
            raise UsageError(
                f"{label}:{node.lineno}: cannot export: load_inline(...) has an argument with no literal value ({exc})"
            ) from exc
        if not isinstance(kwargs.get("name"), str):
            raise UsageError(f"{label}:{node.lineno}: cannot export: load_inline(...) without a literal name")
        calls.append(InlineCall(node, kwargs))
    return tree, calls


def prebuilt_source(source: str, tree: ast.Module, calls: list[InlineCall], helper: str) -> str:
    """`source` with each `load_inline(...)` call replaced by `_kw_prebuilt(<name>)`, `helper` (the
    function's definition) inserted before the first statement holding one, and a plain
    `from torch.utils.cpp_extension import load_inline` dropped (that module imports setuptools,
    which a user's environment need not have)."""
    edits = []
    for call in calls:
        node = call.node
        text = f"_kw_prebuilt({call.kwargs['name']!r})"
        edits.append((node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0, text))
    for statement in tree.body:
        if (
            isinstance(statement, ast.ImportFrom)
            and statement.module == "torch.utils.cpp_extension"
            and all(a.name == "load_inline" and a.asname is None for a in statement.names)
        ):
            end = (statement.end_lineno or statement.lineno, statement.end_col_offset or 0)
            edits.append((statement.lineno, statement.col_offset, *end, "load_inline = None  # built at export"))
    first = min(c.node.lineno for c in calls)
    holder = next(s for s in tree.body if s.lineno <= first <= (s.end_lineno or s.lineno))
    edits.append((holder.lineno, 0, holder.lineno, 0, helper))
    return _replace(source, edits)
