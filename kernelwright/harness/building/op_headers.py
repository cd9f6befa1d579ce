"""Per-operator torch headers for the `.cu` of a `load_inline` build (issue #29).

With the light `torch/extension.h` (`light_header.py`) the `.cu` still includes `torch/types.h`,
and through it `ATen/Functions.h` and `ATen/NativeFunctions.h`: one `#include <ATen/ops/X.h>` per
operator, ~1340 each, of which a kernel's `.cu` names a handful. nvcc parses them three times
(`cudafe++`, `cicc`, the host compile): about a quarter of the `.cu`'s compile.

torch has a build mode for exactly this, its own: with `AT_PER_OPERATOR_HEADERS` defined, every
torch header that needs an operator includes that operator's header itself instead of the two
lists (the macro switches `#include`s and nothing else: `#error`s under
`TORCH_ASSERT_ONLY_METHOD_OPERATORS`, which stays undefined), and torch's own libraries are built
that way. The two lists are still included by `ATen/ATen.h` and the autograd factories, so the
`.cu` is compiled with `-DAT_PER_OPERATOR_HEADERS` and, first on its include path, a folder in the
build folder holding the two lists as torch wrote them, less the operators the `.cu` does not name:
- `ATen/Functions.h` keeps operator X where the `.cu`'s code (comments and literals left out, as
  `light_header.code_text` reads it) has an identifier that is X, starts with `X_` (`X_out`,
  `X_outf`, `X_symint`, ...), or is a function `ATen/ops/X.h` declares (`__and__`, `for_blob`),
  and where the list's own code names X (`at::var` in its `var(self, int)`);
- `ATen/NativeFunctions.h` keeps none (`at::native::` is reached only by that name, and a `.cu`
  that spells `native` keeps torch's lists).
So every name the `.cu` spells finds every declaration torch's full lists would give it, and
every name a torch header uses finds what that header includes for itself in torch's own build.

When: only where the light header is used (its checks: no preprocessor conditional, no `##`,
nothing that could probe which declarations exist), and a build that fails this way is built
again with torch's lists and header (`ninja_runs.py`): this never fails a build the plain one
would pass. Measured on one candidate's `.cu` (compile-only, sm_90; `scripts/bench_build.py`'s
identity check): the device code the same, and every section and relocation of the host code the
same as with the light header alone, which held one unreferenced constant more.

What is left (honestly): as for the light header, a template whose instantiation depends on
whether an operator the `.cu` never names is declared, or a probe through a name these checks do
not list. What was built is what the correctness fuzzing checks, and the build record says which
headers the `.cu` got. `KERNELWRIGHT_OP_HEADERS=0` turns it off.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kernelwright.harness.building import headers, light_header

ENV_SWITCH = "KERNELWRIGHT_OP_HEADERS"  # "0": the .cu gets torch's full operator lists
FOLDER = "kw_op_headers"  # in the build folder, first on the .cu's include path
DEFINE = "-DAT_PER_OPERATOR_HEADERS"
LISTS = ("Functions.h", "NativeFunctions.h")
_OP_INCLUDE = re.compile(r"^\s*#\s*include\s*<ATen/ops/(\w+)\.h>\s*$")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_DECLARED = re.compile(r"^\s*(?:inline|TORCH_API)\b[^\n(;{]*?\b(\w+)\s*\(", re.MULTILINE)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


@dataclass(frozen=True)
class Trimmed:
    """The folder to put first on the `.cu`'s include path, and how many operators it kept."""

    folder: Path
    kept: tuple[str, ...]
    listed: int

    def describe(self) -> str:
        return f"per-operator headers ({len(self.kept)} of {self.listed} operators)"


def torch_include() -> Path:
    """torch's include folder (where `ATen/Functions.h` lies)."""
    return headers.torch_header().parent.parent


@functools.lru_cache(maxsize=4)
def _listed(include: str) -> tuple[tuple[str, ...], frozenset[str], dict[str, frozenset[str]]]:
    """`ATen/Functions.h`'s operators, the identifiers of its own code, and per operator the
    functions its header declares whose names do not start with the operator's."""
    text = (Path(include) / "ATen" / "Functions.h").read_text()
    ops = tuple(m.group(1) for line in text.splitlines() if (m := _OP_INCLUDE.match(line)))
    own = "\n".join(line for line in text.splitlines() if not _OP_INCLUDE.match(line))
    named = frozenset(_IDENT.findall(_COMMENT.sub(" ", own)))
    odd: dict[str, frozenset[str]] = {}
    for op in ops:
        try:
            header = (Path(include) / "ATen" / "ops" / f"{op}.h").read_text()
        except OSError:
            continue
        names = {n for n in _DECLARED.findall(_COMMENT.sub(" ", header)) if n != op and not n.startswith(op + "_")}
        if names:
            odd[op] = frozenset(names)
    return ops, named, odd


@functools.lru_cache(maxsize=8)
def _spelled(cu_text: str) -> frozenset[str]:
    """The identifiers of the `.cu`'s code (comments and literals left out)."""
    return frozenset(_IDENT.findall(light_header.code_text(cu_text)))


def op_reason(cu_text: str) -> str:
    """Why the `.cu` keeps torch's full operator lists; "" when it may have the trimmed ones (the
    light header's checks are the caller's)."""
    names = _spelled(cu_text)
    if "native" in names:
        return "the .cu names native, whose declarations only the full list holds"
    if {"AT_PER_OPERATOR_HEADERS", "TORCH_ASSERT_ONLY_METHOD_OPERATORS"} & names:
        return "the .cu names torch's per-operator switches"
    return ""


def kept_operators(cu_text: str, include: Path) -> tuple[tuple[str, ...], int]:
    """The operators of `ATen/Functions.h` the `.cu` names (see the module's docstring), and how
    many it lists."""
    ops, own, odd = _listed(str(include))
    names = _spelled(cu_text) | own
    prefixes = {n[:i] for n in names for i in range(1, len(n)) if n[i] == "_"}
    kept = tuple(op for op in ops if op in names or op in prefixes or bool(odd.get(op, frozenset()) & names))
    return kept, len(ops)


def trim(build_folder: Path, cu_text: str, include: Path | None = None) -> tuple[Trimmed | None, str]:
    """Write the trimmed lists for the `.cu` in `cu_text` under `build_folder/kw_op_headers`; the
    folder, or None and why not."""
    why = op_reason(cu_text)
    if why:
        return None, why
    try:
        include = include or torch_include()
        kept, listed = kept_operators(cu_text, include)
        texts = {name: (include / "ATen" / name).read_text() for name in LISTS}
    except (OSError, RuntimeError) as exc:
        return None, f"torch's operator lists could not be read: {exc}"
    if not listed:
        return None, "torch's ATen/Functions.h lists no per-operator headers"
    keep = {"Functions.h": set(kept), "NativeFunctions.h": set()}  # X_native.h: none
    folder = build_folder / FOLDER
    (folder / "ATen").mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        lines = []
        for line in text.splitlines(keepends=True):
            found = _OP_INCLUDE.match(line)
            if found and found.group(1) not in keep[name]:
                line = "// kernelwright: not named in the .cu\n"  # the line numbers stay torch's
            lines.append(line)
        (folder / "ATen" / name).write_text("".join(lines))
    return Trimmed(folder, kept, listed), ""


def offer(build_ninja: str, trimmed: Trimmed) -> tuple[str | None, str]:
    """`build_ninja` with the `.cu` compiled in torch's per-operator mode against the trimmed lists,
    or None and why not."""
    return light_header.prepend_cuda_cflags(build_ninja, DEFINE, "-isystem", str(trimmed.folder))
