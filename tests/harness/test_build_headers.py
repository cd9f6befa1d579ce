"""`load_inline` C++ files compile with a precompiled torch header (#29) that only the harness's
trusted build step writes; one that does not fit falls back to the plain build, never failing
the candidate."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kernelwright.fastext import cache_folder
from kernelwright.harness.building import headers
from kernelwright.harness.building.broker import BuildBroker
from kernelwright.harness.sandbox import confine
from kernelwright.problems.candidate.cache import BUILT_MARK

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")
needs_landlock = pytest.mark.skipif(confine.probe().filesystem != "landlock", reason="needs Landlock")


def _inline(name: str, scale: int, **extra: Any) -> dict[str, Any]:
    """A KernelBench-style C++ `load_inline` request, as a worker's loader sends it."""
    source = f"torch::Tensor scale(torch::Tensor x) {{ return x * {scale}; }}"
    spec = {
        "name": name,
        "cpp_sources": source,
        "cuda_sources": None,
        "functions": ["scale"],
        "extra_cflags": None,
        "extra_include_paths": None,
        "with_cuda": None,
        "is_python_module": True,
        **extra,
    }
    return {"kind": "inline", "spec": spec, "with_cuda": False}


# -- which builds may share a header --------------------------------------------------------------


@pytest.mark.parametrize("flags", [None, ["-O3"], ["-O2", "-std=c++20", "-DFOO=1", "-march=native", "-ffast-math"]])
def test_plain_flags_share_a_precompiled_header(flags: list[str] | None) -> None:
    inputs, why = headers.pch_inputs(_inline("kw_h", 2, extra_cflags=flags))
    assert inputs is not None, why
    assert inputs["extra_cflags"] == (flags or [])


@pytest.mark.parametrize(
    "extra",
    [
        {"extra_cflags": ["-include", "/tmp/x.h"]},
        {"extra_cflags": ["-I/tmp"]},
        {"extra_cflags": ["-fplugin=/tmp/p.so"]},
        {"extra_cflags": ["-MF", "/tmp/d"]},
        {"extra_cflags": ["@/tmp/flags"]},
        {"extra_include_paths": ["/tmp"]},
        {"no_implicit_headers": True},
    ],
)
def test_flags_that_read_or_write_files_get_the_plain_build(extra: dict[str, Any]) -> None:
    inputs, why = headers.pch_inputs(_inline("kw_h", 2, **extra))
    assert inputs is None and why


def test_the_key_covers_flags_and_cuda() -> None:
    base = {"extra_cflags": [], "with_cuda": False}
    assert headers.pch_key(base) == headers.pch_key(dict(base))
    assert headers.pch_key(base) != headers.pch_key({**base, "extra_cflags": ["-O3"]})
    assert headers.pch_key(base) != headers.pch_key({**base, "with_cuda": True})


# -- what a builder offers the compiler -----------------------------------------------------------

NINJA = textwrap.dedent(
    """\
    cxx = c++
    cflags = -DTORCH_EXTENSION_NAME={name} -DTORCH_API_INCLUDE_EXTENSION_H -isystem /t/include -fPIC -std=c++20
    post_cflags =
    """
)


def _fake_pch(folder: Path, signature_of: str, size: int = 4) -> Path:
    gch = folder / "include" / (headers.HEADER + ".gch")
    gch.parent.mkdir(parents=True)
    gch.write_bytes(b"gpch"[:size].ljust(size, b"\0"))
    manifest = {"signature": headers.signature(signature_of), "size": 4, "gch": str(gch)}
    (folder / headers.MANIFEST).write_text(json.dumps(manifest))
    return folder


def test_a_fitting_header_goes_first_on_the_cxx_command(tmp_path: Path) -> None:
    pch = _fake_pch(tmp_path / "pch", NINJA.format(name="other_name"))  # the name is not part of the fit
    build = tmp_path / "build"
    build.mkdir()
    (build / "main.cpp").write_text(headers.INCLUDE_LINE + "\nint x;\n")
    offered, why = headers.offer_pch(build, NINJA.format(name="mine"), pch)
    assert offered is not None, why
    line = next(x for x in offered.splitlines() if x.startswith("cflags"))
    assert line.startswith(f"cflags = -isystem {pch / 'include'} -Werror=invalid-pch -H -DTORCH_EXTENSION_NAME=mine")


