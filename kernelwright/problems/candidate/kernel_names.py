"""One spelling of GPU kernel names, for everything that decides which kernels are a candidate's
own: the harness's work-share check (`harness/checks/symbols.py`) and the profiler's ownership of
an Nsight Compute report (`profiler/ownership.py`). Names are matched exactly or by function name,
never by substring, and a kernel in PyTorch's namespaces is never a candidate's.
"""

from __future__ import annotations

TORCH_NAMESPACES = ("at::", "c10::", "torch::", "caffe2::")


def normalize(name: str) -> str:
    """One spelling of a demangled kernel name: no whitespace, no `void ` return type (the
    profiler and c++filt differ only there)."""
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    return "".join(name.split())


def qualified_name(demangled: str) -> str:
    """`void ns::k<float>(float const*)` -> `ns::k`: the function's name without template
    arguments, parameters or return type."""
    name = demangled.strip().replace("(anonymous namespace)", "{anonymous}")
    if name.startswith("void "):
        name = name[5:]
    depth, out = 0, []
    for ch in name:
        if ch in "<(":
            if ch == "(" and depth == 0:
                break
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip()


def base_name(demangled: str) -> str:
    """`void ns::k<float>(float const*)` -> `k`."""
    return qualified_name(demangled).split("::")[-1]


def in_torch_namespace(demangled: str) -> bool:
    return qualified_name(demangled).startswith(TORCH_NAMESPACES)
