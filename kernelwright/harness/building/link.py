"""The build step a worker is started with: `broker_link` opens a `BuildBroker` for one worker
(`workers/process.BuildStep`). The worker's process knows only the protocol; whoever starts a
worker that may build (the evaluation's phases, the builds ahead) hands it this."""

from __future__ import annotations

from kernelwright.fastext import BUILD_TIMEOUT_S
from kernelwright.harness.building.broker import BuildBroker, open_channel
from kernelwright.harness.workers import forkserver
from kernelwright.harness.workers.jobs import WorkerJob
from kernelwright.harness.workers.process import BuildLink


def broker_link(job: WorkerJob, env: dict[str, str]) -> BuildLink:
    """A build broker for `job`'s worker (its builders get `env`, the worker's additions, and are
    forked where forking is on: on the CPU from its worker's server, on a GPU from a server of
    builders alone); on the CPU a timing phase (`live.quiet`) pauses its builders too."""
    broker = BuildBroker(
        job.build_cache,
        env,
        timeout_s=BUILD_TIMEOUT_S,
        pausable=job.device == "cpu",
        # A GPU job's builders carry on through timing phases (on cores of their own), so they are
        # forked from a server of their own that a phase does not stop; a CPU job's from its
        # worker's server, which a phase stops with them (broker.py).
        fork=forkserver.forking_for(job.device, times=False),
    )
    fds_env, child_fds, serve = open_channel(broker)
    return BuildLink(env=fds_env, child_fds=child_fds, serve=serve, close=broker.close)