@pytest.mark.parametrize("damage", ["size", "flags", "first_line", "manifest"])
def test_a_header_that_does_not_fit_is_not_offered(tmp_path: Path, damage: str) -> None:
    pch = _fake_pch(tmp_path / "pch", NINJA.format(name="x"))
    build = tmp_path / "build"
    build.mkdir()
    (build / "main.cpp").write_text(headers.INCLUDE_LINE + "\n")
    ninja = NINJA.format(name="x")
    if damage == "size":
        (pch / "include" / (headers.HEADER + ".gch")).write_bytes(b"gpch-truncated")
    elif damage == "flags":
        ninja = ninja.replace("-fPIC", "-fPIC -O3")
    elif damage == "first_line":
        (build / "main.cpp").write_text("#define X 1\n" + headers.INCLUDE_LINE + "\n")
    else:
        (pch / headers.MANIFEST).write_text("{not json")
    offered, why = headers.offer_pch(build, ninja, pch)
    assert offered is None and why


def test_gcc_s_trace_tells_whether_the_header_was_loaded_and_leaves_the_log() -> None:
    gch = Path("/c/pch/include/torch/extension.h.gch")
    output = f"[1/2] c++ -H ... main.cpp\n! {gch}\n. /usr/include/c++/12/vector\n.. /x/y.h\nmain.cpp:3: warning: z\n"
    used, kept = headers.header_trace(output, gch)
    assert used and kept == "[1/2] c++ -H ... main.cpp\nmain.cpp:3: warning: z\n"
    used, kept = headers.header_trace(
        f"x {gch}\n. /t/torch/extension.h\nMultiple include guards may be useful for:\n/t/a.h\n[2/2] link\n", gch
    )
    assert not used and kept == "[2/2] link\n"


# -- the broker: who prepares the header ----------------------------------------------------------


class _Recorder(BuildBroker):
    """A broker whose builder is replaced by a record of the requests it would run."""

    def __init__(self, root: Path, pch_ok: bool = True) -> None:
        super().__init__(root, {}, timeout_s=60, precompiled_headers=True)
        self.requests: list[dict[str, Any]] = []
        self.pch_ok = pch_ok

    def _run_builder(self, request: dict[str, Any], folder: Path) -> tuple[bool, str | None, str, dict[str, Any]]:
        self.requests.append(request)
        if request["kind"] == "pch":
            if not self.pch_ok:
                return False, None, "g++: internal compiler error", {}
            (folder / headers.MANIFEST).write_text("{}")
            return True, str(folder / headers.MANIFEST), "", {}
        library = folder / "lib.so"
        library.write_bytes(b"")
        return True, str(library), "", {"headers": "precompiled" if request.get("pch") else "plain"}


def test_the_header_is_prepared_once_by_the_broker_and_named_by_it_only(tmp_path: Path) -> None:
    broker = _Recorder(tmp_path / "cache")
    planted = {"pch": str(tmp_path / "elsewhere"), "pch_note": "x", "folder": "/"}
    first = broker.handle({**_inline("kw_a", 2), **planted})  # a worker cannot name a header
    second = broker.handle(_inline("kw_b", 3))
    kinds = [r["kind"] for r in broker.requests]
    assert kinds == ["pch", "inline", "inline"]
    inputs, _ = headers.pch_inputs(_inline("kw_a", 2))
    assert inputs is not None
    pch = cache_folder(tmp_path / "cache" / headers.PCH_DIR, headers.pch_key(inputs))
    assert broker.requests[1]["pch"] == broker.requests[2]["pch"] == str(pch)
    assert (pch / BUILT_MARK).is_file() and json.loads((pch / BUILT_MARK).read_text())["ok"] is True
    assert first["headers"] == second["headers"] == "precompiled"
    assert "headers_prepared_s" in first and "headers_prepared_s" not in second


