"""Technique tags of a candidate, derived deterministically from its code and its plan (#31).

The program database groups candidates into niches by these tags, so that the search keeps the
best kernel of each technique as a possible parent, not only the fastest one. A tag is set when
the code shows the technique (a construct no kernel has by accident) or, for the few techniques
code cannot show reliably (fusion), when the plan names it. Same inputs, same tags: nothing here
is learned or random.
"""

from __future__ import annotations

import re

_CODE: dict[str, tuple[str, ...]] = {
    "vectorised": (
        r"\bfloat4\b",
        r"\bfloat2\b",
        r"\bhalf2\b",
        r"__nv_bfloat162",
        r"\b__m(?:128|256|512)\w*",
        r"\b_mm(?:256|512)?_\w+",
        r"#pragma\s+omp\s+simd",
        r"\bvld1q?_\w+",
        r"tl\.load\([^)]*eviction|\bvec(?:tor)?_size\b",
    ),
    "tiling": (r"\bTILE\w*\b", r"\bBLOCK_[MNK]\b", r"\btile_?\w*\s*=", r"\bBM\b.*\bBN\b"),
    "shared_memory": (r"__shared__", r"extern\s+__shared__", r"cudaFuncAttributeMaxDynamicSharedMemorySize"),
    "tensor_cores": (r"\bwmma::", r"\bmma\.sync", r"\bwgmma\b", r"\btl\.dot\(", r"\bnvcuda::wmma", r"\bcute::"),
    "async_copy": (r"cp\.async", r"__pipeline_memcpy_async", r"cuda::memcpy_async", r"\bcp\.async\.bulk", r"\btma\b"),
    "warp_primitives": (r"__shfl_\w+", r"__reduce_\w+_sync", r"cooperative_groups", r"\bwarpReduce\w*"),
    "persistent": (r"\bpersistent\b", r"for\s*\([^;]*;[^;]*;[^)]*\+=\s*gridDim\.x", r"\btl\.num_programs\("),
    "warp_specialisation": (r"warp_?speciali[sz]", r"\bproducer\b.*\bconsumer\b", r"setmaxnreg"),
    "unrolled": (r"#pragma\s+unroll", r"\bUNROLL\b"),
    "multithreaded": (r"#pragma\s+omp\s+parallel", r"\bstd::thread\b"),
    "triton": (r"@triton\.jit",),
}
_PLAN: dict[str, tuple[str, ...]] = {
    "fusion": (r"\bfus(?:e|ed|ing|ion)\b",),
    "persistent": (r"\bpersistent\b",),
    "warp_specialisation": (r"warp[- ]speciali[sz]",),
}
TAGS = tuple(sorted(set(_CODE) | set(_PLAN)))


def tags(source: str, plan: str = "") -> list[str]:
    """The candidate's technique tags, sorted (the same code and plan always give the same tags)."""
    found = {name for name, patterns in _CODE.items() if any(re.search(p, source) for p in patterns)}
    lowered = plan.lower()
    found |= {name for name, patterns in _PLAN.items() if any(re.search(p, lowered) for p in patterns)}
    return sorted(found)


def niche(tag_list: list[str]) -> str:
    """A candidate's niche: its tags joined (`plain` for none), so kernels using the same
    techniques compete with each other for a parent's place."""
    return "+".join(t for t in tag_list if t != "triton") or "plain"


def similar(a: str, b: str) -> float:
    """How alike two ideas are: the Jaccard index of their word sets (words of 3+ letters)."""
    words_a, words_b = (set(re.findall(r"[a-z0-9_]{3,}", t.lower())) for t in (a, b))
    return len(words_a & words_b) / len(words_a | words_b) if words_a and words_b else 0.0
