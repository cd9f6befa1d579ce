#!/usr/bin/env python3
"""Where a cold `load_inline` build's time goes, per phase, as torch builds it (`before`) and as the
harness's builder builds it now (`after`) (issue #29). A benchmark, not a test.

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
For `--lang cuda`, `after` also compiles the .cu against the light `torch/extension.h`
(`light_header.py`, where its checks allow), in torch's per-operator mode against operator lists
trimmed to what the .cu names (`op_headers.py`; `--no-op-headers`: the light header alone),
through `nvcc_split.py` (nvcc's host and device front ends at once): phases `split.<step>`,
`split.host_chain` (host preprocessing + cudafe++), `split.device_chain` (device preprocessing +
cicc + ptxas + fatbinary), `split.host_compile`, `split.used` (1: split, 0: it ran nvcc itself).
Checks (`identity_checks`, first repeat, three extra compiles of the `before` .cu from its own
path, since nvcc names internal symbols after the source's path): the split over torch's header
against plain nvcc (every section and relocation, `objdump -s -r`), the split with the light
header (device code, `.nv_fatbin`), and the split with the light header and the per-operator
headers (device code; and its host code against the light header's object, `code_equivalence`:
every section both have and every relocation the same, the sections only one has listed);
`--no-check-split` skips them.

On a host without a CUDA torch (this project's CPU machines) `--lang cuda` compiles only (for
`--arch`, default 90): no link, `torch_setup` uses the CUDA toolkit found by nvcc.

`--broker` also times the whole trusted build step (`BuildBroker.handle`: builder process,
import torch, ninja, link) for new candidates, as before #29 (no precompiled header, light header
or split: `broker_before`) and as now (all three where they fit: `broker_after`, the first request
of which prepares the header and is not counted): the figure a candidate sees, with the split's
steps from the build record. It needs a CUDA torch for `--lang cuda`. With `--fork`, also as a
session builds (`broker_forked`: as `broker_after`, each builder forked from the fork server of
its environment, which a session's worker has already started; for CUDA the builders' server
apart, as a GPU job's by default; its first request, which starts the server and prepares the
header, is not counted, and its builder starts afresh while the server apart starts).
`--mode after --broker --fork --forked-only` times that way alone (no direct builds, no builders
afresh). The broker's figures carry the builder's own timeline (`builder.start`, `.confine`,
`.import`, `.torch_setup`, `.ninja`; `broker.rest`). On a CUDA torch `TORCH_CUDA_ARCH_LIST` is
left as set (unset: torch reads the GPU, as a user's build does); compile-only, `--arch` sets it.

Prints one JSON document (also written with --json): medians, min, max and every run, per phase
and mode. Timings on shared cores are noisy: say where they were taken.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
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

from kernelwright.harness.building import headers, light_header, nvcc_split, op_headers  # noqa: E402

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


def _setup_cuda_home(arch: str, compile_only: bool) -> None:
    """On a CPU torch, let load_inline write a CUDA build.ninja (compile-only) for `arch`. On a
    CUDA torch `TORCH_CUDA_ARCH_LIST` is left as the caller set it (unset: torch reads the GPU)."""
    import torch.utils.cpp_extension as cpp

    if cpp.CUDA_HOME is None:
        nvcc = shutil.which("nvcc")
        home = os.environ.get("CUDA_HOME") or ("/usr/local/cuda" if Path("/usr/local/cuda/bin/nvcc").exists() else "")
        if not home and nvcc:
            home = str(Path(nvcc).resolve().parents[1])
        cpp.CUDA_HOME = home or None
        os.environ.setdefault("CUDA_HOME", home)
    if compile_only:
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


def commands(text: str, folder: Path, nvcc_times: Path | None, split: bool = False) -> dict[str, list[str]]:
    """The compile and link commands of a torch build.ninja, as ninja would run them; with
    `split`, the .cu's through `nvcc_split.py` as the harness's builder runs it (its steps'
    seconds in `split.json`)."""
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
            timing = ["-time", str(nvcc_times)] if nvcc_times and not split else []
            wrapper = [sys.executable, "-I", nvcc_split.__file__, "--record", str(folder / "split.json"), "--"]
            cmds["nvcc_cuda"] = [
                *(wrapper if split else []),
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
    """Run one command in `cwd`: its wall seconds (`name`) and CPU seconds (`name.cpu`)."""
    code, wall, cpu, output = nvcc_split.run_timed(cmd, None, 3600, cwd=str(cwd))
    times[name], times[f"{name}.cpu"] = wall, cpu
    (cwd / f"{name}.log").write_text(output)
    if code != 0:
        errors.append(f"{name}: exit {code}: {output[-1500:]}")


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


def _split_phases(record: Path) -> dict[str, float]:
    """Seconds per step of a split nvcc compile (`split.<step>`), its two chains and its path."""
    if not record.is_file():
        return {}
    data = json.loads(record.read_text())
    phases: dict[str, float] = {"split.used": 1.0 if data.get("path") == "split" else 0.0}
    for step in data.get("steps") or []:
        name = "split." + str(step["step"])
        phases[name] = phases.get(name, 0.0) + float(step["seconds"])
        phases[name + ".cpu"] = phases.get(name + ".cpu", 0.0) + float(step.get("cpu_s", 0.0))
    host = ("split.pp_host", "split.cudafe")
    device = ("split.pp_device", "split.cicc", "split.ptxas", "split.fatbinary")
    for suffix in ("", ".cpu"):
        phases["split.host_chain" + suffix] = sum(phases.get(k + suffix, 0.0) for k in host)
        phases["split.device_chain" + suffix] = sum(phases.get(k + suffix, 0.0) for k in device)
    # what the .cu would take with a core per process (a 16-core GPU host): the longer chain, then
    # the host compile
    phases["split.critical_path.cpu"] = max(phases["split.host_chain.cpu"], phases["split.device_chain.cpu"]) + (
        phases.get("split.host_compile.cpu", 0.0)
    )
    if data.get("path") != "split":
        print(f"  nvcc_split ran nvcc itself: {data.get('why')}", file=sys.stderr)
    return phases


def build_once(folder: Path, text: str, link: bool, split: bool = False) -> dict[str, Any]:
    """Run one build.ninja's commands: objects at once (as ninja), then the link; per-phase seconds."""
    csv = folder / "nvcc_time.csv"
    cmds = commands(text, folder, csv, split)
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
    times.update(_split_phases(folder / "split.json"))
    return {"times": times, "errors": errors}


