"""`--ray ADDRESS`: a batch's tasks (problems) on an existing Ray cluster (`auto`,
`ray://host:port`) or a local instance (`local`), as one Ray actor per GPU (or per share of the
CPUs), each a batch worker.

An actor is what a local worker is (`pool.py`): the same handler behind the same messages, with
the same look-ahead (judge: candidates built ahead, the next problem's session opened while this
one is judged, `ahead.py`), and the driver feeds the actors from one queue with `LocalPool`'s
logic (one task held ahead, an actor that dies replaced, its task reported). Ray places the
actors and sets each one's CUDA_VISIBLE_DEVICES; every message reaches the driver the moment it
exists (a streaming generator per actor) and goes to the same resumable results file.

Why actors and not a Ray task per problem (issue #33): a task opened its problem's session (the
reference's run, torch.compile of its baselines: the batch's critical path) only when it began,
with nothing built ahead, on one CPU (Ray's default for a task, so one torch thread and, with
`ray.init(num_cpus=<workers>)`, one task at a time on a GPU host). An actor asks for its share
of a node's CPUs (`actor_plan`), and with `local` it is pinned to its own share of the cores,
as a local worker is, so one actor's builds never run on the cores another times on.

Ray is optional (`pip install 'kernelwright[ray]'`) and imported only here, only when asked for.
The nodes need kernelwright installed (the same version). With `local` the actors share this
machine's files (staging, evidence and build claims are the batch folder's, as for local
workers); on a cluster the problem files and candidates travel in each task, the evidence comes
back in the messages, and nothing is built ahead of its problem (the nodes share no claims).
"""

from __future__ import annotations

import logging
import os
import queue
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.batch.pool import Backlog, Handler, LocalPool, MakeWorker, Message, OnMessage, PoolWorker, work
from kernelwright.batch.spec import Slot, plan_slots
from kernelwright.errors import EnvironmentProblem
from kernelwright.vocabulary import Device

log = logging.getLogger(__name__)

LOCAL = "local"
STOP_WAIT_S = 30.0  # an actor told to stop finishes its current message first
_REMOTE_ONLY = ("plan", "claims_dir")  # what only workers sharing this machine's files can use
_PATHS = ("stage_dir", "evidence_dir", "claims_dir")


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EnvironmentProblem(
            "--ray needs Ray, which is not installed here", hint="pip install 'kernelwright[ray]'"
        ) from None
    return ray


@dataclass(frozen=True)
class ActorPlan:
    count: int
    cpus: int
    """CPUs each actor asks Ray for (Ray also sets its OMP_NUM_THREADS to this)."""


