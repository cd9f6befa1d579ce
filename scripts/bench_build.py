#!/usr/bin/env python3
"""Where a cold `load_inline` build's time goes, per phase, without and with the precompiled torch
header (issue #29). A benchmark, not a test.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_build.py --lang cpp --repeats 3 --json /tmp/bench_cpp.json
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_build.py --lang cuda --repeats 3        # compile-only on a CPU host
    PYTHONPATH=$PWD python3 scripts/bench_build.py --lang cuda --repeats 3 --broker       # GPU host: + the harness's path
    ... --mode before   (plain builds only)   --mode after   (with the precompiled header only)

Each repeat writes a new KernelBench-style candidate (a kernel whose code differs in a constant,
not only in its name: no compiler cache could serve it), has torch's `load_inline` write its
`build.ninja` (phase `torch_setup`), and runs that file's commands itself, timing each:
`cxx_main` (g++ over main.cpp: torch/extension.h, pybind11, the bindings; the C++ form's
kernel too), `nvcc_cuda` (the .cu; its own phases from `nvcc -time`: gcc preprocessing, cudafe++,
cicc, ptxas, fatbinary, host gcc), `link`, and `wall` (the objects compiled at once, as ninja
does, then the link). `after` (the default runs `before` and `after` on each candidate) adds the
precompiled header to the C++ command exactly as the harness's builder does
(`kernelwright/harness/building/headers.py`); the header is prepared once per host, timed apart
(`prepare_headers_s`). Both modes' main.o are compared byte for byte (`identical_objects`).

On a host without a CUDA torch (this project's CPU machines) `--lang cuda` compiles only (for
`--arch`, default 90): no link, `torch_setup` uses the CUDA toolkit found by nvcc.

`--broker` also times the whole trusted build step (`BuildBroker.handle`: builder process,
import torch, ninja, link) for new candidates, precompiled headers off then on (`broker_before`,
`broker_after`): the figure a candidate sees. It needs a CUDA torch for `--lang cuda`.

Prints one JSON document (also written with --json): medians, min, max and every run, per phase
and mode. Timings on shared cores are noisy: say where they were taken.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CPP_KERNEL = """
torch::Tensor scale_relu(torch::Tensor x) {{
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const float* src = input.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = input.numel();
    for (int64_t i = 0; i < n; ++i) {{
        float v = src[i] * {constant}f;
        dst[i] = v > 0.0f ? v : 0.0f;
    }}
    return out;
}}
"""

CUDA_KERNEL = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void scale_relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {{
        float v = x[i] * {constant}f;
        y[i] = v > 0.0f ? v : 0.0f;
    }}
}}

torch::Tensor scale_relu(torch::Tensor x) {{
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t n = input.numel();
    const int threads = 256;
    const int blocks = (int)((n + threads - 1) / threads);
    scale_relu_kernel<<<blocks, threads>>>(input.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}}
"""

CUDA_DECL = "torch::Tensor scale_relu(torch::Tensor x);"


def _constant() -> str:
    """A constant no earlier run on this host used (the kernel's code, not only its name, differs)."""
    return f"1.{uuid.uuid4().int % 10**9:09d}"


def _spec(lang: str, name: str, constant: str, cu_include: list[str] | None = None) -> dict[str, Any]:
    if lang == "cpp":
        return {"name": name, "cpp_sources": CPP_KERNEL.format(constant=constant), "functions": ["scale_relu"]}
    cuda = CUDA_KERNEL.format(constant=constant)
    if cu_include:  # a measurement only: what a lighter header in the .cu would cost
        cuda = cuda.replace("#include <torch/extension.h>", "\n".join(f"#include <{h}>" for h in cu_include))
    return {
        "name": name,
        "cpp_sources": CUDA_DECL,
        "cuda_sources": cuda,
        "functions": ["scale_relu"],
    }


def _compile_only(lang: str) -> bool:
    import torch

    return lang == "cuda" and not torch.cuda.is_available()


def _setup_cuda_home(arch: str) -> None:
    """On a CPU torch, let load_inline write a CUDA build.ninja (compile-only)."""
    import torch.utils.cpp_extension as cpp

    if cpp.CUDA_HOME is None:
        nvcc = shutil.which("nvcc")
        home = os.environ.get("CUDA_HOME") or ("/usr/local/cuda" if Path("/usr/local/cuda/bin/nvcc").exists() else "")
        if not home and nvcc:
            home = str(Path(nvcc).resolve().parents[1])
        cpp.CUDA_HOME = home or None
        os.environ.setdefault("CUDA_HOME", home)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{arch[0]}.{arch[1:]}")