def _sections(obj: Path, only: str | None = None) -> str:
    """An object's section contents and relocations (`objdump -s -r`), without its file name:
    two plain nvcc runs differ only in the temporary name of the .file symbol, which this omits."""
    where = ["-j", only] if only else []
    done = subprocess.run(
        ["objdump", "-s", "-r", *where, str(obj)], capture_output=True, text=True, timeout=120, check=False
    )
    return "\n".join(done.stdout.splitlines()[2:]) if done.returncode == 0 else f"objdump failed: {done.stderr}"


def _objdump(obj: Path, flag: str) -> list[str]:
    done = subprocess.run(["objdump", flag, str(obj)], capture_output=True, text=True, timeout=120, check=False)
    return done.stdout.splitlines()[2:] if done.returncode == 0 else [f"objdump failed: {done.stderr}"]


def _by_section(obj: Path) -> tuple[dict[str, bytes], dict[str, list[str]]]:
    """Each section's contents (`objdump -s`) and relocations (`objdump -r`), by section name (a
    name that recurs, as COMDAT sections' do, numbered in order: `name#2`)."""

    def numbered(name: str, seen: dict[str, int]) -> str:
        seen[name] = seen.get(name, 0) + 1
        return name if seen[name] == 1 else f"{name}#{seen[name]}"

    contents: dict[str, bytearray] = {}
    name, seen = "", {}
    for line in _objdump(obj, "-s"):
        if line.startswith("Contents of section "):
            name = numbered(line[len("Contents of section ") :].rstrip(":"), seen)
            contents[name] = bytearray()
        elif name and line.startswith(" "):
            words = line[:43].split()[1:]  # the address, then up to four groups of hex digits
            contents[name] += bytes.fromhex("".join(words))
    relocations: dict[str, list[str]] = {}
    name, seen = "", {}
    for line in _objdump(obj, "-r"):
        if line.startswith("RELOCATION RECORDS FOR ["):
            name = numbered(line[len("RELOCATION RECORDS FOR [") : -2], seen)
            relocations[name] = []
        elif name and line.strip() and not line.startswith("OFFSET"):
            relocations[name].append(line)
    return {k: bytes(v) for k, v in contents.items()}, relocations


