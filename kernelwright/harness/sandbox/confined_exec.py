"""Run a command under the candidate sandbox's layers: `python -m
kernelwright.harness.sandbox.confined_exec SCRATCH -- COMMAND...`.

For candidate code that is not run by a harness worker: the profiler's ncu target (the
candidate is imported under `ncu`, which starts this wrapper as its target). The wrapper drops
secret-looking variables from its environment (the rest is kept: ncu's injection travels in
it), points HOME and TMPDIR into SCRATCH, confines itself (`confine.confine`: writable only
SCRATCH; the CUDA driver is left to the command, so it starts under the layers), writes what it
got to SCRATCH/isolation.json and replaces itself with COMMAND (the layers survive `exec`).

Every layer but the network namespace: ncu attaches to its target through sockets of the host's
namespace and waits forever for a target in a namespace of its own (seen on an H100, Nsight
Compute 2025.3; `scripts/diag_ncu_layers.py`). Landlock's TCP rules and the seccomp filter still
leave the target no way to send anything anywhere.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kernelwright.harness.sandbox.isolation import MODE_VAR, SandboxMode, looks_secret

ISOLATION_FILE = "isolation.json"


def wrapper_argv(scratch: Path, mode: SandboxMode = SandboxMode.BEST_EFFORT) -> list[str]:
    """The argv prefix that runs a command confined with `scratch` as its only writable folder."""
    return [sys.executable, "-m", "kernelwright.harness.sandbox.confined_exec", str(scratch), mode, "--"]


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        print("usage: python -m kernelwright.harness.sandbox.confined_exec SCRATCH MODE -- COMMAND...", file=sys.stderr)
        return 2
    from kernelwright.harness.sandbox import confine

    scratch, command = Path(argv[1]), argv[4:]
    mode = SandboxMode.STRICT if argv[2] == "strict" else SandboxMode.BEST_EFFORT
    for name in [k for k in os.environ if looks_secret(k)]:
        del os.environ[name]
    home, tmp = scratch / "home", scratch / "tmp"
    os.environ |= {"HOME": str(home), "TMPDIR": str(tmp), MODE_VAR: mode, "PYTHONDONTWRITEBYTECODE": "1"}
    os.environ["TORCH_EXTENSIONS_DIR"] = str(scratch / "torch-extensions")
    os.environ["CUDA_CACHE_PATH"] = str(scratch / "cuda-cache")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(scratch / "triton")
    isolation = confine.confine([scratch, home, tmp], mode, before_exec=True, network_namespace=False)
    (scratch / ISOLATION_FILE).write_text(isolation.model_dump_json())
    missing = isolation.missing() if mode == "strict" else []
    if missing:
        print(f"--sandbox strict: cannot isolate the command: {'; '.join(missing)}", file=sys.stderr)
        return 5
    os.execvp(command[0], command)
    return 127  # not reached: execvp raises when it fails


if __name__ == "__main__":
    sys.exit(main(sys.argv))
