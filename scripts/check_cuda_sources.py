#!/usr/bin/env python3
"""Check fast-build CUDA candidate files without a GPU: every kernel source compiles with nvcc.

    .venv/bin/python scripts/check_cuda_sources.py [PATH ...] [--arch sm_90] [--jobs 2]

PATH: candidate files or folders of them (default: benchmarks/level1_cuda). Each file's top-level
code runs with `kernelwright.fastext.load_kernels` replaced by a recorder, so nothing is built
and no GPU is needed (torch's CPU build will do): every (name, source, signatures, lang) it is
called with is captured. Then, per file:

- the file parses and defines `class ModelNew`;
- every captured source compiles with fastext's own nvcc command (`fastext.compile_command`,
  `-arch` from --arch) into a shared library that exports each listed function;
- each listed function's signature (`"ptr, ptr, i64, stream"`) agrees with its `extern "C"`
  declaration in the source: the same number of parameters, each of a matching kind (a pointer
  for `ptr`, `int64_t`/`long long` for `i64`, `int` for `i32`, `float` for `f32`, `double` for
  `f64`, `cudaStream_t` for `stream`);
- where the problem is known (an `expected.json` manifest next to the files, as in
  benchmarks/level1_cuda, maps each file to a built-in problem): `ModelNew(*init)` made under the
  same seed as `Model(*init)` holds the same parameter values, and its forward, run on the CPU at
  the problem's small size (default inputs and every variant) with recording stand-ins for the
  kernels, passes every `ptr` argument as a contiguous tensor whose dtype matches the C pointer
  type, and returns the reference's output shape and dtype (the manifest may expect a
  `shape_mismatch` / `dtype_mismatch`). Nothing is computed there: the kernels never run.

Prints one line per file (OK / FAIL with the first error line) and exits 1 if any file fails.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATH = ROOT / "benchmarks" / "level1_cuda"

_EXTERN = re.compile(r'extern\s+"C"\s+int\s+(\w+)\s*\(([^)]*)\)', re.S)
_SCALAR_KINDS = {
    "int64_t": "i64",
    "long long": "i64",
    "long": "i64",
    "long long int": "i64",
    "int": "i32",
    "int32_t": "i32",
    "float": "f32",
    "double": "f64",
    "cudaStream_t": "stream",
}
_POINTER_DTYPES = {  # C pointee -> torch dtype name (None: any)
    "float": "float32",
    "double": "float64",
    "__half": "float16",
    "half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
    "int": "int32",
    "int32_t": "int32",
    "int64_t": "int64",
    "long long": "int64",
    "long": "int64",
    "void": None,
}


@dataclass
class Capture:
    name: str
    source: str
    functions: dict[str, str]
    lang: str
    flags: tuple[str, ...]
    c_params: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)  # fn -> [(kind, pointee dtype)]


@dataclass
class FileReport:
    rel: str
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    captures: list[Capture] = field(default_factory=list)
    seconds: float = 0.0


def _c_param(text: str) -> tuple[str, str | None] | str:
    """(kind, pointee dtype) of one C parameter declaration, or an error message."""
    words = text.replace("__restrict__", " ").replace("const ", " ").replace("&", " ").strip()
    if "*" in words:
        pointee = " ".join(words.split("*", 1)[0].split())
        if pointee not in _POINTER_DTYPES:
            return f"pointer to an unknown type {pointee!r}"
        return "ptr", _POINTER_DTYPES[pointee]
    parts = words.split()
    if len(parts) < 2:
        return f"cannot read the parameter {text.strip()!r}"
    ctype = " ".join(parts[:-1])
    kind = _SCALAR_KINDS.get(ctype)
    if kind is None:
        return f"no fastext argument type for the C type {ctype!r}"
    return kind, None


def check_signatures(capture: Capture) -> list[str]:
    """Compare each listed function's fastext signature with its extern "C" declaration."""
    errors: list[str] = []
    declared = {m.group(1): m.group(2) for m in _EXTERN.finditer(capture.source)}
    for fn, signature in capture.functions.items():
        kinds = [k.strip() for k in signature.split(",") if k.strip()]
        if fn not in declared:
            errors.append(f'{capture.name}: no `extern "C" int {fn}(...)` in the source')
            continue
        params = [p for p in declared[fn].split(",") if p.strip()]
        if len(params) != len(kinds):
            errors.append(
                f"{capture.name}.{fn}: signature has {len(kinds)} arguments ({signature}), the C function {len(params)}"
            )
            continue
        parsed: list[tuple[str, str | None]] = []
        for i, (kind, param) in enumerate(zip(kinds, params, strict=True)):
            got = _c_param(param)
            if isinstance(got, str):
                errors.append(f"{capture.name}.{fn}: parameter {i + 1}: {got}")
                break
            if got[0] != kind:
                errors.append(
                    f"{capture.name}.{fn}: parameter {i + 1} is {kind} in the signature, C has {param.strip()!r}"
                )
                break
            parsed.append(got)
        else:
            capture.c_params[fn] = parsed
    return errors


