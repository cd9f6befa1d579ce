"""Scratch folders of evaluations (`kw-eval-*` in /dev/shm or the temp folder) that outlive a
killed run are swept at the next start.

A run killed with SIGKILL (the OOM killer, a closed terminal, a batch scheduler) never reaches
its cleanup, and in /dev/shm its trial tensors hold RAM until reboot. Each scratch folder names
its owner in a pid file (pid and the process's start time, so a recycled pid does not keep a dead
run's folder alive); a folder is removed only when that process is gone, only if this user owns
it, and never a folder without a pid file (another tool's, or one being created right now).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "kw-eval-"
OWNER_FILE = "owner.pid"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None
    when it is gone; "" where there is no /proc (then only its existence is checked)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    return stat[stat.rfind(")") + 2 :].split()[19]


def claim(folder: Path) -> None:
    """Mark `folder` as this process's scratch."""
    pid = os.getpid()
    (folder / OWNER_FILE).write_text(f"{pid} {_start_time(pid) or ''}".strip())


def _alive(owner: str) -> bool:
    parts = owner.split()
    try:
        pid = int(parts[0])
    except (IndexError, ValueError):
        return True  # unreadable: not ours to judge
    if not Path("/proc").is_dir():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    started = _start_time(pid)
    if started is None:
        return False
    return len(parts) < 2 or started == "" or started == parts[1]


def sweep(roots: list[Path] | None = None) -> list[Path]:
    """Remove the scratch folders of evaluations whose process is gone; returns what was removed."""
    if roots is None:
        roots = [Path("/dev/shm"), Path(tempfile.gettempdir())]
    removed = []
    uid = os.getuid()
    for root in dict.fromkeys(roots):
        try:
            folders = [p for p in root.glob(f"{PREFIX}*") if p.is_dir() and not p.is_symlink()]
        except OSError:
            continue
        for folder in folders:
            with contextlib.suppress(OSError):
                if folder.stat().st_uid != uid:
                    continue
                owner = (folder / OWNER_FILE).read_text()
                if _alive(owner):
                    continue
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
                log.info("removed the scratch of a run that ended without cleaning up: %s", folder)
    return removed
