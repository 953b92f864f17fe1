"""``connectx train --ray``'s rollouts on Ray's own multi-node test cluster (a head without CPUs
and three worker nodes of one CPU, on this machine): the games and the trained weights of a run
equal those of the same env slices in one process; a worker node killed mid-rollout has its
slice's actor restarted on the free node and the run finishes, saying how many steps were
dropped; a slice lost for good stops the run with a checkpoint that ``--resume`` finishes; a
wrong address is one line. (Ctrl-C and SIGTERM under ``--ray``: ``tests/ray/test_train_ray.py``.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
pytest.importorskip("sb3_contrib")
psutil = pytest.importorskip("psutil")

from ray.cluster_utils import Cluster  # noqa: E402

from connectx_train import ray_rollouts  # noqa: E402
from connectx_train.config import TrainConfig  # noqa: E402
from connectx_train.opponents import BatchedOpponentSlots  # noqa: E402
from connectx_train.ray_rollouts import SlicedVecEnv  # noqa: E402
from connectx_train.run_setup import EXIT_TIME_LIMIT, RunInterruptedError  # noqa: E402
from connectx_train.trainer import train  # noqa: E402
from tests.ray.conftest import local_cluster, node_workers, running, train_config  # noqa: E402
from tests.train.test_ray_rollouts import assert_same_games, rollout  # noqa: E402
from tests.train.test_train_smoke import SMALL  # noqa: E402

#: one rollout of 4 boards x 32 steps (two for the fault tests), a final panel of 2 games
RUN = [
    *SMALL,
    *("--timesteps", "128", "--n-envs", "4", "--n-steps", "32", "--batch-size", "64"),
    *("--n-epochs", "1", "--panel", "random", "--final-games", "2", "--eval-every", "0"),
    *("--torch-threads", "1", "--env-slices", "2"),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with local_cluster(workers=3) as started:  # two for the slices' actors, one free for a restart
        yield started


def run_config(out: Path, *extra: str) -> TrainConfig:
    return train_config(*RUN, "--out", str(out), *extra)


def log(line: str) -> None:
    """The run's log lines, dropped."""


def test_one_slice_on_the_cluster_plays_the_games_of_the_plain_batched_env(cluster):
    config = TrainConfig(n_envs=5, seed=4)  # one slice: the default
    on_ray = SlicedVecEnv(config, cluster.address)
    try:
        assert on_ray.cluster == (
            f"1 env slice as Ray actors of 1 CPU on {cluster.address}: 4 nodes, 3 CPUs, 0 GPUs"
        )
        assert_same_games(rollout(on_ray), rollout(BatchedOpponentSlots(config)))
    finally:
        on_ray.close()


def test_two_slices_train_the_same_weights_on_the_cluster_as_in_one_process(cluster, tmp_path):
    here = train(run_config(tmp_path / "here"), log)
    there = train(run_config(tmp_path / "there", "--ray", cluster.address), log)
    assert (tmp_path / "there" / "final.npz").read_bytes() == (
        tmp_path / "here" / "final.npz"
    ).read_bytes()
    assert here["cluster"] is None
    assert "2 env slices as Ray actors of 1 CPU" in there["cluster"]
    assert "4 nodes, 3 CPUs" in there["cluster"]
    assert there["cluster"] in (tmp_path / "there" / "report.md").read_text()


def actor_node(cluster: Cluster) -> tuple[Any, list[Any]]:
    """A worker node running an env slice's actor, and its raylet's worker processes."""
    for node in cluster.worker_nodes:
        workers = node_workers(node)
        if running(workers, "ray::EnvSlice"):
            return node, workers
    raise AssertionError("no worker node runs an env slice")


def kill_node_at_step(cluster: Cluster, monkeypatch: pytest.MonkeyPatch, step: int) -> list[Any]:
    """At the ``step``-th step, while it is in flight, kill a worker node that runs a slice's
    actor, as a machine that goes down: its worker processes and the node's own (Ray's test
    cluster alone leaves the workers running for seconds). The list gets the node."""
    killed: list[Any] = []
    original = SlicedVecEnv.step_wait
    steps = [0]

    def step_wait(self: SlicedVecEnv) -> Any:
        steps[0] += 1
        if steps[0] == step:
            node, workers = actor_node(cluster)
            for worker in workers:
                with contextlib.suppress(psutil.Error):
                    worker.kill()
            cluster.remove_node(node, allow_graceful=False)
            killed.append(node)
        return original(self)

    monkeypatch.setattr(SlicedVecEnv, "step_wait", step_wait)
    return killed


def test_a_node_killed_mid_rollout_has_its_slice_restarted_and_the_run_finishes(
    cluster, tmp_path, monkeypatch, caplog
):
    killed = kill_node_at_step(cluster, monkeypatch, 40)
    config = run_config(tmp_path / "run", "--ray", cluster.address, "--timesteps", "256")
    try:
        with caplog.at_level(logging.WARNING, logger="connectx_train.ray_rollouts"):
            report = train(config, log)
    finally:
        cluster.add_node(num_cpus=1)  # a free node again, for the next test
        cluster.wait_for_nodes()
    assert killed
    assert report["timesteps"] == 256
    assert (tmp_path / "run" / "final.npz").is_file()
    warnings = [r.getMessage() for r in caplog.records if "lost its Ray actor" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "actor restarted (1 of 3), its 2 games restarted" in warnings[0]
    assert "the 2 steps in flight dropped" in warnings[0]


def test_a_slice_lost_for_good_stops_with_a_checkpoint_that_resume_finishes(
    cluster, tmp_path, monkeypatch
):
    monkeypatch.setattr(ray_rollouts, "MAX_RESTARTS", 0)
    killed = kill_node_at_step(cluster, monkeypatch, 40)
    config = run_config(tmp_path / "run", "--ray", cluster.address, "--timesteps", "256")
    with pytest.raises(RunInterruptedError) as stopped:
        train(config, log)
    assert killed
    message = str(stopped.value)
    assert len(message.splitlines()) == 1
    assert "lost its Ray actor" in message
    assert "its 0 restarts spent" in message
    assert f"continue with: connectx train --resume --out {tmp_path / 'run'}" in message
    assert stopped.value.exit_status == EXIT_TIME_LIMIT
    assert (tmp_path / "run" / "checkpoint.zip").is_file()
    monkeypatch.undo()
    report = train(dataclasses.replace(config, resume=True, ray=""), log)  # the same slices here
    assert report["timesteps"] >= 256  # whole rollouts from the step it stopped at
    assert (tmp_path / "run" / "final.npz").is_file()


def test_no_cluster_at_the_address_is_a_one_line_error():
    with pytest.raises(ConnectionError, match=r"^no Ray cluster at 127\.0\.0\.1:1: [^\n]*$"):
        SlicedVecEnv(TrainConfig(n_envs=2), "127.0.0.1:1")
