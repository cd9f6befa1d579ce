"""Helpers of the memory tests: entries and problem signatures made by hand (no torch, no tracing),
and a small fixture database whose right answers are known."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kernelwright.memory import (
    CandidateEntry,
    KnowledgeBase,
    Machine,
    OpSignature,
    ProblemKey,
    Speed,
    candidate_uid,
    error_class,
)

H100 = Machine(device="cuda", name="H100 SXM", arch="Hopper")
H100_PCIE = Machine(device="cuda", name="H100 PCIe", arch="Hopper")
A100 = Machine(device="cuda", name="A100 SXM4 80GB", arch="Ampere")
CPU = Machine(device="cpu", name="AMD EPYC", arch="x86_64")


def key(name: str, ops: dict[str, int], classes: list[str], pattern: list[str], dtype: str = "float32") -> ProblemKey:
    signature = OpSignature(
        method="traced", ops=ops, classes=classes, pattern=pattern, inputs=[f"{dtype}[1024, 1024]"], dtypes=[dtype]
    )
    return ProblemKey(hashlib.sha256(name.encode()).hexdigest(), name, signature)


RELU = key("level1/1_relu", {"relu": 1}, ["elementwise"], ["elementwise"])
LEAKY = key("level1/6_leaky_relu", {"leaky_relu": 1}, ["elementwise"], ["elementwise"])
MATMUL = key("level1/15_matmul_square", {"matmul": 1}, ["matmul"], ["matmul"])
GEMM_RELU = key(
    "level2/1_gemm_bias_relu", {"matmul": 1, "relu": 1}, ["elementwise", "matmul"], ["matmul", "elementwise"]
)

_counter = iter(range(1, 1_000_000))


def entry(
    problem: ProblemKey,
    machine: Machine,
    verdict: str = "correct",
    speed: float | None = 1.5,
    *,
    reason: str | None = None,
    run_id: str | None = None,
    index: int = 1,
    backend: str = "cuda",
    source: str | None = None,
    lesson: str = "",
    plan: str = "a plan",
    created_at: str | None = None,
) -> CandidateEntry:
    n = next(_counter)
    run_id = run_id or f"run-{n}"
    source = source if source is not None else f"# kernel {n} for {problem.name}\nclass ModelNew: pass\n"
    sha = hashlib.sha256(source.encode()).hexdigest()
    stamp = created_at or f"2026-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}+00:00"
    timed = Speed(ratio=speed, ci_low=speed * 0.95, ci_high=speed * 1.05) if verdict == "correct" and speed else None
    return CandidateEntry(
        uid=candidate_uid(run_id, index, sha, machine.name),
        run_id=run_id,
        index=index,
        round=1,
        problem=problem.name,
        problem_sha256=problem.sha256,
        backend=backend,
        device=machine.device,
        machine=machine.name,
        arch=machine.arch,
        source=source,
        source_sha256=sha,
        verdict=verdict,
        reason=reason,
        error_class=error_class(verdict, reason),
        message=f"{verdict} {reason or ''}".strip(),
        speed_eager=timed,
        speed_compile=timed,
        plan=plan,
        lesson=lesson,
        created_at=stamp,
        updated_at=stamp,
    )


def fixture_db(path: Path) -> KnowledgeBase:
    """relu on an H100: two correct kernels (1.2x, 1.8x), two torch_fallback rejections, a lesson;
    relu on an H100 PCIe (same arch) and an A100 (other arch); leaky relu (same fusion pattern) and a
    square matmul (not similar) on the H100; relu on the CPU (other device)."""
    kb = KnowledgeBase.open(path)
    for problem in (RELU, LEAKY, MATMUL, GEMM_RELU):
        kb.put_problem(problem)
    rows = [
        entry(RELU, H100, speed=1.2, lesson="vectorized float4 loads helped"),
        entry(RELU, H100, speed=1.8, lesson="one pass with float4 is the whole game", plan="float4 + grid-stride"),
        entry(RELU, H100, "rejected", reason="torch_fallback", lesson="torch.relu for the work is always rejected"),
        entry(RELU, H100, "rejected", reason="torch_fallback"),
        entry(RELU, H100_PCIE, speed=1.4, lesson="the PCIe part has less bandwidth"),
        entry(RELU, A100, speed=1.3, lesson="on Ampere use 128-bit loads too"),
        entry(LEAKY, H100, speed=1.6, lesson="leaky relu: a branch-free select"),
        entry(MATMUL, H100, speed=0.7, lesson="tiling in shared memory"),
        entry(RELU, CPU, speed=2.0, backend="cpp", lesson="OpenMP above 256k elements"),
    ]
    for row in rows:
        kb.record(row)
    return kb
