"""What a worker may see and what it reports: the scrubbed environment it starts with, the
redaction of secrets from anything the harness writes, and the record of which isolation layers
were in force (`Isolation`, kept in every EvalResult).

Candidate code is untrusted (DESIGN.md): it must never see the harness's keys, tokens or the
locations of credential files. The environment is therefore built from an allow-list of what
torch, triton, nvcc and g++ need, never copied; anything whose name looks like a secret is
dropped even when a prefix would allow it. The kernel-level layers (network namespace, Landlock,
resource limits) live in `confine.py`; this module holds no syscalls and no torch.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from kernelwright.vocabulary import SandboxMode as SandboxMode  # re-exported: the harness imports it from here

SANDBOX_MODES: tuple[SandboxMode, ...] = tuple(SandboxMode)
MODE_VAR = "KERNELWRIGHT_SANDBOX"  # how the harness tells a worker which mode it runs under

# What a build or a run needs: the toolchains' own variables, locale, threads, and the few
# kernelwright variables a worker reads. Exact names, then prefixes.
_ALLOWED = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "USER",
        "LOGNAME",
        "LD_LIBRARY_PATH",
        "LIBRARY_PATH",
        "CPATH",
        "C_INCLUDE_PATH",
        "CPLUS_INCLUDE_PATH",
        "PKG_CONFIG_PATH",
        "CC",
        "CXX",
        "CFLAGS",
        "CXXFLAGS",
        "CPPFLAGS",
        "LDFLAGS",
        "MAX_JOBS",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONUNBUFFERED",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "KERNELWRIGHT_WORKER",
        MODE_VAR,
        "KERNELWRIGHT_CUDA_ARCH",
        "KERNELWRIGHT_FASTEXT_CACHE",
        "KERNELWRIGHT_MEMORY_LIMIT",
        "KERNELWRIGHT_CUDA_INIT",
    }
)
_ALLOWED_PREFIXES = (
    "LC_",
    "CUDA_",
    "CUDNN_",
    "CUBLAS_",
    "NVIDIA_",
    "NVCC_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "PYTORCH_",
    "TRITON_",
    "OMP_",
    "KMP_",
    "MKL_",
    "OPENBLAS_",
    "CCACHE_",
)
# Whatever the allow-list says, these never pass: keys, tokens, passwords, credential files, agents.
_SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT|SIGNING)", re.IGNORECASE
)
_MIN_SECRET_LEN = 6  # shorter values ("1", "true") would redact ordinary text
REDACTED = "[redacted]"


def looks_secret(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def scrubbed_env(environ: Mapping[str, str], extra: Mapping[str, str], *, home: Path, tmp: Path) -> dict[str, str]:
    """A worker's whole environment: the allowed variables of `environ`, then `extra` (the
    harness's own settings for this worker), HOME and TMPDIR pointing into its scratch."""
    env = {
        k: v for k, v in environ.items() if (k in _ALLOWED or k.startswith(_ALLOWED_PREFIXES)) and not looks_secret(k)
    }
    env.update({k: v for k, v in extra.items() if not looks_secret(k)})
    # HOME and TMPDIR: anything that writes "somewhere of its own" (~/.cache, mkstemp) lands in
    # the scratch; the user's real home is never a place a candidate writes to.
    env |= {"HOME": str(home), "TMPDIR": str(tmp), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values to redact: every secret-looking variable of the harness's environment and every
    secret the settings hold (the LLM key from a config file), longest first."""
    environ = os.environ if environ is None else environ
    found = {v for k, v in environ.items() if looks_secret(k) and len(v) >= _MIN_SECRET_LEN}
    from kernelwright.config import known_secrets  # pydantic-settings: not on the CLI's start-up path

    found |= {s for s in known_secrets() if len(s) >= _MIN_SECRET_LEN}
    return sorted(found, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with every known secret value replaced by `[redacted]`."""
    for secret in secret_values() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def read_redacted(path: Path, limit: int | None = None) -> str:
    """A log the harness wrote, as text without secrets. Never follows a symbolic link and reads
    only regular files: a candidate that can write beside its log could otherwise point the
    harness at another file (a key file) and have it copied into the evidence."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:  # a hard link to someone else's file
            return ""
        size = info.st_size
        if limit is not None and size > limit:
            handle.seek(size - limit)
        return redact(handle.read().decode(errors="replace"))


def write_redacted_copy(src: Path, dst: Path) -> bool:
    """Copy a harness log into the evidence, redacted (see `read_redacted`); False if unreadable."""
    text = read_redacted(src)
    if not text and not src.is_file():
        return False
    dst.write_text(text)
    return True


class Isolation(BaseModel):
    """Which isolation layers were in force for a candidate (see docs/threat-model.md)."""

    mode: SandboxMode = SandboxMode.BEST_EFFORT
    env: Literal["scrubbed", "inherited"] = "scrubbed"
    network: Literal["namespace", "landlock-tcp", "none", "unknown"] = "unknown"
    filesystem: Literal["landlock", "none", "unknown"] = "unknown"
    rlimits: dict[str, int] = Field(default_factory=dict, description="Limits set: core, fsize, nproc.")
    capabilities: Literal["dropped", "none-held", "kept", "unknown"] = "unknown"
    sockets: Literal["connect_denied", "unix_denied", "allowed", "unknown"] = Field(
        default="unknown",
        description="connect_denied: a seccomp filter refuses connect, sendto to an address, sendmsg, sendmmsg "
        "and io_uring, so no socket reaches a peer (unix_denied: the filter before 2026-11, which refused "
        "creating Unix-domain sockets; found in older records only).",
    )
    cuda_driver: Literal["inside", "outside", "none"] = Field(
        default="none",
        description="The CUDA driver's helper threads: started under the layers (inside), before them "
        "(outside: they run driver code unconfined), or no driver started at confinement (none).",
    )
    shared_caches: Literal["sealed", "writable", "none"] = Field(
        default="none",
        description="The shared inductor and triton caches: writable while the baselines were compiled, then "
        "sealed (a further Landlock layer) before the candidate was imported; or writable throughout; or none given.",
    )
    writable: list[str] = Field(default_factory=list, description="Where the worker could write.")
    notes: list[str] = Field(default_factory=list, description="Why a layer is missing.")

    def missing(self) -> list[str]:
        """The layers strict mode needs and this lacks."""
        gaps = []
        if self.env != "scrubbed":
            gaps.append("environment not scrubbed")
        if self.network != "namespace":
            gaps.append("no network namespace")
        if self.filesystem != "landlock":
            gaps.append("no Landlock write confinement")
        if not self.rlimits:
            gaps.append("no resource limits")
        if self.sockets != "connect_denied":
            gaps.append("no seccomp filter against connecting to sockets (a Unix-domain socket file)")
        if self.cuda_driver == "outside":
            gaps.append("the CUDA driver's threads run outside the layers")
        return gaps
