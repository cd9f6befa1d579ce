"""`--ray ADDRESS`: a batch's tasks (problems) as Ray tasks, one GPU each (or one CPU), on an
existing Ray cluster (`auto`, `ray://host:port`) or a local instance (`local`).

No scheduler of our own: Ray places the tasks and sets each one's CUDA_VISIBLE_DEVICES. Each task
runs the same handler as a local worker and is a Ray generator, so the driver receives every
result the moment it exists and appends it to the same resumable results file. Ray is optional
(`pip install 'kernelwright[ray]'`) and imported only here, only when asked for. The nodes need
kernelwright installed (the same version) and the problem files are shipped in each task, so
they need no shared file system.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any

from kernelwright.batch.pool import Handler, Message, OnMessage, started
from kernelwright.batch.spec import Slot
from kernelwright.errors import EnvironmentProblem

log = logging.getLogger(__name__)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EnvironmentProblem(
            "--ray needs Ray, which is not installed here", hint="pip install 'kernelwright[ray]'"
        ) from None
    return ray


def _run_task(handler: Handler, init: dict[str, Any], threads: int | None, task: dict[str, Any]) -> Iterator[Message]:
    """On a Ray worker: the handler in a thread, its messages yielded as they come."""
    import ray

    context = ray.get_runtime_context()
    gpus = ray.get_gpu_ids()
    label = f"ray:{context.get_node_id()[:8]}" + (f":gpu{','.join(str(g) for g in gpus)}" if gpus else "")
    slot = Slot(index=0, label=label, threads=threads)
    messages: queue.Queue[Message | None] = queue.Queue()

    def run() -> None:
        try:
            handler(init, slot, task, messages.put)
        except Exception as exc:  # reported to the driver as this task's failure
            messages.put({"type": "task_failed", "task": task, "detail": f"{type(exc).__name__}: {exc}"})
        finally:
            messages.put(None)

    threading.Thread(target=run, daemon=True).start()
    yield started(slot, task)
    while (message := messages.get()) is not None:
        yield message


def run_on_ray(
    address: str,
    handler: Handler,
    init: dict[str, Any],
    tasks: list[dict[str, Any]],
    on_message: OnMessage,
    *,
    gpu: bool,
    threads: int | None = None,
    local_cpus: int | None = None,
) -> None:
    """Run every task as a Ray generator task; `on_message` sees each message (in this thread)."""
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        if address == "local":
            ray.init(num_cpus=local_cpus, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    driver = Slot(index=0, label="ray")
    remote = ray.remote(num_gpus=1 if gpu else 0, num_cpus=1, max_retries=0)(_run_task)
    generators = {remote.remote(handler, init, threads, task): task for task in tasks}
    pending = list(generators)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for generator in ready:
                try:
                    ref = next(generator)
                except StopIteration:
                    continue
                try:
                    message = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    on_message(driver, {"type": "task_failed", "task": generators[generator], "detail": str(exc)})
                    continue
                on_message(driver, message)
                pending.append(generator)
    except BaseException:
        for generator in pending:
            ray.cancel(generator, force=True)
        raise
    finally:
        if started_here:
            ray.shutdown()
