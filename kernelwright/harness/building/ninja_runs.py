"""How a `load_inline` build's `build.ninja` is run in the trusted build step's builder (#29).

torch writes `build.ninja`; the builder runs it with up to four adjustments, each offered only
where it fits and each recorded:
- `pch`: `main.cpp` against the precompiled `torch/extension.h` (`headers.py`);
- `light`: the `.cu` against the light `torch/extension.h` (`light_header.py`);
- `ops`: with the light header, the `.cu` in torch's per-operator mode against operator lists
  trimmed to what it names (`op_headers.py`);
- `split`: the `.cu`'s nvcc command through `nvcc_split.py` (nvcc's host and device front ends at
  once; it falls back to the plain nvcc command by itself).
A failed build is run again without the adjustment that may have caused it: without the
per-operator headers and the light header together first (any failure of such a build: the `.cu`
may need them; a candidate's own error is then found in two builds, not three), without the light
header (any failure of a light build: the `.cu` may need the full header), then without
the precompiled header (a failure that names the `.gch`), then without the split (one that left
no record: the wrapper did not run). With none left, torch's own runner builds the plain file,
as before. A failure that none of them can explain is the candidate's own, reported as torch
reports it. Nothing here can fail a build that the plain `build.ninja` would pass.

The broker decides which are allowed (`KERNELWRIGHT_NVCC_SPLIT=0` turns the split off,
`KERNELWRIGHT_LIGHT_CU=0` the light header, `KERNELWRIGHT_OP_HEADERS=0` the per-operator headers,
`KERNELWRIGHT_PCH=0` the precompiled header) and says
so in the builder's request. What happened goes to the builder's record: `headers` (a line: how `main.cpp` was compiled, and
for a CUDA build how the `.cu` was), and for a CUDA build `cuda` (the `.cu`'s header, nvcc's
path and each of its steps' seconds, every attempt).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelwright.harness.building import headers, light_header, nvcc_split, op_headers

SPLIT_SWITCH = "KERNELWRIGHT_NVCC_SPLIT"  # "0": the .cu's nvcc command as torch wrote it
_SPLIT_RECORD = ".split.json"  # next to the object: `$out.split.json`
_RULE = "rule cuda_compile"


def split_enabled() -> bool:
    return os.environ.get(SPLIT_SWITCH, "1") != "0"


def offer_split(build_ninja: str) -> tuple[str | None, str]:
    """`build_ninja` with the `.cu`'s command run through `nvcc_split.py`, or None and why not."""
    lines = build_ninja.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.rstrip("\n") != _RULE:
            continue
        for j in range(i + 1, len(lines)):
            if not lines[j].startswith("  "):
                break
            if lines[j].startswith("  command = $nvcc "):
                wrapper = shlex.join([sys.executable, "-I", str(Path(nvcc_split.__file__).resolve())])
                command = lines[j][len("  command = ") :]
                lines[j] = f"  command = {wrapper} --record $out{_SPLIT_RECORD} -- {command}"
                return "".join(lines), ""
        return None, "the cuda_compile rule's command is not nvcc's"
    return None, "no cuda_compile rule"


def _cu_text(build_directory: Path) -> str | None:
    sources = sorted(build_directory.glob("*.cu"))
    if len(sources) != 1:
        return None
    try:
        return sources[0].read_text(errors="replace")
    except OSError:
        return None


def ninja_runner(
    original: Callable[[str, bool, str], None],
    pch_folder: Path | None,
    record: dict[str, Any],
    *,
    light: bool = False,
    split: bool = False,
    ops: bool = False,
) -> Callable[[str, bool, str], None]:
    """A replacement for torch's `_run_ninja_build` (`original`); see the module's docstring.
    `light`, `split` and `ops`: whether the broker allows the light header, the split nvcc and
    the per-operator headers (its switches; the builder's environment does not carry them)."""

    def build(build_directory: str, verbose: bool, error_prefix: str) -> None:
        folder = Path(build_directory)
        ninja = folder / "build.ninja"
        plain = ninja.read_text()
        cuda = _RULE in plain
        offers: dict[str, Callable[[str], tuple[str | None, str]]] = {}
        notes: dict[str, str] = {}

        def consider(name: str, offer: Callable[[str], tuple[str | None, str]]) -> None:
            text, why = offer(plain)
            if text is None:
                notes[name] = why
            else:
                offers[name] = offer

        consider("pch", lambda text: headers.offer_pch(folder, text, pch_folder))
        if cuda:
            cu = _cu_text(folder)
            if not light:
                notes["light"] = "the light header is off"
            elif cu is None:
                notes["light"] = "not one .cu file"
            else:
                consider("light", lambda text: light_header.offer(text, cu))
            if split:
                consider("split", offer_split)
            else:
                notes["split"] = "the split is off"
            if not ops:
                notes["ops"] = "the per-operator headers are off"
            elif "light" not in offers or cu is None:
                notes["ops"] = "only with the light header"
            else:
                trimmed, why = op_headers.trim(folder, cu)
                if trimmed is None:
                    notes["ops"] = why
                else:
                    notes["ops"] = trimmed.describe()
                    consider("ops", lambda text: op_headers.offer(text, trimmed))
        attempts: list[dict[str, Any]] = []
        try:
            _run(folder, plain, offers, notes, pch_folder, attempts, original, verbose, error_prefix)
        finally:
            ninja.write_text(plain)  # as torch wrote it: the objects are the same either way
            _describe(record, cuda, offers, notes, attempts)

    return build


