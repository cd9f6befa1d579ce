"""A `load_inline` CUDA build's `.cu` (#29): the light `torch/extension.h` only where nothing in the
`.cu` can tell it from torch's (and torch's header again on any failure), and nvcc's host and device
front ends at once, falling back to nvcc's own command on anything unexpected. Neither may fail a
build that the plain `build.ninja` would pass; the build record says what ran."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from kernelwright.harness.building import headers, light_header, ninja_runs, nvcc_split, op_headers
from kernelwright.harness.building.broker import BuildBroker

DATA = Path(__file__).parents[1] / "data" / "nvcc"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX shell tools")

KERNEL = """\
#include <torch/types.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <torch/extension.h>
#include <cuda_runtime.h>

// relu: a comment may say py:: or #ifdef
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) { y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
}

torch::Tensor relu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor: torch::nn is not needed");
    auto y = torch::empty_like(x);
    relu_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""


# -- when the light header is used ----------------------------------------------------------------


def test_a_kernelbench_kernel_gets_the_light_header() -> None:
    assert light_header.light_reason(KERNEL) == ""


@pytest.mark.parametrize(
    ("added", "reason"),
    [
        ("#ifdef PYBIND11_VERSION_MAJOR\nint a;\n#endif", "#ifdef"),
        ("#if 1\nint a;\n#endif", "#if"),
        ("  #  ifndef X\n#endif", "#ifndef"),
        ("#\\\nif 1\n#endif", "#if"),  # a line splice between # and if
        ("/* hidden */ #if 1\n#endif", "#if"),
        ("%:if 1\n%:endif", "digraph"),
        ("??=if 1", "trigraph"),
        ("constexpr bool b = __has_include(<pybind11/pybind11.h>);", "__has_include"),
        ("#define HAS defined(X)", "defined"),
        ("py::object o;", "py::"),
        ("pybind11::object o;", "pybind11"),
        ("PyObject* p;", "PyObject"),
        ("torch::nn::Linear lin(1, 2);", "nn::"),
        ("torch::optim::SGD* o;", "optim::"),
        ("auto g = torch::NoGradGuard();", "torch::NoGradGuard"),
        ("torch::cuda::synchronize();", "torch::cuda"),
        ("auto t = torch::fft::fft(x);", "fft::"),
        ("template <class T> using probe = decltype(T::x);", "decltype"),
        ("constexpr int c = __COUNTER__;", "__COUNTER__"),
        ('#include "mine.h"', "#include"),
        ("#include </tmp/mine.h>", "#include"),
        ("#define CAT(a, b) a##b", "##"),
        ('const char* s = R"(x)";', "raw string"),
        ("#include <torch/torch.h>", "torch/torch.h"),
    ],
)
def test_anything_that_could_tell_the_headers_apart_keeps_torch_s(added: str, reason: str) -> None:
    why = light_header.light_reason(KERNEL + "\n" + added + "\n")
    assert why and reason in why, why


def test_names_in_comments_and_strings_do_not_count_but_a_cu_without_the_header_is_left_alone() -> None:
    text = KERNEL + '\n// torch::nn::Linear, #if\nconst char* s = "py::object #ifdef";\n'
    assert light_header.light_reason(text) == ""
    assert "does not include" in light_header.light_reason(KERNEL.replace("#include <torch/extension.h>", ""))


NINJA = """\
cxx = c++
nvcc = /usr/local/cuda/bin/nvcc
cflags = -DTORCH_EXTENSION_NAME=kw -isystem /t/include -fPIC -std=c++20
post_cflags =
cuda_cflags = -DTORCH_EXTENSION_NAME=kw -isystem /t/include --compiler-options '-fPIC' -std=c++20
cuda_post_cflags =

rule compile
  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out $post_cflags
  depfile = $out.d
  deps = gcc

rule cuda_compile
  depfile = $out.d
  deps = gcc
  command = $nvcc -MD -MF $out.d $cuda_cflags -c $in -o $out $cuda_post_cflags

build main.o: compile /b/main.cpp
build cuda.cuda.o: cuda_compile /b/cuda.cu
"""


