"""How `--ray` shares a cluster out among its actors (`ray_runner.actor_plan`, `actor_slots`,
`node_init`): pure functions of the nodes' resources, so no Ray is needed here (CI has none).
Issue #33: tasks of one CPU each, on a Ray instance started with as many CPUs as `--workers`,
ran one problem at a time on a two-GPU host."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.batch.ray_runner import ActorPlan, actor_plan, actor_slots, node_init
from kernelwright.errors import EnvironmentProblem

TWO_GPU_HOST = [{"CPU": 32.0, "GPU": 2.0, "memory": 1e11}]


def test_one_actor_per_gpu_each_with_its_share_of_the_node() -> None:
    assert actor_plan(True, TWO_GPU_HOST, None) == ActorPlan(count=2, cpus=16)
    assert actor_plan(True, TWO_GPU_HOST, 1) == ActorPlan(count=1, cpus=32)  # --workers 1: one GPU, every core


def test_on_a_cluster_the_share_is_the_smallest_a_gpu_node_offers() -> None:
    nodes = [{"CPU": 32.0, "GPU": 2.0}, {"CPU": 24.0, "GPU": 4.0}, {"CPU": 64.0}]  # the last: no GPU
    assert actor_plan(True, nodes, None) == ActorPlan(count=6, cpus=6)


def test_cuda_without_a_gpu_is_an_environment_problem() -> None:
    with pytest.raises(EnvironmentProblem, match="no GPU"):
        actor_plan(True, [{"CPU": 8.0}], None)


def test_cpu_actors_share_the_cpus_but_never_ask_more_than_a_node_has() -> None:
    assert actor_plan(False, [{"CPU": 2.0}], 2) == ActorPlan(count=2, cpus=1)
    assert actor_plan(False, [{"CPU": 2.0}], None) == ActorPlan(count=1, cpus=2)
    assert actor_plan(False, [{"CPU": 8.0}, {"CPU": 8.0}], 1) == ActorPlan(count=1, cpus=8)
    assert actor_plan(False, [{"CPU": 1.0}], 3) == ActorPlan(count=3, cpus=1)


def test_local_actors_are_pinned_to_disjoint_cores_and_cluster_ones_are_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(8)))
    pinned = actor_slots(ActorPlan(count=2, cpus=4), local=True, threads=None)
    assert [s.cores for s in pinned] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [s.threads for s in pinned] == [4, 4] and [s.build_jobs for s in pinned] == [4, 4]
    loose = actor_slots(ActorPlan(count=2, cpus=4), local=False, threads=None)
    assert [(s.cores, s.threads) for s in loose] == [(None, 4), (None, 4)]
    assert actor_slots(ActorPlan(count=1, cpus=4), local=False, threads=2)[0].threads == 2


def test_only_a_local_instance_shares_the_batch_folder() -> None:
    init = {"spec": {}, "stage_dir": "/b/staging", "evidence_dir": "/b/evidence", "plan": [{}], "claims_dir": "/c"}
    assert node_init("local", init) == init
    relative = node_init("local", {**init, "stage_dir": "b/staging"})  # the actors' working directory is not ours
    assert relative["stage_dir"] == str(Path("b/staging").resolve())
    remote = node_init("auto", init)
    assert remote == {"spec": {}, "ship_evidence": True, "stage_dir": None, "evidence_dir": None}
