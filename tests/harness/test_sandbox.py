"""The candidate sandbox: scrubbed environment, redaction, data-only output loading, scratch
sweeping, and strict mode's refusal. No worker runs here (fast); the end-to-end adversarial
candidate is in test_sandbox_adversarial.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelwright.errors import EnvironmentProblem, ExitCode
from kernelwright.harness import outputs
from kernelwright.harness.options import EvalOptions
from kernelwright.harness.sandbox import confine, scratch
from kernelwright.harness.sandbox.audit import AttemptLog
from kernelwright.harness.sandbox.isolation import Isolation, read_redacted, redact, scrubbed_env, secret_values
from kernelwright.harness.session import EvalSession
from kernelwright.harness.workers.process import refuse_unless_isolated
from kernelwright.problems import resolve_problem

SECRET_ENV = {
    "OPENAI_API_KEY": "sk-test-secret",
    "KERNELWRIGHT_LLM_API_KEY": "sk-kw-secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
    "GITHUB_TOKEN": "ghp_example_token",
    "HF_TOKEN": "hf_example_token",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/u/creds.json",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "TORCH_HUB_TOKEN": "hub-token-value",  # an allowed prefix does not let a secret through
    "TRITON_API_KEY": "triton-key-value",
}
NEEDED_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "CUDA_VISIBLE_DEVICES": "0",
    "CUDA_HOME": "/usr/local/cuda",
    "NVIDIA_VISIBLE_DEVICES": "all",
    "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
    "CXX": "g++",
    "NVCC_APPEND_FLAGS": "-lineinfo",
    "TORCH_CUDA_ARCH_LIST": "9.0",
    "TORCHINDUCTOR_CACHE_DIR": "/cache/inductor",
    "TRITON_CACHE_DIR": "/cache/triton",
    "OMP_NUM_THREADS": "4",
    "PYTHONPATH": "/src",
}


def test_worker_environment_is_an_allow_list_without_secrets(tmp_path: Path) -> None:
    environ = {**SECRET_ENV, **NEEDED_ENV, "HOME": "/root", "TMPDIR": "/tmp", "SOME_TOOL_SETTING": "x"}
    env = scrubbed_env(environ, {"KERNELWRIGHT_WORKER": "1"}, home=tmp_path / "home", tmp=tmp_path / "tmp")
    assert not set(SECRET_ENV) & set(env), sorted(set(SECRET_ENV) & set(env))
    assert not any(value in env.values() for value in SECRET_ENV.values())
    assert {k: env[k] for k in NEEDED_ENV} == NEEDED_ENV
    assert env["HOME"] == str(tmp_path / "home") and env["TMPDIR"] == str(tmp_path / "tmp")
    assert "SOME_TOOL_SETTING" not in env and env["KERNELWRIGHT_WORKER"] == "1"


def test_known_secret_values_are_redacted(tmp_path: Path) -> None:
    secrets = secret_values(SECRET_ENV)
    text = "key=sk-test-secret token ghp_example_token path /usr/bin"
    assert redact(text, secrets) == "key=[redacted] token [redacted] path /usr/bin"
    assert "sk-test-secret" not in redact("a sk-test-secret b", secret_values({"OPENAI_API_KEY": "sk-test-secret"}))


def test_logs_are_read_without_following_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    secret_file = tmp_path / "credentials"
    secret_file.write_text("private material")
    log = tmp_path / "worker.log"
    log.symlink_to(secret_file)  # what a candidate could leave in its folder
    assert read_redacted(log) == ""
    log.unlink()
    log.write_text("building...\nleaked sk-test-secret\n")
    assert read_redacted(log) == "building...\nleaked [redacted]\n"


class _Exploit:
    """Unpickling this runs code: what a candidate could save as its 'output'."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def test_candidate_outputs_are_loaded_as_data_only(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = tmp_path / "candidate_0.out"
    torch.save([torch.ones(2), _Exploit(marker)], evil)  # a pickle is not the output format: never unpickled
    value, problem = outputs.load_output(evil)
    assert value is None and problem is not None and not marker.exists()

    good = tmp_path / "candidate_1.out"
    outputs.save_output((torch.ones(2, 3), [torch.zeros(1), 2.5], None), good)
    value, problem = outputs.load_output(good)
    assert problem is None and torch.equal(value[0], torch.ones(2, 3)) and value[1][1] == 2.5 and value[2] is None

    linked = tmp_path / "candidate_2.out"
    linked.symlink_to(good)
    assert outputs.load_output(linked)[1] is not None

    outputs.save_output({"not": torch.ones(1)}, tmp_path / "candidate_3.out")  # a dict is not an output form
    assert "unexpected dict" in str(outputs.load_output(tmp_path / "candidate_3.out")[1])