def test_the_light_header_goes_first_on_the_cu_s_command_only() -> None:
    offered, why = light_header.offer(NINJA, KERNEL)
    assert offered is not None, why
    changed = [(a, b) for a, b in zip(NINJA.splitlines(), offered.splitlines(), strict=True) if a != b]
    assert changed == [
        (NINJA.splitlines()[4], f"cuda_cflags = -isystem {light_header.LIGHT_INCLUDE} " + NINJA.splitlines()[4][14:])
    ]
    assert (light_header.LIGHT_INCLUDE / "torch" / "extension.h").is_file()  # shipped with the package
    assert light_header.offer(NINJA, KERNEL + "#ifdef X\n#endif\n")[0] is None


def test_the_split_wraps_the_cu_s_command_only() -> None:
    offered, why = ninja_runs.offer_split(NINJA)
    assert offered is not None, why
    [line] = [x for x in offered.splitlines() if "nvcc_split.py" in x]
    assert line.startswith("  command = ") and line.endswith(
        "--record $out.split.json -- $nvcc -MD -MF $out.d $cuda_cflags -c $in -o $out $cuda_post_cflags"
    )
    assert "compile\n  command = $cxx -MMD" in offered
    assert ninja_runs.offer_split(NINJA.replace("rule cuda_compile", "rule other"))[0] is None


def test_a_cuda_build_s_main_cpp_may_share_the_precompiled_header() -> None:
    spec = {"name": "kw", "cpp_sources": "torch::Tensor f(torch::Tensor x);", "cuda_sources": KERNEL}
    inputs, why = headers.pch_inputs({"kind": "inline", "spec": spec, "with_cuda": True})
    assert inputs is not None and inputs["with_cuda"] is True, why


# -- nvcc's plan -----------------------------------------------------------------------------------

SCRATCH = Path("/tmp/kw-nvcc-fixture")


def test_nvcc_s_recorded_plan_splits_into_a_host_and_a_device_chain() -> None:
    plan = nvcc_split.parse_dryrun((DATA / "dryrun_torch_cu13.txt").read_text(), SCRATCH, "cuda.cuda.o", "x.d")
    assert [s.role for s in plan.host] == ["pp_host", "cudafe"]
    assert [s.role for s in plan.device] == ["pp_device", "cicc", "ptxas", "fatbinary"]
    assert [s.role for s in plan.final] == ["host_compile"]
    cudafe_id, cicc_id = plan.module_ids
    cicc = plan.device[1].argv
    assert cicc[0].endswith("/nvvm/bin/cicc")  # "$CICC_PATH/cicc", from the variable line
    assert "--gen_module_id_file" in cicc and cicc[cicc.index("--module_id_file_name") + 1] == cicc_id
    assert cudafe_id in plan.host[1].argv and cudafe_id != cicc_id
    pp_host = plan.host[0].argv
    assert pp_host[-7:-2] == ("-MD", "-MF", "x.d", "-MT", "cuda.cuda.o")  # nvcc's dependency file
    assert "PATH" in plan.env and "$" not in " ".join(a for s in plan.order for a in s.argv)


@pytest.mark.parametrize(
    "damage",
    [
        "#$ nvlink --arch=sm_90 a.o -o b.o",  # relocatable device code: not known here
        '#$ "$UNKNOWN/tool" x',
        "a line that is not a step",
        "drop cudafe",
        "drop host compile",
    ],
)
def test_a_plan_of_another_shape_is_refused(damage: str) -> None:
    text = (DATA / "dryrun_torch_cu13.txt").read_text()
    lines = text.splitlines()
    if damage == "drop cudafe":
        lines = [x for x in lines if not x.startswith("#$ cudafe++")]
    elif damage == "drop host compile":
        lines = lines[:-1]
    else:
        lines.insert(len(lines) - 1, damage)
    with pytest.raises(nvcc_split.Unrecognised):
        nvcc_split.parse_dryrun("\n".join(lines), SCRATCH, "cuda.cuda.o", None)


