"""The GPU spec table, name matching, structured answers, ridge points, and live detection."""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from pydantic import ValidationError

from kernelwright.errors import EnvironmentProblem, UsageError
from kernelwright.hardware_specs import (
    GpuSpec,
    detect,
    detect_cpu,
    field_paths,
    get_spec,
    has_feature,
    known_gpus,
    load_table,
    lookup,
    peaks,
    query_specs,
    ridge_points,
    spec_value,
)
from kernelwright.hardware_specs import detection as detect_module
from kernelwright.hardware_specs.detect_gpu import merge
from kernelwright.hardware_specs.live_gpu import attach_clocks, query_nvidia_smi, read_torch_gpu
from kernelwright.hardware_specs.table import parse_table

EXPECTED = {
    "A100 40GB SXM", "A100 80GB SXM", "H100 SXM", "H100 PCIe", "H200 SXM",
    "L40S", "L4", "RTX 4090", "RTX 3090", "B200", "MI300X",
}  # fmt: skip

MINIMAL = """
references:
  - &ds {title: Some datasheet, url: https://example.invalid/ds.pdf}
gpus:
  - name: Test GPU
    vendor: nvidia
    sms: 10
    memory: {bandwidth_gbs: 1000}
    cuda_core_tflops: {fp32: 10}
    sources: {sms: *ds, memory: *ds, cuda_core_tflops: *ds}
"""


# --- the table -------------------------------------------------------------------------------------


def test_table_has_every_required_gpu() -> None:
    assert set(known_gpus()) == EXPECTED


def test_every_non_null_figure_has_a_traceable_source() -> None:
    for spec in load_table().gpus:
        figures = list(spec.figures())
        assert figures, spec.name
        for path, _ in figures:
            source = spec.source_for(path)
            assert source is not None, f"{spec.name}.{path} has no source"
            assert source.title and (source.url or source.note), f"{spec.name}.{path}"
            assert source.url is None or source.url.startswith("https://")


def test_amd_entry_has_no_cuda_only_figures() -> None:
    mi300x = get_spec("mi300x")
    assert mi300x.vendor == "amd"
    assert mi300x.compute_capability is None
    assert mi300x.features.wgmma is None and mi300x.features.tma is None
    assert mi300x.limits.warp_size == 64


def test_figures_agree_with_the_project_facts_table() -> None:
    h100, h200, a100 = get_spec("H100 SXM"), get_spec("H200 SXM"), get_spec("A100 80GB SXM")
    assert (h100.compute_capability, h100.sms, h100.memory.bandwidth_gbs, h100.cache.l2_mb) == ("9.0", 132, 3350, 50)
    assert (h100.tensor_core_tflops.bf16, h100.tensor_core_tflops.fp8) == (989, 1979)
    assert h200.memory.bandwidth_gbs == 4800 and h200.cache.l2_mb is None  # unsourced: left empty
    assert (a100.sms, a100.cuda_core_tflops.fp32, a100.tensor_core_tflops.fp8) == (108, 19.5, None)
    assert get_spec("b200").features.tcgen05 is True and get_spec("b200").features.wgmma is False


def test_schema_rejects_unknown_keys() -> None:
    with pytest.raises(ValidationError, match="clock_speed"):
        parse_table(MINIMAL.replace("sms: 10", "sms: 10\n    clock_speed: 5"))
    with pytest.raises(ValidationError):
        parse_table(MINIMAL + "extra_top_level: 1\n")
    with pytest.raises(ValidationError, match="unknown fields"):
        parse_table(MINIMAL.replace("sms: *ds,", "sms: *ds, smz: *ds,"))


def test_schema_rejects_a_figure_without_a_source() -> None:
    assert parse_table(MINIMAL).gpus[0].sms == 10
    with pytest.raises(ValidationError, match=r"without a source: \['sms'\]"):
        parse_table(MINIMAL.replace("sources: {sms: *ds, ", "sources: {"))