def test_audit_log_knows_the_writable_folders(tmp_path: Path) -> None:
    log = AttemptLog((str(tmp_path / "scratch"),))
    assert log.allowed(tmp_path / "scratch" / "a" / "b.txt") and log.allowed("/dev/null") and log.allowed(3)
    assert not log.allowed(tmp_path / "scratch-other") and not log.allowed("/tmp/x") and not log.allowed("/dev/shm/x")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_scratch_of_dead_runs_is_swept_and_live_ones_kept(tmp_path: Path) -> None:
    dead, live, unmarked, recycled = (
        tmp_path / f"{scratch.PREFIX}{n}" for n in ("dead", "live", "unmarked", "recycled")
    )
    for folder in (dead, live, unmarked, recycled):
        (folder / "data").mkdir(parents=True)
    (dead / scratch.OWNER_FILE).write_text(str(_dead_pid()))
    scratch.claim(live)
    (recycled / scratch.OWNER_FILE).write_text(f"{os.getpid()} 1")  # our pid, another start time
    other = tmp_path / "not-ours"
    other.mkdir()
    assert sorted(scratch.sweep([tmp_path])) == sorted([dead, recycled])
    assert live.is_dir() and unmarked.is_dir() and other.is_dir() and not dead.exists()


def test_strict_refuses_without_every_layer(monkeypatch: pytest.MonkeyPatch, shared_home: Path) -> None:
    lacking = Isolation(network="none", filesystem="landlock", rlimits={"core": 0}, notes=["no userns"])
    monkeypatch.setattr(confine, "probe", lambda: lacking)
    refuse_unless_isolated("best-effort")  # best-effort runs with what there is
    opts = EvalOptions(sandbox="strict", build_cache=shared_home / "build-cache", timing=False)
    with pytest.raises(EnvironmentProblem) as caught:
        EvalSession(resolve_problem("relu"), opts)
    assert caught.value.exit_code == ExitCode.ENVIRONMENT and "network namespace" in caught.value.message


def test_settings_choose_the_sandbox_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.config import load_settings

    assert EvalOptions.from_settings(load_settings()).sandbox == "best-effort"
    monkeypatch.setenv("KERNELWRIGHT_SANDBOX", "strict")
    assert EvalOptions.from_settings(load_settings()).sandbox == "strict"
    assert EvalOptions.from_settings(load_settings(), sandbox="best-effort").sandbox == "best-effort"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux isolation layers")
def test_doctor_reports_the_sandbox_layers() -> None:
    from kernelwright.tools.doctor import check_sandbox

    checks = {c.name: c for c in check_sandbox()}
    assert set(checks) == {"sandbox env", "sandbox net", "sandbox files", "sandbox sockets", "sandbox limits"}
    found = confine.probe()
    assert (checks["sandbox net"].level.value == "OK") == (found.network == "namespace")
    assert (checks["sandbox files"].level.value == "OK") == (found.filesystem == "landlock")
    assert (checks["sandbox sockets"].level.value == "OK") == (found.sockets == "connect_denied")
    for check in checks.values():
        assert check.level.value == "OK" or check.fix or check.name == "sandbox limits"


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernelwright", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )


def test_eval_sandbox_flag_is_checked_and_strict_refuses_with_exit_5(tmp_path: Path) -> None:
    candidate = tmp_path / "c.py"
    candidate.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n")
    bad = _cli("eval", "relu", str(candidate), "--device", "cpu", "--sandbox", "loose", cwd=tmp_path)
    assert bad.returncode == ExitCode.USAGE and "--sandbox" in bad.stderr
    # a machine without user namespaces: strict must refuse before any worker starts
    probe = "import kernelwright.harness.sandbox.confine as c; c.probe = lambda: c.Isolation(network='none')"
    script = f"{probe}\nimport sys\nfrom kernelwright.cli import main\nmain(sys.argv[1:])"
    refused = subprocess.run(
        [sys.executable, "-c", script, "eval", "relu", str(candidate), "--device", "cpu", "--sandbox", "strict"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert refused.returncode == ExitCode.ENVIRONMENT, refused.stderr
    assert "sandbox strict" in refused.stderr and "network namespace" in refused.stderr