class _FakeKernel:
    """Stands in for one fastext function: checks every call's arguments against the signature
    and the C declaration, computes nothing."""

    def __init__(self, capture: Capture, fn: str, problems: list[str]) -> None:
        self.capture, self.fn, self.problems = capture, fn, problems
        self.kinds = [k.strip() for k in capture.functions[fn].split(",") if k.strip()]
        self.calls = 0

    def __call__(self, *args: Any) -> None:
        import torch

        self.calls += 1
        passed = [k for k in self.kinds if k != "stream"]
        where = f"{self.capture.name}.{self.fn}"
        if len(args) != len(passed):
            self.problems.append(f"{where} called with {len(args)} arguments, its signature takes {len(passed)}")
            return
        c_params = [p for p in self.capture.c_params.get(self.fn, []) if p[0] != "stream"]
        for i, (kind, value) in enumerate(zip(passed, args, strict=True)):
            pointee = c_params[i][1] if i < len(c_params) else None
            if kind == "ptr":
                if value is None:
                    continue
                if not isinstance(value, torch.Tensor):
                    self.problems.append(f"{where}: argument {i + 1} (ptr) is a {type(value).__name__}, not a tensor")
                elif not value.is_contiguous():
                    self.problems.append(f"{where}: argument {i + 1} is a non-contiguous tensor")
                elif pointee is not None and str(value.dtype) != f"torch.{pointee}":
                    self.problems.append(f"{where}: argument {i + 1} is {value.dtype}, the C pointer wants {pointee}")
            elif kind in ("i32", "i64"):
                if isinstance(value, bool) or not isinstance(value, int):
                    self.problems.append(f"{where}: argument {i + 1} ({kind}) is a {type(value).__name__}")
            elif kind in ("f32", "f64") and (isinstance(value, bool) or not isinstance(value, int | float)):
                self.problems.append(f"{where}: argument {i + 1} ({kind}) is a {type(value).__name__}")


def load_file(path: Path, report: FileReport, problems: list[str]) -> types.ModuleType | None:
    """Run the file's top level with load_kernels recording instead of building."""
    source = path.read_text()
    try:
        tree = ast.parse(source, str(path))
    except SyntaxError as exc:
        report.errors.append(f"syntax error, line {exc.lineno}: {exc.msg}")
        return None
    if not any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in tree.body):
        report.errors.append("no top-level class ModelNew")

    import kernelwright.fastext as fastext
    from kernelwright.problems.execution import exec_as_module

    def recording_load_kernels(
        name: str, source: str, functions: dict[str, str], *, lang: str = "cuda", flags: tuple[str, ...] = ()
    ) -> types.SimpleNamespace:
        capture = Capture(name, source, dict(functions), lang, tuple(flags))
        report.captures.append(capture)
        report.errors.extend(check_signatures(capture))
        return types.SimpleNamespace(**{fn: _FakeKernel(capture, fn, problems) for fn in functions})

    original = fastext.load_kernels
    fastext.load_kernels = recording_load_kernels  # type: ignore[assignment]
    try:
        module = exec_as_module(source, path, f"kw_checked_{abs(hash(str(path)))}")
    except Exception as exc:
        report.errors.append(f"the file's top level raised {type(exc).__name__}: {exc}")
        return None
    finally:
        fastext.load_kernels = original  # type: ignore[assignment]
    if not report.captures:
        report.errors.append("no load_kernels(...) call: nothing to compile")
    return module


def compile_capture(capture: Capture, workdir: Path) -> str | None:
    """Compile one captured source with fastext's command; None when it builds and exports every
    listed function, else the first error line."""
    from kernelwright.fastext import compile_command

    if capture.lang != "cuda":
        return f"{capture.name}: lang={capture.lang!r}, this check compiles CUDA only"
    folder = Path(tempfile.mkdtemp(prefix=f"{capture.name}-", dir=workdir))
    source_file = folder / f"{capture.name}.cu"
    source_file.write_text(capture.source)
    library = folder / f"lib{capture.name}.so"
    command = compile_command(source_file, library, "cuda", capture.flags)
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=900)
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        lines = output.splitlines()
        first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "nvcc failed")
        return f"{capture.name}: {first.replace(str(folder) + '/', '')}"
    if shutil.which("nm"):
        symbols = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True).stdout
        exported = {line.split()[-1] for line in symbols.splitlines() if line.strip()}
        missing = [fn for fn in capture.functions if fn not in exported]
        if missing:
            return f"{capture.name}: the library exports no {', '.join(missing)}"
    return None