def write_ninja(folder: Path, spec: dict[str, Any]) -> tuple[str, float]:
    """Have torch's load_inline write the candidate's build.ninja (no build); its text and seconds."""
    import torch.utils.cpp_extension as cpp

    original, importer = cpp._run_ninja_build, cpp._import_module_from_library
    cpp._run_ninja_build = lambda *a, **k: None  # type: ignore[assignment]
    cpp._import_module_from_library = lambda *a, **k: None  # type: ignore[assignment]
    cpp.JIT_EXTENSION_VERSIONER.entries.pop(spec["name"], None)  # no "_v1": both modes' objects comparable
    start = time.perf_counter()
    try:
        cpp.load_inline(**spec, build_directory=str(folder), verbose=False)
    finally:
        cpp._run_ninja_build, cpp._import_module_from_library = original, importer  # type: ignore[assignment]
    return (folder / "build.ninja").read_text(), time.perf_counter() - start


def _vars(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        if " = " in line and not line.startswith((" ", "build ", "rule ")):
            key, value = line.split(" = ", 1)
            found[key.strip()] = value
        elif line.rstrip().endswith(" =") and not line.startswith(" "):
            found[line.split("=")[0].strip()] = ""
    return found


def commands(text: str, folder: Path, nvcc_times: Path | None) -> dict[str, list[str]]:
    """The compile and link commands of a torch build.ninja, as ninja would run them."""
    v = _vars(text)
    cmds: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.startswith("build ") or ":" not in line:
            continue
        out, rest = line[len("build ") :].split(":", 1)
        rule, *inputs = rest.split()
        if rule == "compile":
            cmds["cxx_main"] = [
                *shlex.split(v["cxx"]),
                "-MMD",
                "-MF",
                f"{out}.d",
                *shlex.split(v["cflags"]),
                "-c",
                *inputs,
                "-o",
                out,
                *shlex.split(v.get("post_cflags", "")),
            ]
        elif rule == "cuda_compile":
            timing = ["-time", str(nvcc_times)] if nvcc_times else []
            cmds["nvcc_cuda"] = [
                *shlex.split(v["nvcc"]),
                *timing,
                *shlex.split(v["cuda_cflags"]),
                "-c",
                *inputs,
                "-o",
                out,
                *shlex.split(v.get("cuda_post_cflags", "")),
            ]
        elif rule == "link":
            cmds["link"] = [*shlex.split(v["cxx"]), *inputs, *shlex.split(v["ldflags"]), "-o", out]
    return cmds


def _run(cmd: list[str], cwd: Path, times: dict[str, float], name: str, errors: list[str]) -> None:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    times[name] = time.perf_counter() - start
    (cwd / f"{name}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        errors.append(f"{name}: exit {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")


def _nvcc_phases(csv: Path) -> dict[str, float]:
    phases: dict[str, float] = {}
    if not csv.is_file():
        return phases
    for line in csv.read_text().splitlines()[1:]:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 8 and parts[-1] == "ms":
            name = "nvcc." + parts[1].replace(" ", "_").replace("(", "").replace(")", "")
            phases[name] = phases.get(name, 0.0) + float(parts[-2]) / 1000.0
    return phases


def build_once(folder: Path, text: str, link: bool) -> dict[str, Any]:
    """Run one build.ninja's commands: objects at once (as ninja), then the link; per-phase seconds."""
    csv = folder / "nvcc_time.csv"
    cmds = commands(text, folder, csv)
    times: dict[str, float] = {}
    errors: list[str] = []
    start = time.perf_counter()
    threads = [
        threading.Thread(target=_run, args=(cmds[name], folder, times, name, errors))
        for name in ("cxx_main", "nvcc_cuda")
        if name in cmds
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if link and not errors and "link" in cmds:
        _run(cmds["link"], folder, times, "link", errors)
    times["wall"] = time.perf_counter() - start
    times.update(_nvcc_phases(csv))
    return {"times": times, "errors": errors}


def prepare_headers(root: Path, lang: str) -> tuple[Path, float]:
    from kernelwright.harness.building import headers

    inputs = {"extra_cflags": [], "with_cuda": lang == "cuda"}
    folder = root / "pch" / headers.pch_key(inputs)[:24]
    if (folder / headers.MANIFEST).is_file():
        return folder, 0.0
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    headers.prepare(folder, inputs)
    return folder, time.perf_counter() - start


def _summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    names = sorted({k for r in runs for k in r})
    out = {}
    for name in names:
        values = [r[name] for r in runs if name in r]
        out[name] = {
            "median": round(statistics.median(values), 3),
            "min": round(min(values), 3),
            "max": round(max(values), 3),
            "runs": [round(x, 3) for x in values],
        }
    return out


def _broker_runs(lang: str, repeats: int, root: Path, pch: bool) -> list[dict[str, float]]:
    from kernelwright.harness.building.broker import BuildBroker

    broker = BuildBroker(root / "cache", {}, timeout_s=900, pausable=False, precompiled_headers=pch)
    runs = []
    for i in range(repeats + (1 if pch else 0)):  # with headers: a first request prepares them
        spec = _spec(lang, f"kw_bench_{'a' if pch else 'b'}{i}_{uuid.uuid4().hex[:6]}", _constant())
        full = {
            "cuda_sources": None,
            "functions": None,
            "extra_cflags": None,
            "extra_cuda_cflags": None,
            "extra_ldflags": None,
            "extra_include_paths": None,
            "with_cuda": None,
            "is_python_module": True,
            **spec,
        }
        request = {"kind": "inline", "spec": full, "with_cuda": lang == "cuda"}
        start = time.perf_counter()
        reply = broker.handle(request)
        seconds = time.perf_counter() - start
        if not reply.get("ok"):
            raise SystemExit(f"broker build failed: {str(reply.get('log'))[-3000:]}")
        print(
            f"  broker {'after' if pch else 'before'} #{i}: {seconds:.1f} s ({reply.get('headers')})", file=sys.stderr
        )
        if pch and i == 0:
            continue
        runs.append({"handle": seconds})
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", choices=["cpp", "cuda"], default="cpp")
    parser.add_argument("--mode", choices=["both", "before", "after"], default="both")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--arch", default="90", help="compile-only CUDA: the sm_XX to build for")
    parser.add_argument("--work", type=Path, help="where to build (default: a temporary folder)")
    parser.add_argument("--broker", action="store_true", help="also time BuildBroker.handle end to end")
    parser.add_argument(
        "--cu-include",
        action="append",
        help="measurement only: headers the .cu includes instead of torch/extension.h (e.g. torch/types.h)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import torch

    compile_only = _compile_only(args.lang)
    if args.lang == "cuda":
        _setup_cuda_home(args.arch)
    work = args.work or Path(tempfile.mkdtemp(prefix="kw-bench-build-"))
    work.mkdir(parents=True, exist_ok=True)
    modes = ["before", "after"] if args.mode == "both" else [args.mode]

    report: dict[str, Any] = {
        "lang": args.lang,
        "host": {
            "machine": platform.node(),
            "cpus": os.cpu_count(),
            "load_avg": os.getloadavg(),
            "torch": torch.__version__,
            "cuda_available": torch.cuda.is_available(),
            "compile_only": compile_only,
        },
        "repeats": args.repeats,
        "work": str(work),
        "cu_include": args.cu_include or ["torch/extension.h"],
    }
    pch_folder = None
    if "after" in modes:
        pch_folder, prep = prepare_headers(work, args.lang)
        report["prepare_headers_s"] = round(prep, 3)
        report["pch"] = str(pch_folder)
        print(f"headers prepared in {prep:.1f} s ({pch_folder})", file=sys.stderr)

    from kernelwright.harness.building import headers

    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    identical: list[bool] = []
    pch_used: list[bool] = []
    errors: list[str] = []
    for i in range(args.repeats):
        constant = _constant()
        objects = {}
        for mode in modes:
            folder = work / f"{mode}_{i}_{constant.replace('.', '_')}"
            folder.mkdir()
            spec = _spec(args.lang, f"kw_bench_{i}", constant, args.cu_include)  # one name: main.o comparable
            text, setup = write_ninja(folder, spec)
            if mode == "after":
                offered, why = headers._offer(folder, text, pch_folder)
                if offered is None:
                    raise SystemExit(f"the precompiled header was not offered: {why}")
                text = offered
                (folder / "build.ninja").write_text(text)
            result = build_once(folder, text, link=not compile_only)
            if mode == "after":  # GCC's -H trace: "! <file>.gch" when it loaded the header
                assert pch_folder is not None
                log_text = (folder / "cxx_main.log").read_text() if (folder / "cxx_main.log").is_file() else ""
                used, _ = headers._header_trace(log_text, pch_folder / "include" / (headers.HEADER + ".gch"))
                pch_used.append(used)
            result["times"]["torch_setup"] = setup
            result["times"]["total"] = setup + result["times"]["wall"]
            errors += [f"{mode} #{i}: {e}" for e in result["errors"]]
            runs[mode].append(result["times"])
            if (folder / "main.o").is_file():
                objects[mode] = (folder / "main.o").read_bytes()
            shown = ", ".join(f"{k} {v:.1f}" for k, v in sorted(result["times"].items()))
            print(f"{mode} #{i}: {shown}", file=sys.stderr)
        if len(objects) == 2:
            identical.append(objects["before"] == objects["after"])
    report["phases"] = {mode: _summary(r) for mode, r in runs.items()}
    if identical:
        report["identical_objects"] = all(identical)
    if pch_used:
        report["pch_loaded_every_time"] = all(pch_used)
    if args.broker:
        if compile_only:
            report["broker"] = "skipped: a CUDA build through the harness needs a CUDA torch"
        else:
            for mode, pch in (("broker_before", False), ("broker_after", True)):
                if mode.split("_")[1] in modes:
                    report.setdefault("phases", {})[mode] = _summary(_broker_runs(args.lang, args.repeats, work, pch))
    report["errors"] = errors
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
