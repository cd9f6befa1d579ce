"""Candidate code the profiler runs (its ncu target) is sandboxed too (#14): the target starts
through `confined_exec`, which drops secrets and confines it before it execs; the shared build
cache is only read there (builds the harness completed load, others are made in its scratch);
where ncu cannot profile a confined target, best-effort profiles without it and says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.errors import EnvironmentProblem
from kernelwright.harness.building.broker import BuildBroker
from kernelwright.harness.sandbox import confine
from kernelwright.harness.sandbox.confined_exec import ISOLATION_FILE, wrapper_argv
from kernelwright.profiler import ProfileResult, ProfileStatus
from kernelwright.tools import profile as profile_tool

ROOT = Path(__file__).resolve().parents[2]
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")
needs_landlock = pytest.mark.skipif(confine.probe().filesystem != "landlock", reason="needs Landlock")

PROBE = """
import json, os, pathlib, sys
outside = pathlib.Path(sys.argv[1])
try:
    outside.write_text("x")
    wrote = True
except OSError:
    wrote = False
print(json.dumps({"key": os.environ.get("OPENAI_API_KEY"), "home": os.environ["HOME"], "wrote": wrote}))
"""


@linux
@needs_landlock
def test_confined_exec_drops_secrets_and_confines_what_it_runs(tmp_path: Path) -> None:
    scratch, outside = tmp_path / "scratch", tmp_path / "outside.txt"
    scratch.mkdir()
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-profile", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [*wrapper_argv(scratch), sys.executable, "-c", PROBE, str(outside)],
        capture_output=True, text=True, timeout=60, env=env, check=True,
    )  # fmt: skip
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["key"] is None and got["home"].startswith(str(scratch))
    assert got["wrote"] is False and not outside.exists()
    isolation = json.loads((scratch / ISOLATION_FILE).read_text())
    assert isolation["filesystem"] == "landlock" and isolation["network"] != "none"
    # ncu attaches to its target through the host's network namespace (a target in one of its own
    # is never reached): TCP is closed by Landlock instead, every outbound socket call by seccomp.
    assert isolation["network"] == "landlock-tcp" and isolation["sockets"] == confine.probe().sockets
    assert "no network namespace" in " ".join(isolation["notes"])


LOADS = """
import json, sys
from pathlib import Path
from kernelwright.problems.candidate import load_candidate
builds = []
module = load_candidate(Path(sys.argv[1]), Path(sys.argv[2]), builds=builds, private_root=Path(sys.argv[3]))
print(json.dumps({"answers": [module.marked(), module.fresh()], "builds": builds}))
"""

CANDIDATE = """
import ctypes
import torch
from kernelwright.fastext import load_kernels
_marked = load_kernels("kw_marked", 'extern "C" int f(int* o) { *o = 1; return 0; }', {"f": "ptr"}, lang="cpp")
_fresh = load_kernels("kw_fresh", 'extern "C" int f(int* o) { *o = 2; return 0; }', {"f": "ptr"}, lang="cpp")

def _call(lib):
    out = torch.zeros(1, dtype=torch.int32)
    lib.f(out)
    return int(out.item())

def marked():
    return _call(_marked)

def fresh():
    return _call(_fresh)