def check_forward(
    module: types.ModuleType, problem_ref: str, expected_reason: str | None, problems: list[str]
) -> list[str]:
    """ModelNew against Model at the problem's small size, the kernels replaced by recorders."""
    import torch

    from kernelwright.problems import resolve_problem
    from kernelwright.problems.instance import materialize

    errors: list[str] = []
    inst = materialize(resolve_problem(problem_ref), "small", seed=0)
    torch.manual_seed(42)
    reference = inst.make_model()
    torch.manual_seed(42)
    try:
        candidate = module.ModelNew(*inst.init_inputs)
    except Exception as exc:
        return [f"ModelNew(*{inst.init_inputs}) raised {type(exc).__name__}: {exc}"]
    ref_params, new_params = list(reference.parameters()), list(candidate.parameters())
    if len(ref_params) != len(new_params) or any(
        a.shape != b.shape or not torch.equal(a, b) for a, b in zip(ref_params, new_params, strict=False)
    ):
        errors.append("ModelNew's parameters differ from Model's under the same seed")
    for k, inputs in enumerate(inst.input_sets()):
        label = "default inputs" if k == 0 else f"variant {k}"
        with torch.no_grad():
            want = reference(*inputs)
            try:
                got = candidate(*inputs)
            except Exception as exc:
                errors.append(f"forward on the small {label} raised {type(exc).__name__}: {exc}")
                continue
        if not isinstance(got, torch.Tensor):
            errors.append(f"forward returned a {type(got).__name__} on the small {label}")
        elif got.shape != want.shape and expected_reason != "shape_mismatch":
            errors.append(f"output shape {list(got.shape)} on the small {label}, Model's {list(want.shape)}")
        elif got.dtype != want.dtype and expected_reason != "dtype_mismatch":
            errors.append(f"output dtype {got.dtype} on the small {label}, Model's {want.dtype}")
    errors.extend(dict.fromkeys(problems))
    return errors


def find_files(paths: list[Path]) -> list[tuple[Path, Path]]:
    """(file, the folder it was found under) for every candidate .py file."""
    found: list[tuple[Path, Path]] = []
    for path in paths:
        if path.is_file():
            found.append((path, path.parent))
            continue
        for file in sorted(path.rglob("*.py"), key=lambda f: _natural(f.relative_to(path).as_posix())):
            if not any(part.startswith(("_", ".")) for part in file.relative_to(path).parts):
                found.append((file, path))
    return found


def _natural(text: str) -> list[Any]:
    """Sort key putting problem_2 before problem_10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


@functools.cache
def manifest_for(root: Path) -> dict[str, dict[str, Any]]:
    manifest = root / "expected.json"
    if not manifest.is_file():
        return {}
    return {entry["file"]: entry for entry in json.loads(manifest.read_text())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[DEFAULT_PATH])
    parser.add_argument("--arch", default="sm_90", help="nvcc -arch (default sm_90: H100/H200)")
    parser.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)), help="parallel nvcc runs")
    parser.add_argument("--no-forward", action="store_true", help="skip the CPU forward check")
    args = parser.parse_args(argv)
    if shutil.which("nvcc") is None:
        print("nvcc not found on PATH", file=sys.stderr)
        return 2
    os.environ["KERNELWRIGHT_CUDA_ARCH"] = args.arch  # fastext.compile_command reads it
    files = find_files(args.paths)
    if not files:
        print("no candidate files found", file=sys.stderr)
        return 2

    reports: list[FileReport] = []
    for file, root in files:
        rel = file.relative_to(root).as_posix()
        report = FileReport(rel)
        problems: list[str] = []
        module = load_file(file, report, problems)
        entry = manifest_for(root).get(rel)
        if module is not None and entry is not None and not args.no_forward:
            report.errors.extend(check_forward(module, entry["problem"], entry.get("reason"), problems))
        elif entry is None:
            report.notes.append("no manifest entry: forward not checked")
        reports.append(report)

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kw-check-cuda-") as tmp, ThreadPoolExecutor(args.jobs) as pool:
        jobs: list[tuple[FileReport, Any]] = []
        for report in reports:
            for capture in report.captures:
                jobs.append((report, pool.submit(_timed(compile_capture), capture, Path(tmp))))
        for report, future in jobs:
            error, seconds = future.result()
            report.seconds += seconds
            if error:
                report.errors.append(error)

    failed = 0
    for report in reports:
        names = ", ".join(c.name for c in report.captures) or "-"
        if report.errors:
            failed += 1
            print(f"FAIL {report.rel} [{names}]: {report.errors[0]}")
            for more in report.errors[1:]:
                print(f"     {more}")
        else:
            note = f"; {'; '.join(report.notes)}" if report.notes else ""
            print(f"OK   {report.rel} [{names}] nvcc {report.seconds:.1f} s{note}")
    wall = time.perf_counter() - start
    print(
        f"{len(reports) - failed} of {len(reports)} files OK, {failed} failed "
        f"(nvcc -arch={args.arch}, {args.jobs} jobs, {wall:.0f} s)"
    )
    return 1 if failed else 0


def _timed(fn: Callable[..., str | None]) -> Callable[..., tuple[str | None, float]]:
    def run(*args: Any) -> tuple[str | None, float]:
        start = time.perf_counter()
        try:
            result = fn(*args)
        except Exception as exc:  # a timeout, a missing tool: the file fails, the rest goes on
            result = f"{type(exc).__name__}: {exc}"
        return result, time.perf_counter() - start

    return run


if __name__ == "__main__":
    sys.exit(main())