def test_schema_rejects_duplicate_names() -> None:
    doubled = MINIMAL + MINIMAL.split("gpus:\n")[1].replace("Test GPU", "Other GPU\n    aliases: [test-gpu]")
    with pytest.raises(ValidationError, match="names both"):
        parse_table(doubled)


# --- lookups ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("H100 SXM", "H100 SXM"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),  # what torch reports
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("nvidia a100-sxm4-40gb", "A100 40GB SXM"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("rtx-3090", "RTX 3090"),
        ("AMD Instinct MI300X", "MI300X"),
        ("l40s", "L40S"),
    ],
)
def test_lookup_by_name_or_alias(query: str, expected: str) -> None:
    assert get_spec(query).name == expected


def test_short_family_name_picks_the_main_variant_with_a_note() -> None:
    found = lookup("h100")
    assert found.spec.name == "H100 SXM"
    assert found.note is not None and "H100 PCIe" in found.note


def test_partial_name_that_picks_one_entry_is_accepted() -> None:
    found = lookup("h100 pcie 80gb")
    assert found.spec.name == "H100 PCIe"


def test_unknown_gpu_is_a_usage_error_naming_the_choices() -> None:
    with pytest.raises(UsageError) as info:
        get_spec("H100 NVL")  # a real GPU, but not in the table: unknown, never a wrong guess
    assert info.value.exit_code == 2
    assert "unknown GPU" in info.value.message and "H100 SXM" in (info.value.hint or "")


def test_ambiguous_gpu_is_a_usage_error_listing_the_matches() -> None:
    with pytest.raises(UsageError, match="ambiguous") as info:
        get_spec("100")
    assert "A100 40GB SXM" in info.value.message and "H100 PCIe" in info.value.message


# --- structured answers -----------------------------------------------------------------------------


def test_spec_value_gives_value_unit_and_source() -> None:
    answer = spec_value("h100", "memory_bandwidth")
    assert (answer.gpu, answer.field, answer.value, answer.unit) == ("H100 SXM", "memory.bandwidth_gbs", 3350, "GB/s")
    assert answer.source is not None and "H100" in answer.source.title
    assert "H100 PCIe" in (answer.note or "")
    assert spec_value("a100 80gb sxm", "l2").unit == "MB"
    assert spec_value("H100 SXM", "int8").unit == "TOP/s"
    assert spec_value("mi300x", "sms").unit == "CUs"


def test_spec_value_of_an_empty_figure_says_so() -> None:
    answer = spec_value("H200 SXM", "cache.l2_mb")
    assert answer.value is None and answer.source is None
    assert "not in the table" in (answer.note or "")


def test_unknown_field_is_a_usage_error_naming_the_fields() -> None:
    with pytest.raises(UsageError, match="unknown spec field") as info:
        spec_value("h100", "flux_capacitor")
    assert "memory.bandwidth_gbs" in (info.value.hint or "")


def test_has_feature() -> None:
    assert has_feature("h100", "wgmma").value is True
    assert has_feature("b200", "wgmma").value is False
    assert has_feature("b200", "tcgen05").value is True
    assert has_feature("A100 80GB SXM", "cp.async").value is True
    assert has_feature("A100 80GB SXM", "tma").value is False
    assert has_feature("RTX 4090", "fp8").value is True
    unknown = has_feature("mi300x", "tma")
    assert unknown.value is None and "unknown" in (unknown.note or "")
    with pytest.raises(UsageError, match="unknown feature"):
        has_feature("h100", "time_travel")


def test_query_specs_dispatches_features_and_fields() -> None:
    assert query_specs("wgmma", "h200").field == "features.wgmma"
    assert query_specs("bf16", "h200").field == "tensor_core_tflops.bf16"  # the throughput, not the flag
    assert query_specs("features.bf16", "h200").value is True
    assert query_specs("ridge.tensor_fp8", "H200 SXM").value == pytest.approx(1979e12 / 4800e9)


def test_query_specs_without_gpu_on_a_machine_without_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect_module, "detected_spec", lambda: None)
    with pytest.raises(EnvironmentProblem, match="no GPU"):
        query_specs("l2")