"""


@linux
@needs_landlock
def test_a_confined_target_reads_completed_builds_and_builds_the_rest_privately(tmp_path: Path) -> None:
    shared, scratch = tmp_path / "build-cache", tmp_path / "scratch"
    scratch.mkdir()
    source = 'extern "C" int f(int* o) { *o = 1; return 0; }'
    done = BuildBroker(shared, {}, timeout_s=120).handle(
        {"kind": "fastext", "name": "kw_marked", "source": source, "lang": "cpp", "flags": [], "arch": ""}
    )
    assert done["ok"], done.get("log")
    candidate = tmp_path / "candidate.py"
    candidate.write_text(CANDIDATE)
    private = scratch / "build-cache"
    run = subprocess.run(
        [*wrapper_argv(scratch), sys.executable, "-c", LOADS, str(candidate), str(shared), str(private)],
        capture_output=True, text=True, timeout=180, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["answers"] == [1, 2]
    by_name = {b["name"]: b for b in got["builds"]}
    assert by_name["kw_marked"]["cached"] is True and by_name["kw_marked"]["library"] == done["library"]
    assert by_name["kw_fresh"]["library"].startswith(str(private))  # built in the scratch, not shared
    assert not any("kw_fresh" in p.name for p in shared.rglob("*"))


def _result(status: ProfileStatus, stderr: str = "") -> ProfileResult:
    return ProfileResult(status=status, message=status.value, stderr_tail=stderr)


@pytest.mark.parametrize(
    ("first", "mode", "retried"),
    [
        (_result(ProfileStatus.OK), "best-effort", False),
        (_result(ProfileStatus.FAILED, "==ERROR== target application returned an error"), "best-effort", True),
        (_result(ProfileStatus.FAILED, "model raised RuntimeError: boom"), "best-effort", False),
    ],
    ids=["confined-ok", "ncu-fails-confined", "candidate-failed"],
)
def test_profiling_falls_back_only_when_the_sandbox_is_the_problem(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, first: ProfileResult, mode: str, retried: bool
) -> None:
    calls: list[dict] = []

    def fake(problem: str, candidate: Path, **kwargs: object) -> ProfileResult:
        calls.append(kwargs)
        return first.model_copy() if len(calls) == 1 else _result(ProfileStatus.OK)

    monkeypatch.setattr(profile_tool, "profile_problem", fake)
    monkeypatch.setattr(profile_tool.confine, "cuda_after_layers", lambda: (True, ""))
    result = profile_tool.profile_candidate("relu", tmp_path / "c.py", report_path=tmp_path / "r", sandbox=mode)
    assert len(calls) == (2 if retried else 1)
    assert calls[0]["launcher"] and "private_build_cache" in calls[0]
    assert all(call["drop_env"]("OPENAI_API_KEY") for call in calls)  # secrets never reach ncu
    if retried:
        assert "launcher" not in calls[1] and result.ok and result.sandbox.startswith("none: under the sandbox")
    else:
        assert result.status == first.status and not result.sandbox.startswith("none")


def test_where_the_driver_cannot_start_confined_the_profile_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On a host whose driver does not start under the layers (the probe says so), a target
    confined before its driver starts cannot use the GPU: best-effort profiles without the layers
    (no secrets) and says why."""
    calls: list[dict] = []

    def fake(problem: str, candidate: Path, **kwargs: object) -> ProfileResult:
        calls.append(kwargs)
        return _result(ProfileStatus.OK)

    monkeypatch.setattr(profile_tool, "profile_problem", fake)
    monkeypatch.setattr(profile_tool.confine, "cuda_after_layers", lambda: (False, "cuInit returned 304"))
    result = profile_tool.profile_candidate("relu", tmp_path / "c.py", report_path=tmp_path / "r")
    assert result.ok and "cuInit returned 304" in result.sandbox and result.sandbox.startswith("none")
    assert len(calls) == 1 and "launcher" not in calls[0] and calls[0]["drop_env"]("KERNELWRIGHT_LLM_API_KEY")


@pytest.mark.parametrize("driver", [(True, ""), (False, "cuInit returned 304")], ids=["driver-inside", "outside"])
def test_strict_never_profiles_a_candidate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, driver: tuple) -> None:
    """The ncu target cannot have a network namespace of its own (ncu reaches it through the
    host's), so strict, which needs the full set, refuses before running anything."""
    calls: list[dict] = []
    monkeypatch.setattr(profile_tool, "profile_problem", lambda *a, **k: calls.append(k))
    monkeypatch.setattr(profile_tool.confine, "cuda_after_layers", lambda: driver)
    refused = profile_tool.profile_candidate("relu", tmp_path / "c.py", report_path=tmp_path / "r", sandbox="strict")
    assert not refused.ok and refused.sandbox == "refused" and "network namespace" in refused.message
    assert calls == []
    with pytest.raises(EnvironmentProblem) as caught:  # exit 5, not the candidate's crash
        profile_tool.ensure_ok(refused)
    assert caught.value.exit_code == 5


def test_a_sweep_refuses_a_candidate_whose_code_would_run_unconfined(tmp_path: Path) -> None:
    """nsight-python's sweep runs its worker (and ncu's target) without the sandbox's layers: it
    takes a problem's reference only, before anything is started (no ncu needed to see it)."""
    from kernelwright.profiler import SweepSpec, SweepStatus, run_sweep

    refused = run_sweep(SweepSpec(problem="1_relu", candidate=str(tmp_path / "c.py")), work_dir=tmp_path / "w")
    assert refused.status is SweepStatus.FAILED and "sandbox" in refused.message
    assert not (tmp_path / "w").exists()  # nothing was written or started
