"""A worker's side of the harness's trusted build step (`harness/building/broker.py`): build
requests go out on one pipe as JSON lines, replies come back on another. Requests are answered
in order, one at a time per worker (a lock keeps threads of the candidate from interleaving)."""

from __future__ import annotations

import json
import os
import threading
from typing import Any


class PipeBuilds:
    def __init__(self, request_fd: int, reply_fd: int) -> None:
        self._out = os.fdopen(request_fd, "wb")
        self._in = os.fdopen(reply_fd, "rb")
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, value: str | None) -> PipeBuilds | None:
        """From the "request_fd,reply_fd" the harness put in the worker's environment."""
        if not value:
            return None
        request_fd, reply_fd = (int(part) for part in value.split(","))
        return cls(request_fd, reply_fd)

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            try:
                self._out.write(json.dumps(request).encode() + b"\n")
                self._out.flush()
                line = self._in.readline()
            except OSError as exc:
                return {"ok": False, "log": f"the harness's build step is unreachable: {exc}"}
        if not line:
            return {"ok": False, "log": "the harness's build step closed its pipe"}
        reply: dict[str, Any] = json.loads(line)
        return reply