# --- peaks and ridge points -------------------------------------------------------------------------


def test_ridge_points_are_peak_flops_over_peak_bandwidth() -> None:
    h100 = peaks("H100 SXM")
    assert h100.dram_bytes_per_s == pytest.approx(3.35e12)
    assert h100.tensor_core_flops["bf16"] == pytest.approx(989e12)
    assert h100.cuda_core_flops["fp32"] == pytest.approx(67e12)
    points = h100.ridge_points()
    assert points["tensor_bf16"] == pytest.approx(989 / 3.35)  # ~295 FLOP/byte
    assert points["cuda_fp32"] == pytest.approx(20.0)
    assert "tensor_fp8" in points and "tensor_fp4" not in points  # null figures give no ridge point
    assert spec_value("h100", "ridge.tensor_bf16").unit == "FLOP/byte"


def test_ridge_points_need_a_bandwidth() -> None:
    spec = GpuSpec.model_validate(
        {
            "name": "x",
            "vendor": "nvidia",
            "cuda_core_tflops": {"fp32": 1.0},
            "sources": {"cuda_core_tflops": {"title": "t", "note": "n"}},
        }
    )
    assert ridge_points(spec) == {}
    assert peaks(spec).dram_bytes_per_s is None


def test_every_field_path_has_a_value_accessor() -> None:
    spec = get_spec("H100 SXM")
    for path in field_paths():
        spec.value(path)  # raises for a path the schema does not have


# --- live detection, with fakes ---------------------------------------------------------------------


def _props(**overrides: object) -> SimpleNamespace:
    base = {
        "name": "NVIDIA H100 80GB HBM3",
        "major": 9,
        "minor": 0,
        "multi_processor_count": 132,
        "total_memory": 85_031_714_816,
        "L2_cache_size": 50 * 2**20,
        "shared_memory_per_block_optin": 227 * 1024,
        "shared_memory_per_multiprocessor": 228 * 1024,
        "regs_per_multiprocessor": 65536,
        "max_threads_per_multi_processor": 2048,
        "warp_size": 32,
        "uuid": "1234abcd-0000-0000-0000-000000000000",
    }
    return SimpleNamespace(**(base | overrides))


def test_merge_live_over_table_records_provenance() -> None:
    live = read_torch_gpu(0, _props())
    live = attach_clocks(
        [live],
        [
            {
                "uuid": "GPU-1234abcd-0000-0000-0000-000000000000",
                "clock_sm": 345.0,
                "clock_sm_max": 1980.0,
                "clock_mem_max": 2619.0,
            }
        ],
    )[0]
    gpu = merge(live)
    assert gpu.table_entry == "H100 SXM"
    assert gpu.spec.sms == 132 and gpu.provenance["sms"] == "live (matches table)"
    assert gpu.spec.clocks.boost_mhz == 1980 and gpu.provenance["clocks.boost_mhz"] == "live"
    assert gpu.spec.source_for("clocks.boost_mhz").title.startswith("live: nvidia-smi")  # type: ignore[union-attr]
    assert gpu.provenance["memory.bandwidth_gbs"] == "table"
    assert gpu.ridge_points["tensor_bf16"] == pytest.approx(989 / 3.35)


def test_merge_live_fills_and_overrides_table_figures() -> None:
    h200 = merge(read_torch_gpu(0, _props(name="NVIDIA H200", L2_cache_size=60 * 2**20)))
    assert h200.table_entry == "H200 SXM"
    assert h200.spec.cache.l2_mb == 60 and h200.provenance["cache.l2_mb"] == "live"
    odd = merge(read_torch_gpu(0, _props(multi_processor_count=120)))
    assert odd.spec.sms == 120 and odd.provenance["sms"] == "live (table said 132)"