def test_dependency_flags_other_than_torch_s_are_refused() -> None:
    args, depfile = nvcc_split.strip_dependencies(["-MD", "-MF", "o.d", "-c", "a.cu", "-o", "o"])
    assert args == ["-c", "a.cu", "-o", "o"] and depfile == "o.d"
    for odd in (["-M"], ["-MD"], ["-MT", "x"], ["--generate-dependencies"]):
        with pytest.raises(nvcc_split.Unrecognised):
            nvcc_split.strip_dependencies([*odd, "-c", "a.cu", "-o", "o"])


# -- running it, with a fake toolchain (each tool a few lines of shell) ---------------------------

_VAL = 'val() { f=$1; shift; p=""; for a in "$@"; do [ "$p" = "$f" ] && echo "$a"; p="$a"; done; }\n'
TOOLS = {
    "nvcc": 'if [ "$1" = "-dryrun" ]; then sed "s#@T@#$TMPDIR#g; s#@B@#$FAKE_BIN#g" "$FAKE_PLAN"; exit 0; fi\n'
    'echo plain > "$(val -o "$@")"; echo "$*" >> "$FAKE_BIN/nvcc_ran"\n'
    'case "$*" in *light_include*) [ -n "$FAKE_NEEDS_FULL" ] && { echo "error: nn is not declared" >&2; exit 1; };; esac\n'
    'case "$*" in *kw_op_headers*) [ -n "$FAKE_NEEDS_ALL_OPS" ] && { echo "error: no member zeros" >&2; exit 1; };; esac\n'
    "exit ${FAKE_NVCC_STATUS:-0}",
    "gcc": 'case " $* " in *" -E "*) echo pp > "$(val -o "$@")"; d=$(val -MF "$@"); if [ -n "$d" ]; then echo "o: a.cu" > "$d"; fi;;\n'
    '*) echo "compiled" > "$(val -o "$@")";; esac',
    "cudafe++": '[ -n "$FAKE_CUDAFE_FAIL" ] && { echo "a.cu(3): error: expected a ;" >&2; exit 2; }\n'
    'if [ -n "$FAKE_CUDAFE_SLEEP" ]; then sleep "$FAKE_CUDAFE_SLEEP"; fi\n'
    'echo ID_A > "$(val --module_id_file_name "$@")"; echo host > "$(val --gen_c_file_name "$@")"',
    "cicc": '[ -n "$FAKE_CICC_FAIL" ] && { echo "cicc: unknown option" >&2; exit 3; }\n'
    'echo "${FAKE_CICC_ID:-ID_A}" > "$(val --module_id_file_name "$@")"; echo ptx > "$(val -o "$@")"',
    "ptxas": "exit 0",
    "fatbinary": "exit 0",
}
PLAN = """\
#$ _SPACE_=
#$ CICC_PATH=@B@
#$ PATH=@B@:/usr/bin:/bin
#$ SYSTEM_INCLUDES="-isystem" "/x/include"
#$ gcc -D__CUDA_ARCH__=900 -E -x c++ "a.cu" -o "@T@/tmpxft_1-7_a.cpp1.ii"
#$ gcc -E -x c++ "a.cu" -o "@T@/tmpxft_1-5_a.cpp4.ii"
#$ cudafe++ --gen_c_file_name "@T@/tmpxft_1-6_a.cudafe1.cpp" --gen_module_id_file --module_id_file_name "@T@/tmpxft_1-4_a.module_id" "@T@/tmpxft_1-5_a.cpp4.ii"
#$ "$CICC_PATH/cicc" -arch compute_90 --module_id_file_name "@T@/tmpxft_1-4_a.module_id" "@T@/tmpxft_1-7_a.cpp1.ii" -o "@T@/tmpxft_1-6_a.ptx"
#$ ptxas -arch=sm_90 "@T@/tmpxft_1-6_a.ptx" -o "@T@/tmpxft_1-8_a.cubin"
#$ fatbinary "--image3=kind=elf,sm=90,file=@T@/tmpxft_1-8_a.cubin" --embedded-fatbin="@T@/tmpxft_1-3_a.fatbin.c"
#$ rm @T@/tmpxft_1-3_a.fatbin
#$ gcc -c -x c++ -m64 "@T@/tmpxft_1-6_a.cudafe1.cpp" -o "a.o"
"""


