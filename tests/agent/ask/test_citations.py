"""The citation checker of `kernelwright ask`: correct citations pass (in any time or size unit,
rounded as written), wrong values, units, metrics and kernels are each marked. Synthetic reports
with known values: no fixtures, no ncu."""

from __future__ import annotations

import pytest

from kernelwright.agent.ask import check_citations, from_reports
from kernelwright.agent.ask.citations import mark
from kernelwright.profiler import Metric, NcuKernel, NcuReport


def kernel(index: int, name: str, duration_ns: float, **extra: Metric) -> NcuKernel:
    metrics = {
        "gpu__time_duration.sum": Metric(value=duration_ns, unit="nsecond"),
        "dram__bytes_read.sum": Metric(value=268_435_456.0, unit="byte"),
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": Metric(value=83.4372, unit="%"),
        "launch__registers_per_thread": Metric(value=16.0, unit="register/thread"),
        "device__attribute_display_name": Metric(value="NVIDIA H100 80GB HBM3", unit=""),
        **extra,
    }
    return NcuKernel(index=index, name=name, metrics=metrics)


@pytest.fixture
def pair():  # type: ignore[no-untyped-def]
    base = NcuReport(kernels=[kernel(0, "ref_kernel", 132_480.0), kernel(1, "other", 5_000.0)])
    cand = NcuReport(kernels=[kernel(0, "cand_kernel", 61_000.0)])
    return from_reports(base, cand)


CORRECT = [
    "[[gpu__time_duration.sum = 132480 nsecond @ baseline:0]]",
    "[[gpu__time_duration.sum = 132.48 usecond @ baseline]]",
    "[[gpu__time_duration.sum = 132.5 us]]",  # no ref: the first report's kernel in focus
    "[[gpu__time_duration.sum = 0.1325 ms @ baseline:0]]",
    "[[gpu__time_duration.sum = 61 us @ candidate]]",
    "[[gpu__time_duration.sum = 5 us @ 1]]",  # a bare index: the first report
    "[[dram__bytes_read.sum = 268435456 byte @ candidate:0]]",
    "[[dram__bytes_read.sum = 268,435,456 bytes @ candidate:0]]",
    "[[dram__bytes_read.sum = 268.4 MB @ candidate:0]]",
    "[[dram__bytes_read.sum = 2.684e8 B]]",
    "[[sm__throughput.avg.pct_of_peak_sustained_elapsed = 83.4 %]]",
    "[[sm__throughput.avg.pct_of_peak_sustained_elapsed = 83.44%]]",
    "[[launch__registers_per_thread = 16 registers/thread]]",
    '[[device__attribute_display_name = "NVIDIA H100 80GB HBM3"]]',
]


@pytest.mark.parametrize("text", CORRECT)
def test_correct_citations_pass(pair, text: str) -> None:  # type: ignore[no-untyped-def]
    [c] = check_citations(f"The answer: {text}.", pair)
    assert c.ok, (c.status, c.note)
    assert c.ref in ("baseline:0", "baseline:1", "candidate:0")


WRONG = [
    ("[[gpu__time_duration.sum = 150 us @ baseline]]", "value_mismatch", "132480 nsecond (132.5 us)"),
    ("[[gpu__time_duration.sum = 132.48 ms]]", "value_mismatch", "the report says"),
    ("[[gpu__time_duration.sum = 132480 @ baseline]]", "unit_mismatch", "nsecond"),
    ("[[sm__throughput.avg.pct_of_peak_sustained_elapsed = 83.0 %]]", "value_mismatch", "83.4372 %"),
    ("[[sm__throughput.avg.pct_of_peak_sustained_elapsed = 83.4 byte]]", "unit_mismatch", "%"),
    ("[[dram__bytes_read.sum = 300 MB @ candidate:0]]", "value_mismatch", "(268.4 MB)"),
    ("[[dram__bytes_write.sum = 1 byte]]", "unknown_metric", "has no value for dram__bytes_write.sum"),
    ("[[gpu__time_duration.sum = 61 us @ candidate:4]]", "unknown_kernel", "no kernel 4"),
    ("[[gpu__time_duration.sum = 61 us @ report]]", "unknown_kernel", "no report 'report'"),
    ('[[device__attribute_display_name = "NVIDIA A100"]]', "value_mismatch", "H100"),
    ("[[the duration is long]]", "malformed", "[[NAME = VALUE UNIT @ REF]]"),
    ("[[gpu__time_duration.sum = fast]]", "malformed", ""),
]


@pytest.mark.parametrize(("text", "status", "note"), WRONG)
def test_wrong_citations_are_marked(pair, text: str, status: str, note: str) -> None:  # type: ignore[no-untyped-def]
    answer = f"Before {text} after."
    [c] = check_citations(answer, pair)
    assert c.status == status and note in c.note
    marked = mark(answer, [c])
    assert marked.startswith(f"Before {text} [✗ {status.replace('_', ' ')}") and marked.endswith(" after.")


def test_only_the_wrong_ones_are_marked_in_order(pair) -> None:  # type: ignore[no-untyped-def]
    answer = (
        "A [[gpu__time_duration.sum = 132.48 usecond @ baseline]] B [[gpu__time_duration.sum = 99 us @ candidate]] "
        "C [[dram__bytes_read.sum = 268435456 byte @ candidate:0]]. Prose [brackets] and [[ ]] alone are no citations."
    )
    found = check_citations(answer, pair)
    assert [c.status for c in found[:3]] == ["ok", "value_mismatch", "ok"]
    assert len(found) == 4 and found[3].status == "malformed"
    marked = mark(answer, found)
    assert marked.count("[✗") == 2
    assert "@ candidate]] [✗ value mismatch: the report says 61000 nsecond (61 us)] C" in marked
    assert check_citations("no citations here", pair) == []