def test_unknown_gpu_keeps_its_live_properties() -> None:
    gpu = merge(read_torch_gpu(0, _props(name="NVIDIA H100 NVL", memory_clock_rate=2_619_000, memory_bus_width=6144)))
    assert gpu.table_entry is None
    assert any("not in the spec table" in n for n in gpu.notes)
    assert gpu.spec.sms == 132 and gpu.spec.cache.l2_mb == 50
    assert gpu.spec.memory.bandwidth_gbs == pytest.approx(2 * 2619e6 * 768 / 1e9, rel=1e-3)
    assert gpu.spec.memory.size_gb == pytest.approx(79.19, abs=0.01)


def test_nvidia_smi_missing_is_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert query_nvidia_smi() == (None, [])


def test_nvidia_smi_output_is_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\necho '0, GPU-abc, 580.159.04, 345, 1980, 3201'\necho '1, GPU-def, 580.159.04, [N/A], 1980, 3201'\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    driver, rows = query_nvidia_smi()
    assert driver == "580.159.04"
    assert [r["uuid"] for r in rows] == ["GPU-abc", "GPU-def"]
    assert rows[0]["clock_sm_max"] == 1980 and rows[1]["clock_sm"] is None


# --- CPU description --------------------------------------------------------------------------------


def test_cpu_from_fake_proc_and_sys(tmp_path: Path) -> None:
    cpuinfo = textwrap.dedent(
        """\
        processor\t: 0
        model name\t: Fake Xeon
        physical id\t: 0
        core id\t: 0
        flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw amx_tile amx_bf16

        processor\t: 1
        model name\t: Fake Xeon
        physical id\t: 0
        core id\t: 0
        flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw amx_tile amx_bf16

        processor\t: 2
        model name\t: Fake Xeon
        physical id\t: 0
        core id\t: 1
        flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw amx_tile amx_bf16
        """
    )
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(cpuinfo)
    (tmp_path / "proc/meminfo").write_text("MemTotal:       25165824 kB\n")
    index = tmp_path / "sys/devices/system/cpu/cpu0/cache/index3"
    index.mkdir(parents=True)
    for name, value in {"level": "3", "type": "Unified", "size": "32M", "shared_cpu_list": "0-2"}.items():
        (index / name).write_text(value + "\n")
    cpu = detect_cpu(tmp_path)
    assert cpu.model == "Fake Xeon"
    assert (cpu.physical_cores, cpu.logical_cores) == (2, 3)
    assert cpu.isa_extensions == ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "amx_tile", "amx_bf16"]
    assert [(c.level, c.type, c.size_kb, c.shared_by_cpus) for c in cpu.caches] == [(3, "Unified", 32768, 3)]
    assert cpu.memory_total_gib == 24.0


def test_cpu_arm_features_are_named(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nFeatures\t: fp asimd asimddp sve sve2 i8mm bf16\n")
    assert detect_cpu(tmp_path).isa_extensions == ["neon", "neon-dotprod", "i8mm", "bf16", "sve", "sve2"]


def test_cpu_with_nothing_readable_does_not_crash(tmp_path: Path) -> None:
    cpu = detect_cpu(tmp_path / "missing")
    assert cpu.caches == [] and cpu.logical_cores == os.cpu_count()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_detect_without_gpu_describes_the_cpu() -> None:
    info = detect()
    assert info.kind == "cpu" and info.gpus == []
    assert info.cpu.logical_cores is not None and info.cpu.logical_cores > 0
    assert info.cpu.physical_cores is None or info.cpu.physical_cores > 0
    assert info.torch_version and any("CPU" in n for n in info.notes)


@pytest.mark.gpu
def test_live_detection_merges_over_the_table_on_h100_or_h200() -> None:
    info = detect()
    assert info.kind == "gpu" and info.gpus
    gpu = info.gpus[0]
    if not any(tag in gpu.live.name for tag in ("H100", "H200")):
        pytest.skip(f"expects an H100 or H200, found {gpu.live.name}")
    assert gpu.table_entry in ("H100 SXM", "H200 SXM")
    assert gpu.spec.sms == 132
    assert gpu.spec.cache.l2_mb is not None and gpu.spec.cache.l2_mb > 0
    assert gpu.provenance["sms"].startswith("live")
    assert gpu.ridge_points["tensor_bf16"] > 100
    assert info.cuda_runtime