@pytest.fixture
def fake_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in TOOLS.items():
        tool = bin_dir / name
        tool.write_text("#!/bin/sh\n" + _VAL + body + "\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "plan.txt").write_text(PLAN)
    monkeypatch.setenv("FAKE_BIN", str(bin_dir))
    monkeypatch.setenv("FAKE_PLAN", str(tmp_path / "plan.txt"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return bin_dir / "nvcc"


def _split(nvcc: Path, *args: str) -> tuple[int, dict[str, Any]]:
    record: dict[str, Any] = {}
    code = nvcc_split.compile_split([str(nvcc), *args, "-c", "a.cu", "-o", "a.o"], record)
    return code, record


def test_the_two_chains_run_and_the_host_compile_follows(
    fake_nvcc: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "plan.txt").write_text("nvcc warning : an old architecture\n" + PLAN)
    code, record = _split(fake_nvcc, "-MD", "-MF", "a.o.d")
    assert "nvcc warning : an old architecture" in capfd.readouterr().err  # as nvcc would print it
    assert code == 0 and record["path"] == "split", record
    assert Path("a.o").read_text().startswith("compiled") and not (fake_nvcc.parent / "nvcc_ran").exists()
    assert Path("a.o.d").read_text().startswith("o: a.cu")  # the dependency file ninja reads
    steps = [s["step"] for s in record["steps"]]
    assert sorted(steps) == sorted(["pp_host", "cudafe", "pp_device", "cicc", "ptxas", "fatbinary", "host_compile"])
    assert steps[-1] == "host_compile" and all(s["seconds"] >= 0 for s in record["steps"])
    assert not list(Path(os.environ["TMPDIR"]).glob("kw-nvcc-*"))  # its temporaries are gone


def test_module_ids_that_differ_run_nvcc_s_own_command(fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CICC_ID", "ID_B")
    code, record = _split(fake_nvcc)
    assert code == 0 and record["path"] == "nvcc" and "module id" in record["why"], record
    assert Path("a.o").read_text() == "plain\n"


def test_a_changed_step_that_fails_stops_the_other_chain_and_runs_nvcc(
    fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cicc refusing the option it is given (another CUDA version): nvcc's own command runs at
    once, without waiting for cudafe++."""
    monkeypatch.setenv("FAKE_CICC_FAIL", "1")
    monkeypatch.setenv("FAKE_CUDAFE_SLEEP", "30")
    start = time.perf_counter()
    code, record = _split(fake_nvcc)
    assert time.perf_counter() - start < 20
    assert code == 0 and record["path"] == "nvcc" and record["why"] == "cicc exited with status 3", record
    # cudafe++ was stopped (or never started, when cicc failed first): it did not run its course
    assert not any(s["step"] == "cudafe" and not s.get("killed") for s in record["split_steps"])
    assert Path("a.o").read_text() == "plain\n"


def test_an_unknown_plan_runs_nvcc_s_own_command(fake_nvcc: Path, tmp_path: Path) -> None:
    (tmp_path / "plan.txt").write_text(PLAN.replace("#$ ptxas", "#$ nvlink -o x.o\n#$ ptxas"))
    code, record = _split(fake_nvcc)
    assert code == 0 and record["path"] == "nvcc" and record["why"].startswith("plan:"), record
    assert Path("a.o").read_text() == "plain\n"


def test_nvcc_s_own_failure_is_reported_once_as_nvcc_would(
    fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """cudafe++ ran nvcc's own command on nvcc's own input: its error is the candidate's."""
    monkeypatch.setenv("FAKE_CUDAFE_FAIL", "1")
    code, record = _split(fake_nvcc)
    assert code == 2 and record["path"] == "split" and "cudafe" in record["failed"]
    assert "expected a ;" in capfd.readouterr().err
    assert not (fake_nvcc.parent / "nvcc_ran").exists() and not Path("a.o").exists()


def test_the_wrapper_records_what_ran(fake_nvcc: Path, tmp_path: Path) -> None:
    script = Path(nvcc_split.__file__)
    done = subprocess.run(
        [sys.executable, "-I", str(script), "--record", "r.json", "--", str(fake_nvcc), "-c", "a.cu", "-o", "a.o"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(Path("r.json").read_text())["path"] == "split"


# -- the builder's ninja runs: a failed light build is rebuilt with torch's header ----------------


def _ninja_folder(tmp_path: Path, fake: Path, cu: str) -> Path:
    folder = tmp_path / "build"
    folder.mkdir()
    (folder / "cuda.cu").write_text(cu)
    (folder / "build.ninja").write_text(
        textwrap.dedent(
            f"""\
            ninja_required_version = 1.3
            nvcc = {fake}
            cflags = -DX
            post_cflags =
            cuda_cflags = -DTORCH_EXTENSION_NAME=kw
            cuda_post_cflags =

            rule cuda_compile
              command = $nvcc  $cuda_cflags -c $in -o $out $cuda_post_cflags

            rule link
              command = cat $in > $out

            build cuda.cuda.o: cuda_compile {folder}/cuda.cu
            build kw.so: link cuda.cuda.o
            default kw.so
            """
        )
    )
    return folder


needs_ninja = pytest.mark.skipif(shutil.which("ninja") is None, reason="needs ninja")


def _run_ninja(folder: Path, **allowed: bool) -> tuple[dict[str, Any], list[str]]:
    record: dict[str, Any] = {}
    called: list[str] = []
    runner = ninja_runs.ninja_runner(lambda d, v, e: called.append(d), None, record, **allowed)
    try:
        runner(str(folder), True, "Error building extension 'kw'")
    finally:
        left = (folder / "build.ninja").read_text()
        assert "light_include" not in left and "kw_op_headers" not in left  # left as torch wrote it
    return record, called


@needs_ninja
def test_a_cu_that_needs_the_full_header_still_builds(
    fake_nvcc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NEEDS_FULL", "1")
    (tmp_path / "plan.txt").write_text("not a plan\n")  # the split falls back to nvcc's command
    folder = _ninja_folder(tmp_path, fake_nvcc, KERNEL)
    record, called = _run_ninja(folder, light=True, split=True)
    assert not called  # no plain rerun was needed
    assert (folder / "kw.so").read_text() == "plain\n"
    cuda = record["cuda"]
    assert [a["with"] for a in cuda["attempts"]] == [["light", "split"], ["split"]]
    assert [a["ok"] for a in cuda["attempts"]] == [False, True]
    assert cuda["header"].startswith("full: the build with the light header failed")
    assert cuda["nvcc"].startswith("nvcc: plan:")  # the wrapper's own fallback, recorded
    assert "torch/extension.h" in record["headers"]


@needs_ninja
def test_the_candidate_s_own_error_fails_the_build_after_the_full_header_try(
    fake_nvcc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVCC_STATUS", "1")
    (tmp_path / "plan.txt").write_text("not a plan\n")  # the split falls back to nvcc's command
    folder = _ninja_folder(tmp_path, fake_nvcc, KERNEL)
    with pytest.raises(RuntimeError, match="Error building"):
        _run_ninja(folder, light=True, split=True)
    ran = (fake_nvcc.parent / "nvcc_ran").read_text().splitlines()
    assert len(ran) == 2 and "light_include" in ran[0] and "light_include" not in ran[1]


@needs_ninja
def test_with_nothing_left_to_try_torch_s_runner_builds_torch_s_file(
    fake_nvcc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NEEDS_FULL", "1")
    folder = _ninja_folder(tmp_path, fake_nvcc, KERNEL)
    plain = (folder / "build.ninja").read_text()
    seen: list[str] = []
    record: dict[str, Any] = {}
    runner = ninja_runs.ninja_runner(
        lambda d, v, e: seen.append((folder / "build.ninja").read_text()), None, record, light=True
    )
    runner(str(folder), True, "Error building extension 'kw'")
    assert seen == [plain]  # the light attempt failed; torch's runner got torch's build.ninja
    assert [a["with"] for a in record["cuda"]["attempts"]] == [["light"], []]


@needs_ninja
def test_a_guarded_cu_never_sees_the_light_header_and_the_record_says_why(fake_nvcc: Path, tmp_path: Path) -> None:
    folder = _ninja_folder(tmp_path, fake_nvcc, KERNEL + "#ifdef TORCH_VERSION_MAJOR\n#endif\n")
    record, called = _run_ninja(folder, light=True, split=False)
    assert called == [str(folder)]  # nothing left to adjust: torch's own runner builds it
    assert record["cuda"]["header"] == "full: a preprocessor conditional (#ifdef)"
    assert record["cuda"]["nvcc"] == "nvcc: the split is off"


@needs_ninja
def test_the_per_operator_headers_come_with_the_light_one_and_leave_with_it(
    fake_nvcc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `.cu` that fails in torch's per-operator mode is built again with torch's header and
    lists (not with the light header alone: a candidate's own error then costs two builds)."""
    monkeypatch.setenv("FAKE_NEEDS_ALL_OPS", "1")
    (tmp_path / "plan.txt").write_text("not a plan\n")
    folder = _ninja_folder(tmp_path, fake_nvcc, KERNEL)
    record, called = _run_ninja(folder, light=True, split=True, ops=True)
    assert not called and (folder / "kw.so").read_text() == "plain\n"
    cuda = record["cuda"]
    assert [a["with"] for a in cuda["attempts"]] == [["light", "ops", "split"], ["split"]]
    assert cuda["header"] == "full: the build with per-operator headers failed: rebuilt with torch's header"
    ran = (fake_nvcc.parent / "nvcc_ran").read_text().splitlines()
    assert "-DAT_PER_OPERATOR_HEADERS" in ran[0] and "kw_op_headers" in ran[0] and "light_include" in ran[0]
    assert "kw_op_headers" not in ran[1] and "light_include" not in ran[1]
    assert "kw_op_headers" not in (folder / "build.ninja").read_text()


@needs_ninja
def test_a_cu_built_with_the_per_operator_headers_says_so(fake_nvcc: Path, tmp_path: Path) -> None:
    (tmp_path / "plan.txt").write_text("not a plan\n")
    folder = _ninja_folder(tmp_path, fake_nvcc, KERNEL)
    record, _ = _run_ninja(folder, light=True, split=False, ops=True)
    header = record["cuda"]["header"]
    assert header.startswith("light, per-operator headers (") and "operators)" in header, header
    assert "light torch/extension.h, per-operator headers" in record["headers"]
    kept = (folder / "kw_op_headers" / "ATen" / "Functions.h").read_text()
    assert "#include <ATen/ops/empty_like.h>" in kept and "#include <ATen/ops/conv2d.h>" not in kept


@needs_ninja
def test_without_the_light_header_the_per_operator_headers_are_not_offered(fake_nvcc: Path, tmp_path: Path) -> None:
    folder = _ninja_folder(tmp_path, fake_nvcc, KERNEL + "#ifdef TORCH_VERSION_MAJOR\n#endif\n")
    record, called = _run_ninja(folder, light=True, split=False, ops=True)
    assert called == [str(folder)]  # nothing to adjust: torch's own runner builds torch's file
    assert record["cuda"]["header"] == "full: a preprocessor conditional (#ifdef)"
    assert not (folder / "kw_op_headers").exists()


# -- the broker decides, never the worker ---------------------------------------------------------


class _Recorder(BuildBroker):
    def __init__(self, root: Path, **flags: bool) -> None:
        super().__init__(root, {}, timeout_s=60, precompiled_headers=False, **flags)
        self.requests: list[dict[str, Any]] = []

    def _run_builder(self, request: dict[str, Any], folder: Path) -> tuple[bool, str | None, str, dict[str, Any]]:
        self.requests.append(request)
        library = folder / "lib.so"
        library.write_bytes(b"")
        return True, str(library), "", {"headers": "x", "cuda": {"header": "light"}}


def _cuda_request(name: str, **planted: Any) -> dict[str, Any]:
    spec = {"name": name, "cpp_sources": "torch::Tensor relu(torch::Tensor x);", "cuda_sources": KERNEL}
    return {"kind": "inline", "spec": spec, "with_cuda": True, **planted}


def test_the_broker_says_whether_the_cu_may_be_lightened_or_split(tmp_path: Path) -> None:
    broker = _Recorder(tmp_path / "cache", light_cu=False, nvcc_split=True, op_headers=False)
    reply = broker.handle(_cuda_request("kw_a", light_cu=True, nvcc_split=False, op_headers=True))  # dropped
    assert broker.requests[0]["light_cu"] is False and broker.requests[0]["nvcc_split"] is True
    assert broker.requests[0]["op_headers"] is False
    assert reply["cuda"] == {"header": "light"}  # the build record reaches the reply


def test_the_switches_turn_each_mechanism_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on = BuildBroker(tmp_path / "a", {}, timeout_s=60)
    assert on.light_cu is True and on.op_headers is True
    monkeypatch.setenv(light_header.ENV_SWITCH, "0")
    monkeypatch.setenv(ninja_runs.SPLIT_SWITCH, "0")
    monkeypatch.setenv(op_headers.ENV_SWITCH, "0")
    broker = BuildBroker(tmp_path / "b", {}, timeout_s=60)
    assert broker.light_cu is False and broker.nvcc_split is False and broker.op_headers is False


# -- the real nvcc (compile-only; skipped where nvcc is absent) ------------------------------------

needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None or shutil.which("objdump") is None, reason="needs nvcc and objdump"
)


@needs_nvcc
def test_the_split_compile_makes_nvcc_s_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("k.cu").write_text("__global__ void k(float* x, float s) { x[threadIdx.x] *= s; }\n")
    flags = ["-gencode=arch=compute_90,code=sm_90", "--compiler-options", "-fPIC", "-MD", "-MF", "k.o.d"]
    record: dict[str, Any] = {}
    nvcc = shutil.which("nvcc")
    assert nvcc is not None
    assert nvcc_split.compile_split([nvcc, *flags, "-c", "k.cu", "-o", "k.o"], record) == 0
    assert record["path"] == "split", record
    assert Path("k.o.d").read_text().startswith("k.o:")  # the dependency file, for ninja
    subprocess.run([nvcc, *flags, "-c", "k.cu", "-o", "plain.o"], check=True, timeout=300)

    def sections(obj: str) -> list[str]:
        out = subprocess.run(["objdump", "-s", "-r", obj], capture_output=True, text=True, check=True, timeout=60)
        return out.stdout.splitlines()[2:]  # without the file's name

    assert sections("k.o") == sections("plain.o")
