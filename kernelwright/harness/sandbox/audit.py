"""Reporting what candidate code tried: a Python audit hook (PEP 578) that records attempts to
reach the network or to write outside the worker's writable folders, so the result can flag
them (best-effort) or reject the candidate (strict).

This is the reporting layer, not the enforcement: the network namespace and Landlock
(`confine.py`) stop the attempt whatever it is written in. The hook sees what goes through
Python (`socket`, `open`, `os`); a C++ extension calling `connect(2)` directly is stopped by the
kernel but not reported. An audit hook cannot be removed once installed, and it is installed
before the candidate's file runs; it records only while `armed` (the candidate's code may run),
so the harness's own set-up is never mistaken for the candidate's.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_ATTEMPTS = 20  # enough to judge; a loop of attempts must not flood the protocol
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_NETWORK_EVENTS = ("socket.connect", "socket.sendto", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname")
_PATH_EVENTS = {  # audit event -> which arguments are paths being changed
    "os.mkdir": (0,),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.rename": (0, 1),
    "os.symlink": (1,),
    "os.link": (1,),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.utime": (0,),
}


@dataclass
class AttemptLog:
    """What candidate code tried; `kind` is `network_access` or `write_outside_scratch`."""

    writable: tuple[str, ...]
    armed: bool = False
    attempts: list[dict[str, str]] = field(default_factory=list)

    def record(self, kind: str, event: str, target: str) -> None:
        entry = {"kind": kind, "event": event, "target": target[:300]}
        if len(self.attempts) < MAX_ATTEMPTS and entry not in self.attempts:
            self.attempts.append(entry)

    def allowed(self, path: Any) -> bool:
        if isinstance(path, int):  # an open file descriptor: its path was checked when it was opened
            return True
        try:
            text = os.path.abspath(os.fsdecode(path))
        except (TypeError, ValueError):
            return True
        if text.startswith("/dev/") and not text.startswith(("/dev/shm/", "/dev/mqueue/")):
            return True
        return any(text == root or text.startswith(root + os.sep) for root in self.writable)


def _address(args: Sequence[Any]) -> str:
    if len(args) > 1:
        sock, addr = args[0], args[1]
        family = getattr(sock, "family", None)
        if family == socket.AF_UNIX:
            return f"unix:{addr!r}"
        return repr(addr)
    return repr(args)


def install(writable: list[Path]) -> AttemptLog:
    """Install the hook (once per process) and return the log it fills while armed."""
    log = AttemptLog(tuple(os.path.realpath(p) for p in writable))

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if not log.armed:
            return
        if event in _NETWORK_EVENTS:
            if event.startswith("socket.get"):
                log.record("network_access", event, repr(args[0]) if args else "")
            else:
                log.record("network_access", event, _address(args))
        elif event == "open":
            path, mode, flags = [*args, None, None, 0][:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and not log.allowed(path):
                log.record("write_outside_scratch", event, os.fsdecode(path))
        elif event in _PATH_EVENTS:
            for index in _PATH_EVENTS[event]:
                if index < len(args) and not log.allowed(args[index]):
                    log.record("write_outside_scratch", event, str(args[index]))

    sys.addaudithook(hook)
    return log