def _run(
    folder: Path,
    plain: str,
    offers: dict[str, Callable[[str], tuple[str | None, str]]],
    notes: dict[str, str],
    pch_folder: Path | None,
    attempts: list[dict[str, Any]],
    original: Callable[[str, bool, str], None],
    verbose: bool,
    error_prefix: str,
) -> None:
    while offers:
        text = plain
        for offer in offers.values():
            adjusted, _ = offer(text)
            if adjusted is None:  # cannot happen: each was offered on the plain file
                raise RuntimeError("an adjustment of build.ninja no longer applies")
            text = adjusted
        (folder / "build.ninja").write_text(text)
        for old in folder.glob("*" + _SPLIT_RECORD):
            old.unlink()
        start = time.perf_counter()
        done = headers.run_ninja(str(folder))
        attempt: dict[str, Any] = {"with": sorted(offers), "seconds": round(time.perf_counter() - start, 3)}
        output = done.stdout
        if "pch" in offers:
            assert pch_folder is not None  # offered only with one
            attempt["pch_loaded"], output = headers.header_trace(done.stdout, _gch(pch_folder))
        split = _split_records(folder)
        if split:
            attempt["nvcc"] = split
        attempt["ok"] = done.returncode == 0
        attempts.append(attempt)
        if done.returncode == 0:
            _show(output)
            return
        if "ops" in offers:
            del offers["ops"]
            offers.pop("light", None)
            notes["ops"] = notes["light"] = "the build with per-operator headers failed: rebuilt with torch's header"
        elif "light" in offers:
            del offers["light"]
            notes["light"] = "the build with the light header failed: rebuilt with torch's"
        elif "pch" in offers and ".gch" in output:
            del offers["pch"]
            notes["pch"] = "the precompiled header was refused, built without it"
        elif "split" in offers and not split:
            del offers["split"]
            notes["split"] = "the split compile left no record: rebuilt with nvcc's own command"
        else:
            _show(output)
            raise RuntimeError(error_prefix)  # the candidate's own error, its output above (as torch's)
    attempt = {"with": [], "ok": False}
    attempts.append(attempt)
    (folder / "build.ninja").write_text(plain)  # torch's own file, for torch's own runner
    original(str(folder), verbose, error_prefix)
    attempt["ok"] = True


def _show(output: str) -> None:
    """The compiler's output of the attempt that counts (a retried attempt's errors would only
    mislead whoever reads the log: they were about an adjustment, not the candidate)."""
    sys.stdout.write(output)
    sys.stdout.flush()


def _gch(pch_folder: Path) -> Path:
    return pch_folder / "include" / (headers.HEADER + ".gch")


def _split_records(folder: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted(folder.glob("*" + _SPLIT_RECORD)):
        try:
            found.append({"object": path.name[: -len(_SPLIT_RECORD)], **json.loads(path.read_text())})
        except (OSError, ValueError):
            found.append({"object": path.name[: -len(_SPLIT_RECORD)], "path": "unreadable record"})
        path.unlink(missing_ok=True)
    return found


def _describe(
    record: dict[str, Any],
    cuda: bool,
    offers: dict[str, Any],
    notes: dict[str, str],
    attempts: list[dict[str, Any]],
) -> None:
    """The record's `headers` line (and `cuda` for a CUDA build) from what the last attempt used."""
    last = attempts[-1] if attempts else {}
    ok = last.get("ok", False)
    failed = "" if ok or not attempts else " (the build failed)"
    if "pch" in offers:
        cpp = ("precompiled" if last.get("pch_loaded") else "plain: GCC did not load the precompiled header") + failed
    else:
        cpp = f"plain: {notes.get('pch', 'no precompiled header')}" if not failed else "plain (the build failed)"
    if not cuda:
        record["headers"] = cpp
        return
    header = "light" if "light" in offers else f"full: {notes.get('light', '?')}"
    ops = f", {notes['ops']}" if "ops" in offers else ""
    runs = last.get("nvcc") or []
    if "split" not in offers:
        nvcc = f"nvcc: {notes.get('split', '?')}"
    elif runs and all(r.get("path") == "split" for r in runs):
        nvcc = "split"
    else:
        nvcc = "nvcc: " + "; ".join(str(r.get("why", r.get("path"))) for r in runs)
    record["headers"] = f"main.cpp {cpp}; .cu {header} torch/extension.h{ops}; {nvcc}"
    record["cuda"] = {"header": header + ops, "nvcc": nvcc, "attempts": attempts}
