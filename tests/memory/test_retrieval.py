"""Retrieval for the planner on a fixture database whose right answers are known: the tiers in
order, similar problems found by operator signature, the budget, the why of every item, and the
kernel a new run starts from. Plus the signature itself, traced and read statically."""

from __future__ import annotations

from pathlib import Path

from kernelwright.memory import KnowledgeBase, Machine, RecallQuery, gpu_machine
from kernelwright.memory.signature import signature_of, static_signature
from kernelwright.problems import resolve_problem
from tests.memory.helpers import CPU, H100, H100_PCIE, MATMUL, RELU, entry, fixture_db


def _recall(kb: KnowledgeBase, **kw: object):  # type: ignore[no-untyped-def]
    query = RecallQuery(problem=RELU, machine=H100, backend="cuda", **kw)  # type: ignore[arg-type]
    return kb.recall(query)


def test_tiers_rank_same_problem_same_gpu_then_similar_and_same_arch_then_general(tmp_path: Path) -> None:
    with fixture_db(tmp_path / "m.sqlite") as kb:
        found = _recall(kb, budget_tokens=5000)
    tiers = [i.tier for i in found.items]
    assert tiers == sorted(tiers) and tiers[0] == 1 and 2 in tiers and 3 in tiers
    first = found.items[0]
    assert first.kind == "kernel" and "1.80x vs compile" in first.text and "float4 + grid-stride" in first.text
    assert "same problem (level1/1_relu) on this machine (H100 SXM (Hopper))" in first.why
    assert found.items[1].kind == "kernel" and "1.20x" in found.items[1].text  # the second-best kernel next
    failures = next(i for i in found.items if i.kind == "failures")
    assert failures.tier == 1 and "2 candidate(s)" in failures.text and "torch_fallback" in failures.text

    text = found.text()
    # Same problem on another Hopper GPU, and the same fusion pattern (leaky relu), in tier 2 with why.
    assert "the PCIe part has less bandwidth" in text
    assert any("same problem on H100 PCIe, the same architecture (Hopper)" in i.why for i in found.items)
    leaky = next(i for i in found.items if "leaky" in i.why)
    assert leaky.tier == 2 and "same fusion pattern: elementwise" in leaky.why
    # Another architecture ranks below the same one; a matmul is not like a relu; the CPU is another device.
    arch_rank = next(n for n, i in enumerate(found.items) if "H100 PCIe" in i.why)
    ampere_rank = next(n for n, i in enumerate(found.items) if "A100" in i.why)
    assert arch_rank < ampere_rank and "another architecture" in found.items[ampere_rank].why
    assert "tiling in shared memory" not in text and "OpenMP" not in text
    # General lessons: CUDA or any device, about this problem's ops (or none); not the CPU's, not softmax's.
    general = [i for i in found.items if i.tier == 3]
    assert general and all(i.why.startswith("general lesson") for i in general)
    assert any("elementwise" in i.why for i in general)
    assert "exp overflows" not in text and "OpenMP threads" not in text and "source:" in general[0].text
    assert all(i.why for i in found.items)


def test_a_lesson_shows_once_even_when_several_entries_carry_it(tmp_path: Path) -> None:
    with fixture_db(tmp_path / "m.sqlite") as kb:
        kb.record(entry(RELU, H100, speed=1.0, lesson="One pass with float4 is the whole game "))
        text = _recall(kb, budget_tokens=5000).text()
    assert text.lower().count("one pass with float4 is the whole game") == 1


def test_the_budget_keeps_the_best_ranked_items_and_counts_the_rest(tmp_path: Path) -> None:
    with fixture_db(tmp_path / "m.sqlite") as kb:
        everything = _recall(kb, budget_tokens=5000)
        small = _recall(kb, budget_tokens=200)
        none = _recall(kb, budget_tokens=10)
    assert 0 < len(small.items) < len(everything.items)
    assert small.items == everything.items[: len(small.items)]
    assert small.left_out == len(everything.items) - len(small.items) + everything.left_out
    assert small.tokens <= 200 and "left out for the 200-token budget" in small.text()
    assert none.items == () and "none fits the 10-token budget" in none.text()