def code_equivalence(a: Path, b: Path) -> dict[str, Any]:
    """Do two objects of one source hold the same code? Every section both have the same, but for
    `.rodata` (its layout) and `.eh_frame` (it follows the functions); every relocation the same,
    a `.rodata` target read as the data there (up to its NUL, or 16 bytes) instead of its offset;
    and the sections only one of them has, by name (a header the other did not include can leave
    an unreferenced inline function or constant behind)."""
    views = []
    for obj in (a, b):
        contents, relocations = _by_section(obj)
        rodata = contents.get(".rodata", b"")

        def data_at(match: re.Match[str], rodata: bytes = rodata) -> str:
            start = int(match.group(1), 16)
            end = rodata.find(b"\0", start)
            return ".rodata:" + rodata[start : end if 0 <= end - start <= 256 else start + 16].hex()

        resolved = {k: [re.sub(r"\.rodata\+0x([0-9a-f]+)", data_at, r) for r in v] for k, v in relocations.items()}
        views.append((contents, resolved))
    (ca, ra), (cb, rb) = views
    layout = (".rodata", ".eh_frame", ".rela.eh_frame", ".group", ".comment", ".note.GNU-stack")
    common = sorted(n for n in set(ca) & set(cb) if not n.startswith(layout))
    differing = [n for n in common if ca[n] != cb[n]]
    moved = sorted(n for n in set(ra) & set(rb) if not n.startswith(layout) and ra[n] != rb[n])
    return {
        "identical_code": not differing and not moved,
        "sections_compared": len(common),
        "differing": differing[:20],
        "relocations_differing": moved[:20],
        "only_in_first": sorted(n for n in set(ca) - set(cb) if not n.startswith(layout))[:20],
        "only_in_second": sorted(n for n in set(cb) - set(ca) if not n.startswith(layout))[:20],
    }


def identity_checks(folder: Path) -> dict[str, Any]:
    """The .cu of `folder` (built plain, `before`) compiled again from the same path (nvcc names
    a translation unit's internal symbols after its source's path): through `nvcc_split.py` over
    torch's header (every section and relocation the same as nvcc's), through it with the light
    header (the device code, `.nv_fatbin`, the same; host code differs: fewer headers), and with
    the light header in torch's per-operator mode (the device code; and `code_equivalence` with
    the light header's object)."""
    plain_text = (folder / "build.ninja").read_text()
    reference = folder / "plain.cuda.o"
    shutil.copyfile(folder / "cuda.cuda.o", reference)
    out: dict[str, Any] = {"errors": []}
    cu_text = (folder / "cuda.cu").read_text()
    lighter, why = light_header.offer(plain_text, cu_text)
    trimmed, why_ops = op_headers.trim(folder, cu_text) if lighter else (None, "no light header")
    leaner = op_headers.offer(lighter, trimmed)[0] if lighter and trimmed else None
    light_reference = folder / "light.cuda.o"
    for name, text in (
        ("split_full_header", plain_text),
        ("split_light_header", lighter),
        ("split_op_headers", leaner),
    ):
        if text is None:
            out[name] = f"not built: {why or why_ops}"
            continue
        times: dict[str, float] = {}
        (folder / "split.json").unlink(missing_ok=True)
        _run(commands(text, folder, None, split=True)["nvcc_cuda"], folder, times, name, out["errors"])
        times.update(_split_phases(folder / "split.json"))
        only = None if name == "split_full_header" else ".nv_fatbin"
        same = _sections(folder / "cuda.cuda.o", only) == _sections(reference, only)
        code: dict[str, Any] = {}
        if name == "split_light_header":
            shutil.copyfile(folder / "cuda.cuda.o", light_reference)
        elif name == "split_op_headers":  # and the host code, against the light header's object
            code = code_equivalence(light_reference, folder / "cuda.cuda.o")
        out[name] = {
            "identical": same,
            "compared": "every section and relocation" if only is None else "device code (.nv_fatbin)",
            **({"code_against_the_light_header": code} if code else {}),
            "split_used": times.get("split.used") == 1.0,
            "times": {k: round(v, 3) for k, v in sorted(times.items())},
        }
        print(f"identity check {name}: {out[name]}", file=sys.stderr)
    return out