def actor_plan(gpu: bool, nodes: list[dict[str, float]], workers: int | None) -> ActorPlan:
    """How many actors and how many CPUs each, from the alive nodes' resources: on `cuda` one
    per GPU (at most `workers`), each with its node's CPUs shared among the node's GPUs it may
    use; on the CPU `workers` (default 1), each with an equal share of the CPUs, no more than a
    node holds. A share is the smallest any node offers, so every actor fits wherever Ray puts it."""
    if gpu:
        with_gpus = [n for n in nodes if n.get("GPU", 0) >= 1]
        gpus = sum(int(n["GPU"]) for n in with_gpus)
        if not gpus:
            raise EnvironmentProblem("--device cuda: the Ray cluster has no GPU", hint="or --device cpu")
        count = min(gpus, workers) if workers else gpus
        cpus = min(int(n.get("CPU", 0)) // min(int(n["GPU"]), count) for n in with_gpus)
        return ActorPlan(count, max(1, cpus))
    count = workers or 1
    total = sum(int(n.get("CPU", 0)) for n in nodes)
    largest = max((int(n.get("CPU", 0)) for n in nodes), default=0)
    return ActorPlan(count, max(1, min(largest, total // count)))


def actor_slots(plan: ActorPlan, local: bool, threads: int | None) -> list[Slot]:
    """The actors' slots. With `local`, each pinned to its own share of this process's cores (as
    `plan_slots` shares them among local workers); on a cluster, unpinned, `plan.cpus` threads."""
    if local:
        shares = plan_slots(Device.CPU, workers=plan.count, gpus=None, threads=threads)
        return [Slot(index=s.index, label=f"ray{s.index}", cores=s.cores, threads=s.threads) for s in shares]
    return [Slot(index=i, label=f"ray{i}", threads=threads or plan.cpus) for i in range(plan.count)]


def node_init(address: str, init: dict[str, Any]) -> dict[str, Any]:
    """The workers' `init` for this address: a local instance's actors share the batch folder,
    a cluster's get their problems in the tasks and send their evidence back."""
    if address == LOCAL:  # absolute: an actor's working directory need not be this process's
        return {k: str(Path(v).resolve()) if k in _PATHS and v else v for k, v in init.items()}
    shipped = {k: v for k, v in init.items() if k not in _REMOTE_ONLY}
    return {**shipped, "ship_evidence": True, "stage_dir": None, "evidence_dir": None}


class BatchActor:
    """One batch worker as a Ray actor (created by `_RayWorker`, `ray.remote` applied there)."""

    def __init__(self, handler: Handler, make_worker: MakeWorker | None, init: dict[str, Any], slot: dict[str, Any]):
        import ray

        self._inbox = Backlog()
        self._handler = make_worker(self._inbox) if make_worker is not None else handler
        self._lookahead = make_worker is not None
        self._init = init
        self._next = 0  # the sequence number of the next message to hand to the inbox
        self._order = threading.Condition()
        given = Slot.model_validate(slot)
        gpus = [str(g) for g in ray.get_gpu_ids()]
        where = f"gpu{','.join(gpus)}" if gpus else f"cpu{given.index}"
        self._slot = given.model_copy(update={"label": f"ray:{ray.get_runtime_context().get_node_id()[:8]}:{where}"})

    def put(self, seq: int, message: Message | None) -> None:
        """The driver's messages, in the order it sent them (a threaded actor may run calls out
        of order: each waits for the one before it)."""
        with self._order:
            self._order.wait_for(lambda: self._next == seq)
            self._inbox.put(message)
            self._next += 1
            self._order.notify_all()

    def messages(self) -> Iterator[Message]:
        """Everything the worker says, as it says it, until it stops (a streaming generator)."""
        out: queue.Queue[Message | None] = queue.Queue()

        def run() -> None:
            if self._slot.cores:  # this thread's: inherited by the threads and processes the worker starts
                os.sched_setaffinity(0, self._slot.cores)
            try:
                work(self._handler, self._inbox, self._slot, self._init, out.put, lookahead=self._lookahead)
            finally:
                close = getattr(self._handler, "close", None)
                if close is not None:
                    close()
                out.put(None)

        threading.Thread(target=run, daemon=True).start()
        while (message := out.get()) is not None:
            yield message


class _RayWorker:
    """The driver's side of one actor, what `LocalPool` drives (`pool.PoolWorker`)."""

    def __init__(self, actor_class: Any, slot: Slot, handler: Handler, make: MakeWorker | None, init: dict[str, Any]):
        self.slot = slot
        self._actor = actor_class.remote(handler, make, init, slot.model_dump(mode="json"))
        self._stream = self._actor.messages.remote()
        self._seq = 0
        self._ended: str | None = None  # why its stream ended ("" when it stopped normally)

    def send(self, message: Message) -> None:
        if self._ended is None:
            self._actor.put.remote(self._seq, message)
            self._seq += 1

    def messages(self) -> Iterator[Message]:
        import ray

        try:
            for ref in self._stream:
                yield ray.get(ref)
            self._ended = ""
        except ray.exceptions.RayError as exc:
            self._ended = f"{type(exc).__name__}: {exc}"

    def wait(self, timeout: float) -> int | None:
        return None if self._ended is None else int(bool(self._ended))

    def log_tail(self, limit: int = 2000) -> str:
        return (self._ended or "")[-limit:]

    def kill(self) -> None:
        import ray

        ray.kill(self._actor, no_restart=True)

    def close(self) -> None:
        import ray

        self.send({"type": "stop"})
        if self._ended is None:  # the stream's end: the worker has closed what it opened
            deadline = time.monotonic() + STOP_WAIT_S
            ready: list[Any] = []
            while not ready and time.monotonic() < deadline:
                ready, _ = ray.wait([self._stream], timeout=1.0)
        self.kill()


class RayPool(LocalPool):
    """`LocalPool` whose workers are Ray actors."""

    def __init__(
        self, actor_class: Any, slots: list[Slot], handler: Handler, make: MakeWorker | None, init: dict[str, Any]
    ):
        super().__init__("", slots, init, Path(tempfile.gettempdir()))  # no log files: actors log with Ray
        self._actor_class, self._handler, self._make = actor_class, handler, make
        self.started: list[_RayWorker] = []

    def _start(self, slot: Slot) -> PoolWorker:
        worker = _RayWorker(self._actor_class, slot, self._handler, self._make, self.init)
        self.started.append(worker)
        return worker


def _start_ray(ray: Any, address: str) -> None:
    started = time.monotonic()
    if address == LOCAL:  # every core of this process, every GPU it sees (Ray detects them)
        ray.init(num_cpus=len(os.sched_getaffinity(0)), include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)
    log.info("ray.init(%s): %.1f s", address, time.monotonic() - started)


def run_on_ray(
    address: str,
    handler: Handler,
    init: dict[str, Any],
    tasks: list[dict[str, Any]],
    on_message: OnMessage,
    *,
    gpu: bool,
    make_worker: MakeWorker | None = None,
    workers: int | None = None,
    threads: int | None = None,
) -> None:
    """Run every task on Ray actors (`actor_plan`); `on_message` sees each message (from the
    actors' threads, as for `LocalPool`: it must be thread-safe)."""
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        _start_ray(ray, address)
    pool: RayPool | None = None
    try:
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
        plan = actor_plan(gpu, nodes, workers)
        log.info("ray: %d actors, %d CPUs each%s", plan.count, plan.cpus, ", one GPU each" if gpu else "")
        actor_class = ray.remote(num_gpus=1 if gpu else 0, num_cpus=plan.cpus, max_restarts=0, max_concurrency=8)(
            BatchActor
        )
        slots = actor_slots(plan, address == LOCAL, threads)
        pool = RayPool(actor_class, slots, handler, make_worker, node_init(address, init))
        pool.run(tasks, on_message)
    finally:
        if pool is not None:
            for worker in pool.started:  # on an error or Ctrl-C: none is left running on the cluster
                worker.kill()
        if started_here:
            ray.shutdown()