def test_a_header_that_failed_to_build_is_not_tried_again(tmp_path: Path) -> None:
    broker = _Recorder(tmp_path / "cache", pch_ok=False)
    first = broker.handle(_inline("kw_a", 2))
    second = broker.handle(_inline("kw_b", 3))
    assert [r["kind"] for r in broker.requests] == ["pch", "inline", "inline"]
    assert first["ok"] and second["ok"] and first["headers"] == "plain"
    assert "failed" in broker.requests[2]["pch_note"]


def test_no_header_when_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(headers.ENV_SWITCH, "0")
    broker = BuildBroker(tmp_path / "cache", {}, timeout_s=60)
    assert broker.precompiled_headers is False
    assert broker._headers_for(_inline("kw_a", 2)) == {"pch_note": "precompiled headers are off"}


@needs_landlock
def test_a_candidate_s_builder_cannot_write_the_shared_header(tmp_path: Path) -> None:
    """The builder of a candidate's key is confined to that key's folder: the header's folder,
    next to it in the same cache, is read-only to it."""
    own, shared = tmp_path / "cache" / "ab" / "abc", tmp_path / "cache" / headers.PCH_DIR / "cd" / "cde"
    own.mkdir(parents=True)
    shared.mkdir(parents=True)
    (shared / "include").mkdir()
    gch = shared / "include" / "extension.h.gch"
    gch.write_bytes(b"gpch")
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from kernelwright.harness.building.builder import _confine
        _confine(Path({str(own)!r}), False)
        (Path({str(own)!r}) / "ok.txt").write_text("mine")
        print(Path({str(gch)!r}).read_bytes())
        try:
            Path({str(gch)!r}).write_bytes(b"planted")
            print("WROTE")
        except OSError as exc:
            print("refused", exc.errno)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "refused" in done.stdout and "WROTE" not in done.stdout
    assert gch.read_bytes() == b"gpch" and (own / "ok.txt").is_file()


# -- real builds (slow: the header takes about a minute on 2 cores, each candidate 12-30 s) -------


def _call_scale(library: str) -> Any:
    """Load the built extension in a fresh process (as a worker does) and call it."""
    script = textwrap.dedent(
        f"""
        import torch, torch.utils.cpp_extension as cpp, os
        lib = {library!r}
        m = cpp._import_module_from_library(os.path.basename(lib)[:-3], os.path.dirname(lib), True)
        print(m.scale(torch.arange(4.0)).tolist())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_cpp_candidate_builds_with_the_shared_header_and_a_damaged_one_falls_back(tmp_path: Path) -> None:
    broker = BuildBroker(tmp_path / "cache", {}, timeout_s=900, precompiled_headers=True)
    first = broker.handle(_inline("kw_pch_a", 2))
    assert first["ok"], first.get("log")
    assert first["headers"] == "precompiled", first.get("log")
    assert first["headers_prepared_s"] > 0  # prepared by this request, by the broker's builder
    assert _call_scale(first["library"]) == [0.0, 2.0, 4.0, 6.0]
    timeline = first["timeline"]  # where the builder's time went, in the broker's reply
    assert set(timeline) == {"start_s", "confine_s", "import_s", "torch_s", "ninja_s"}, timeline
    assert min(timeline["start_s"], timeline["confine_s"], timeline["import_s"]) >= 0
    assert 0 < timeline["ninja_s"] <= timeline["torch_s"] < first["seconds"]  # compiled in its ninja run
    [pch_folder] = [p.parent for p in (tmp_path / "cache" / headers.PCH_DIR).glob("*/*/" + BUILT_MARK)]
    gch = pch_folder / "include" / (headers.HEADER + ".gch")
    assert json.loads((pch_folder / headers.MANIFEST).read_text())["size"] == gch.stat().st_size

    # Damage the header without changing its size: GCC refuses it, the build reruns plain.
    with open(gch, "r+b") as handle:
        handle.write(b"XXXXXXXX")
    second = broker.handle(_inline("kw_pch_b", 5))
    assert second["ok"], second.get("log")
    assert second["headers"].startswith("plain: the precompiled header was refused"), second["headers"]
    assert _call_scale(second["library"]) == [0.0, 5.0, 10.0, 15.0]