def test_best_is_the_fastest_current_kernel_on_this_machine_and_backend(tmp_path: Path) -> None:
    with fixture_db(tmp_path / "m.sqlite") as kb:
        best = _recall(kb).best
        assert best is not None and best.speed_compile is not None and best.speed_compile.ratio == 1.8
        assert _recall(kb, exclude_run=best.run_id).best.speed_compile.ratio == 1.2  # type: ignore[union-attr]
        # The same source judged again later and no longer correct: memory stops offering it.
        kb.record(entry(RELU, H100, "incorrect", reason="output_mismatch", source=best.source, created_at="2026-02-01"))
        assert _recall(kb).best.speed_compile.ratio == 1.2  # type: ignore[union-attr]
        # Stale on the H100 only: the same source on another machine is judged there on its own record.
        assert kb.recall(RecallQuery(problem=RELU, machine=H100_PCIE, backend="cuda")).best is not None
        triton = RecallQuery(problem=RELU, machine=H100, backend="triton")
        assert kb.recall(triton).best is None  # only a kernel of the run's backend is a starting point
        cpu = kb.recall(RecallQuery(problem=RELU, machine=CPU, backend="cpp")).best
        assert cpu is not None and cpu.machine == "AMD EPYC"


def test_an_empty_memory_recalls_only_general_lessons(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "m.sqlite") as kb:
        found = kb.recall(RecallQuery(problem=MATMUL, machine=H100, backend="cuda", budget_tokens=4000))
    assert found.best is None and found.items and all(i.tier == 3 for i in found.items)
    assert any("TF32" in i.text for i in found.items)  # the seed's matmul lessons apply to a matmul on a GPU


def test_signatures_of_built_in_problems_find_similar_ones() -> None:
    relu, leaky = signature_of(resolve_problem("relu")), signature_of(resolve_problem("leaky_relu"))
    gemm_relu = signature_of(resolve_problem("level2/1_gemm_bias_relu"))
    gemm_gelu = signature_of(resolve_problem("level2/2_gemm_bias_gelu"))
    assert relu.method == "traced" and relu.ops == {"relu": 1} and relu.inputs == ["float32[16384, 12288]"]
    assert gemm_relu.ops == {"matmul": 1, "relu": 1} and gemm_relu.pattern == ["matmul", "elementwise"]
    assert relu.similarity(leaky) >= 0.5 and gemm_relu.similarity(gemm_gelu) >= 0.5
    assert relu.similarity(gemm_relu) < 0.5  # a problem with a matmul is not like one without


def test_a_reference_that_cannot_run_on_meta_tensors_is_read_statically(tmp_path: Path) -> None:
    source = (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.w = torch.randn(8, 8)\n\n"
        "    def forward(self, x):\n        scale = float(x.abs().max().item())  # data-dependent: no meta run\n"
        "        return F.gelu(x @ self.w).sum(dim=-1) * scale\n\n"
        "def get_inputs():\n    return [torch.randn(4, 8)]\n\ndef get_init_inputs():\n    return []\n"
    )
    path = tmp_path / "cpu_weights.py"
    path.write_text(source)
    signature = signature_of(resolve_problem(str(path)))
    assert signature.method == "static" and "tracing failed" in signature.note
    assert set(signature.ops) == {"abs", "max", "matmul", "gelu", "sum", "mul"}
    assert signature.pattern == ["elementwise", "reduction", "matmul", "elementwise", "reduction", "elementwise"]
    assert static_signature("def broken(:\n").method == "none"


def test_gpus_are_keyed_by_their_table_name_and_architecture() -> None:
    assert gpu_machine("NVIDIA H100 80GB HBM3", "9.0") == Machine(device="cuda", name="H100 SXM", arch="Hopper")
    assert gpu_machine("Mystery Accelerator 9000", "8.9") == Machine(
        device="cuda", name="Mystery Accelerator 9000", arch="sm_89"
    )
