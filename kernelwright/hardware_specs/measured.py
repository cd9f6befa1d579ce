"""CPU ceilings measured on this machine: memory bandwidth and fp32 matmul FLOP/s.

A CPU has no spec table, and its ceilings depend on how many threads torch uses, so they are
measured, once per process (`functools.cache`), at `torch.get_num_threads()` threads: the count
the harness times references and candidates with.

Method (about 0.5 s on a 2-core machine; the timed repeats stop early past `BUDGET_S`):
- Bandwidth: `dst.copy_(src)` of two fp32 tensors of `COPY_MIB` MiB each, both first touched so
  page faults stay outside the timing; one warm-up copy, then up to `REPEATS` timed copies.
  Bytes counted: read + write (2 x `COPY_MIB` MiB); the write-allocate read a cache may add is not
  counted, so the figure is what a kernel's own byte count is measured against. 256 MiB is larger
  than the last-level cache of common server CPUs, so the copy runs from DRAM.
- Compute: `a @ b` of two square fp32 matrices (1024, or 2048 with more than 8 threads so every
  thread has work); one warm-up, then up to `REPEATS` timed products; 2 N^3 flop each.
Each figure is the fastest of its repeats: a ceiling is the most the machine was seen to do, and
other work on the machine only ever slows a repeat down. They are machine readings, low by as much
as the machine was busy while they ran: good for a roofline, not for asserting exact values (the
agent says so when a reference runs faster than the speed of light they imply).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

COPY_MIB = 256
REPEATS = 5
BUDGET_S = {"copy": 1.0, "matmul": 0.5}  # timed repeats stop early past these (warm-ups come on top)


@dataclass(frozen=True)
class CpuCeilings:
    """Measured ceilings of this CPU at `threads` torch threads."""

    threads: int
    bandwidth_bytes_per_s: float
    fp32_matmul_flops: float
    copy_mib: int
    matmul_n: int
    repeats: int

    @property
    def bandwidth_source(self) -> str:
        return f"measured on this CPU: {self.threads} threads, torch copy of {self.copy_mib} MiB"

    @property
    def flops_source(self) -> str:
        return f"measured on this CPU: {self.threads} threads, fp32 matmul {self.matmul_n}x{self.matmul_n}"


def _best_seconds(fn: Callable[[], object], budget_s: float) -> tuple[float, int]:
    """Fastest wall time of `fn` over up to REPEATS calls after one warm-up (at least one timed call)."""
    fn()
    deadline = time.perf_counter() + budget_s
    times: list[float] = []
    while len(times) < REPEATS and (not times or time.perf_counter() < deadline):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), len(times)


def _copy_seconds(numel: int) -> tuple[float, int]:
    import torch

    src = torch.ones(numel, dtype=torch.float32)  # filled: pages are touched before the timing
    dst = torch.zeros(numel, dtype=torch.float32)
    return _best_seconds(lambda: dst.copy_(src), BUDGET_S["copy"])


def _matmul_seconds(n: int) -> tuple[float, int]:
    import torch

    a = torch.randn(n, n, dtype=torch.float32)
    b = torch.randn(n, n, dtype=torch.float32)
    return _best_seconds(lambda: torch.mm(a, b), BUDGET_S["matmul"])


@functools.cache
def cpu_ceilings() -> CpuCeilings:
    """This CPU's bandwidth and fp32 matmul ceilings (measured once per process; see the module doc)."""
    import torch

    threads = int(torch.get_num_threads())
    numel = COPY_MIB * 2**20 // 4
    copy_s, copies = _copy_seconds(numel)
    n = 2048 if threads > 8 else 1024
    matmul_s, products = _matmul_seconds(n)
    ceilings = CpuCeilings(
        threads=threads,
        bandwidth_bytes_per_s=2 * numel * 4 / copy_s,
        fp32_matmul_flops=2 * n**3 / matmul_s,
        copy_mib=COPY_MIB,
        matmul_n=n,
        repeats=min(copies, products),
    )
    log.debug("measured CPU ceilings: %s", ceilings)
    return ceilings