def prepare_headers(root: Path, lang: str) -> tuple[Path, float]:
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


def _broker_runs(
    lang: str, repeats: int, root: Path, pch: bool, fork: bool = False, ops: bool = True
) -> list[dict[str, float]]:
    from kernelwright.harness.building.broker import BuildBroker

    # before: as the harness built until #29 (plain); after: what its builder does now
    broker = BuildBroker(
        root / "cache",
        {},
        timeout_s=900,
        pausable=False,
        precompiled_headers=pch,
        light_cu=pch,
        nvcc_split=pch,
        op_headers=pch and ops,
        fork=fork,
    )
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
        label = ("forked" if fork else "after") if pch else "before"
        print(f"  broker {label} #{i}: {seconds:.1f} s ({reply.get('headers')})", file=sys.stderr)
        if pch and i == 0:
            continue
        run = {"handle": seconds}
        # the builder's own account (builder.py): its start (the interpreter; ~0 forked), confining
        # itself, importing torch (~0 forked), torch's Python around the ninja run, the ninja run;
        # the rest is the broker's
        timeline = reply.get("timeline") or {}
        steps = ("start_s", "confine_s", "import_s", "torch_s")
        if all(isinstance(timeline.get(k), int | float) for k in (*steps, "ninja_s")):
            run["builder.start"] = float(timeline["start_s"])
            run["builder.confine"] = float(timeline["confine_s"])
            run["builder.import"] = float(timeline["import_s"])
            run["builder.torch_setup"] = float(timeline["torch_s"]) - float(timeline["ninja_s"])
            run["builder.ninja"] = float(timeline["ninja_s"])
            run["broker.rest"] = seconds - sum(float(timeline[k]) for k in steps)
        for attempt in (reply.get("cuda") or {}).get("attempts") or []:
            run["ninja_attempts"] = run.get("ninja_attempts", 0.0) + 1
            for nvcc in attempt.get("nvcc") or []:
                for step in nvcc.get("steps") or []:
                    run["split." + step["step"]] = float(step["seconds"])
        runs.append(run)
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", choices=["cpp", "cuda"], default="cpp")
    parser.add_argument("--mode", choices=["both", "before", "after"], default="both")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--arch", default="90", help="compile-only CUDA: the sm_XX to build for")
    parser.add_argument("--work", type=Path, help="where to build (default: a temporary folder)")
    parser.add_argument("--broker", action="store_true", help="also time BuildBroker.handle end to end")
    parser.add_argument("--fork", action="store_true", help="with --broker: also with builders forked (broker_forked)")
    parser.add_argument(
        "--forked-only",
        action="store_true",
        help="with --broker --fork: time only the build step with builders forked (no direct builds, no builders afresh)",
    )
    parser.add_argument(
        "--cu-include",
        action="append",
        help="measurement only: headers the .cu includes instead of torch/extension.h (e.g. torch/types.h)",
    )
    parser.add_argument(
        "--no-op-headers",
        dest="op_headers",
        action="store_false",
        help="`after` without torch's per-operator headers in the .cu (the light header alone)",
    )
    parser.add_argument(
        "--no-check-split",
        dest="check_split",
        action="store_false",
        help="skip the first repeat's identity checks (two more compiles of its .cu)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.forked_only and not (args.broker and args.fork and args.mode == "after"):
        parser.error("--forked-only needs --broker --fork --mode after")

    import torch

    compile_only = _compile_only(args.lang)
    if args.lang == "cuda":
        _setup_cuda_home(args.arch, compile_only)
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
    if "after" in modes and not args.forked_only:  # the broker prepares its own
        pch_folder, prep = prepare_headers(work, args.lang)
        report["prepare_headers_s"] = round(prep, 3)
        report["pch"] = str(pch_folder)
        print(f"headers prepared in {prep:.1f} s ({pch_folder})", file=sys.stderr)

    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    identical: list[bool] = []
    light_notes: list[str] = []
    pch_used: list[bool] = []
    errors: list[str] = []
    for i in range(0 if args.forked_only else args.repeats):
        constant = _constant()
        objects = {}
        for mode in modes:
            folder = work / f"{mode}_{i}_{constant.replace('.', '_')}"
            folder.mkdir()
            spec = _spec(args.lang, f"kw_bench_{i}", constant, args.cu_include)  # one name: main.o comparable
            text, setup = write_ninja(folder, spec)
            cuda_after = mode == "after" and args.lang == "cuda"
            if mode == "after":
                offered, why = headers.offer_pch(folder, text, pch_folder)
                if offered is None:
                    raise SystemExit(f"the precompiled header was not offered: {why}")
                text = offered
                if cuda_after:  # the light header where the harness's builder would use it
                    cu_text = (folder / "cuda.cu").read_text()
                    lighter, why = light_header.offer(text, cu_text)
                    light_notes.append(why or "light")
                    text = lighter or text
                    if lighter and args.op_headers:  # and torch's per-operator headers with it
                        trimmed, why = op_headers.trim(folder, cu_text)
                        leaner = op_headers.offer(text, trimmed)[0] if trimmed else None
                        light_notes.append(trimmed.describe() if trimmed and leaner else f"no op headers: {why}")
                        text = leaner or text
                (folder / "build.ninja").write_text(text)
            result = build_once(folder, text, link=not compile_only, split=cuda_after)
            if mode == "after":  # GCC's -H trace: "! <file>.gch" when it loaded the header
                assert pch_folder is not None
                log_text = (folder / "cxx_main.log").read_text() if (folder / "cxx_main.log").is_file() else ""
                used, _ = headers.header_trace(log_text, pch_folder / "include" / (headers.HEADER + ".gch"))
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
        before = work / f"before_{i}_{constant.replace('.', '_')}"
        if i == 0 and args.check_split and args.lang == "cuda" and (before / "cuda.cuda.o").is_file():
            checks = identity_checks(before)
            errors += checks.pop("errors")
            report["identity_checks"] = checks
    report["phases"] = {mode: _summary(r) for mode, r in runs.items()}
    if identical:
        report["identical_objects"] = all(identical)
    if pch_used:
        report["pch_loaded_every_time"] = all(pch_used)
    if light_notes:
        report["light_header"] = sorted(set(light_notes))
    if args.broker:
        if compile_only:
            report["broker"] = "skipped: a CUDA build through the harness needs a CUDA torch"
        else:
            ways = [] if args.forked_only else [("broker_before", False, False), ("broker_after", True, False)]
            if args.fork:
                ways.append(("broker_forked", True, True))
            for mode, pch, fork in ways:
                if ("before" if mode == "broker_before" else "after") in modes:
                    runs_of = _broker_runs(args.lang, args.repeats, work, pch, fork, args.op_headers)
                    report.setdefault("phases", {})[mode] = _summary(runs_of)
    report["errors"] = errors
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
