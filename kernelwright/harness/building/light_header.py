"""A lighter `torch/extension.h` for the `.cu` of a `load_inline` build (issue #29).

KernelBench-form candidates start their `cuda_sources` with `#include <torch/extension.h>`:
`torch/all.h` (the C++ frontend: nn, optim, data, jit, serialize, autograd, ...) and
`torch/python.h` (pybind11, Python.h) over `torch/types.h`, which `load_inline` already puts at the
top of the `.cu`. nvcc then runs two front ends (`cudafe++`, `cicc`) and a host compile over all of
it: ~57 s on an H100 host, about half of it for what a kernel's `.cu` does not use. The `.cu` of
such a build is compiled against `light_include/torch/extension.h` (shipped read-only in the
package: torch's own guards around `#include <torch/types.h>`), put first on the `.cu`'s include
path (`-isystem`, in `cuda_cflags` only: `main.cpp`, which holds the bindings, keeps the real one).

When (`light_reason`, over the `.cu` as torch wrote it): the `.cu` includes `torch/extension.h`,
and nothing in it can tell the two headers apart short of failing to compile:
- no preprocessor conditional (`#if`, `#ifdef`, `#ifndef`, `#elif`, `__has_include`, `defined`),
  which could test for a macro only the full header defines, no token pasting (`##`: a name built
  where these checks cannot read it), no trigraph, digraph or raw string (their text is not what
  these checks read), no quoted or computed `#include` (a file these checks do not read);
- no name from what the full header adds beyond `torch/types.h` (`FULL_ONLY`: pybind11 and the
  Python C API, torch's nn / optim / jit / data / serialize / autograd / cuda / fft / linalg /
  special / nested / sparse namespaces, utils.h's names in `torch::`), and no
  `decltype` / `requires` / `enable_if` / `void_t` / `__COUNTER__`, the usual tools of a probe that
  asks whether a declaration exists.
Then a `.cu` that needs the full header fails to compile against the light one, and any failure
of the light build reruns the build with torch's header (`ninja_runs.py`): the light header never
fails a candidate the plain build would pass.

What is left (honestly): a program that compiles against both headers means the same thing
unless overload resolution or template specialisation picks a declaration that only the full
header adds; these checks rule out the spellings above, not every such construct (a `sizeof`
trick on an unlisted name could still probe). The same holds between the library's two units
(`main.cpp` sees the full header, the `.cu` the light one): an inline function both instantiate is
the same text in both. What was built is what the correctness fuzzing then checks, and the build
record says which header the `.cu` got (`cuda.header`, and the `headers` line).
`KERNELWRIGHT_LIGHT_CU=0` turns it off.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

ENV_SWITCH = "KERNELWRIGHT_LIGHT_CU"  # "0": the .cu compiles against torch's own extension.h
LIGHT_INCLUDE = Path(__file__).parent / "light_include"
_EXTENSION = re.compile(r"^\s*#\s*include\s*<\s*torch/extension\.h\s*>", re.MULTILINE)
_DIRECTIVE = re.compile(r"^\s*#\s*(\w*)(.*)$")
_CONDITIONAL = {"if", "ifdef", "ifndef", "elif", "elifdef", "elifndef"}
_LITERAL = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")
_PREFIXED_RAW = re.compile(r"(?<![\w])(?:u8|u|U|L)?R\"")
_FULL_ONLY = re.compile(
    r"\b(?:py|pybind11|nn|optim|jit|data|serialize|autograd|fft|linalg|special|nested|sparse|mps|xpu|python"
    r"|enumtype)\s*::"
    r"|\btorch\s*::\s*(?:cuda|NoGradGuard|AutoGradMode|save|load|pickle_save|pickle_load|set_printoption_sci_mode"
    r"|manual_seed|init_num_threads|get_num_threads|set_num_threads|get_num_interop_threads|set_num_interop_threads"
    r"|equal_if_defined|\w*Callback\w*|\w*RecordFunction\w*)\b"
    r"|\b(?:Py[A-Z_]\w*|PYBIND11\w*|pybind11\w*|TORCH_VERSION\w*)"
    r"|\b(?:decltype|requires|void_t|enable_if\w*|is_detected\w*|__COUNTER__|__has_include\w*|defined"
    r"|__if_exists|__if_not_exists)\b"
)


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


def code_text(text: str) -> str:
    """`text` after line splicing, with comments replaced by a space and string and character
    literals emptied (`""`, `''`): what the checks read."""
    text = text.replace("\\\r\n", "").replace("\\\n", "")
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif text[i] in "\"'":
            match = _LITERAL.match(text, i)
            if match is None:  # an unterminated literal: keep the quote, the checks refuse it
                out.append(text[i])
                i += 1
            else:
                out.append(text[i] * 2)
                i = match.end()
        else:
            j = i
            while j < n and text[j] not in "\"'/":
                j += 1
            if j == i:
                j = i + 1
            out.append(text[i:j])
            i = j
    return "".join(out)


def light_reason(cu_text: str) -> str:
    """Why the `.cu` in `cu_text` keeps torch's own `torch/extension.h`; "" when it may have the
    light one."""
    if not _EXTENSION.search(cu_text):
        return "the .cu does not include torch/extension.h"
    if "??" in cu_text or "%:" in cu_text:
        return "a trigraph or digraph"
    if _PREFIXED_RAW.search(cu_text):
        return "a raw string literal"
    code = code_text(cu_text)
    if "##" in code:
        return "token pasting (##)"
    for line in code.splitlines():
        directive = _DIRECTIVE.match(line)
        if directive is None:
            continue
        name, rest = directive.group(1), directive.group(2).strip()
        if name in _CONDITIONAL:
            return f"a preprocessor conditional (#{name})"
        if name == "include":
            if not re.fullmatch(r"<[\w./+\-]+>", rest) or ".." in rest or rest.startswith("</"):
                return f"an #include the checks cannot follow: {rest[:60]}"
            if rest.replace(" ", "") in ("<torch/torch.h>", "<torch/all.h>", "<torch/python.h>"):
                return f"includes {rest}, most of the full header anyway"
        elif name not in ("define", "undef", "pragma", "error", "warning", "line", ""):
            return f"a directive the checks do not know (#{name})"
    found = _FULL_ONLY.search(code)
    if found:
        return f"uses {found.group(0).strip()!r}, which only the full header declares or which could probe for it"
    return ""


def offer(build_ninja: str, cu_text: str) -> tuple[str | None, str]:
    """`build_ninja` with the light header first on the `.cu`'s include path, or None and why not."""
    why = light_reason(cu_text)
    if why:
        return None, why
    if not (LIGHT_INCLUDE / "torch" / "extension.h").is_file():
        return None, "the light header is not installed"
    return prepend_cuda_cflags(build_ninja, "-isystem", str(LIGHT_INCLUDE))


def prepend_cuda_cflags(build_ninja: str, *flags: str) -> tuple[str | None, str]:
    """`build_ninja` with `flags` first on the `.cu`'s command line (`cuda_cflags`; `main.cpp`'s
    `cflags` untouched), or None and why not."""
    lines = build_ninja.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("cuda_cflags =") and "rule cuda_compile" in build_ninja:
            rest = line.split("=", 1)[1].lstrip(" ")
            lines[i] = f"cuda_cflags = {shlex.join(flags)} {rest}"
            return "".join(lines), ""
    return None, "no cuda_cflags line in build.ninja"
