"""The CSV fallback reader on hand-written exports shaped like `ncu --import X --csv`."""

from __future__ import annotations

from kernelwright.profiler import build_digest
from kernelwright.profiler.csv_fallback import from_csv_exports, parse_details_rules, parse_raw_csv
from kernelwright.profiler.report import normalize

RAW = """==PROF== Connected to process
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","dram__bytes_read.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","launch__registers_per_thread","device__attribute_display_name"
"","","","","","","","","","","","usecond","Mbyte","%","%","register/thread",""
"0","123","python3","h","kw_relu_kernel(const float *, float *, long)","1","7","(256, 1, 1)","(786432, 1, 1)","0","9.0","1,234.50","805.31","12.5","93.1","16","NVIDIA H100 80GB HBM3"
"1","123","python3","h","other_kernel","1","7","(128, 1, 1)","(4, 2, 1)","0","9.0","3.20","n/a","1.0","2.0","32","NVIDIA H100 80GB HBM3"
"""

DETAILS = """"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"
"0","123","python3","h","kw_relu_kernel","1","7","(256, 1, 1)","(786432, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Duration","us","1,234.50","","","","",""
"0","123","python3","h","kw_relu_kernel","1","7","(256, 1, 1)","(786432, 1, 1)","0","9.0","GPU Speed Of Light Throughput","","","","SOLBottleneck","OPT","Memory is more heavily utilized than Compute.","global","12.5"
"0","123","python3","h","kw_relu_kernel","1","7","(256, 1, 1)","(786432, 1, 1)","0","9.0","Occupancy","","","","AchievedOccupancy","OPT","Achieved occupancy is low.","local","30"
"1","123","python3","h","other_kernel","1","7","(128, 1, 1)","(4, 2, 1)","0","9.0","Launch Statistics","","","","LaunchConfiguration","WRN","Grid is too small.","global","80"
"""


def test_raw_page_parses_kernels_units_and_dims() -> None:
    kernels = parse_raw_csv(RAW)
    assert [k.name for k in kernels] == ["kw_relu_kernel(const float *, float *, long)", "other_kernel"]
    k = kernels[0]
    assert k.launch_id == 0 and k.block == (256, 1, 1) and k.grid == (786432, 1, 1)
    assert k.value("gpu__time_duration.sum") == 1234.5 * 1e3  # usecond -> ns
    assert k.value("dram__bytes_read.sum") == 805.31e6  # Mbyte -> bytes
    assert k.text("device__attribute_display_name") == "NVIDIA H100 80GB HBM3"
    assert kernels[1].value("dram__bytes_read.sum") is None  # n/a
    assert kernels[1].grid == (4, 2, 1)


def test_details_page_gives_rules_per_launch() -> None:
    rules = parse_details_rules(DETAILS)
    assert sorted(rules) == [0, 1]
    assert [r.rule for r in rules[0]] == ["SOLBottleneck", "AchievedOccupancy"]
    assert rules[0][1].speedup_pct == 30.0 and rules[0][1].speedup_type == "local"
    assert rules[1][0].type == "WARNING" and rules[0][0].type == "OPTIMIZATION"


def test_report_from_exports_digests() -> None:
    report = from_csv_exports(RAW, DETAILS, path="x.ncu-rep")
    assert report.source == "csv" and len(report.kernels) == 2
    digest = build_digest(report)
    assert digest is not None and digest.kernel.startswith("kw_relu_kernel")
    assert digest.classification.kind.value == "memory-bound"
    assert digest.findings and digest.findings[0].title == "AchievedOccupancy"


def test_normalize_units() -> None:
    assert normalize(2.0, "msecond") == (2e6, "nsecond")
    assert normalize(1.5, "Gbyte/second") == (1.5e9, "byte/second")
    assert normalize(3.0, "%") == (3.0, "%")
    assert normalize("x", "usecond") == ("x", "usecond")
