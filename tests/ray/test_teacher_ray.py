"""Teacher labelling as Ray tasks on Ray's own test cluster (a head without CPUs and two one-CPU
worker nodes on this machine): the labels equal the local ones, a node lost mid-labelling has its
chunk run again elsewhere, and a chunk lost for good stops the labelling with the chunks done
cached, so that a later call finishes with the same labels. The cluster's workers run at the
tests' niceness, not Ray's nice 15."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
pytest.importorskip("psutil")

import ray
from ray.cluster_utils import Cluster

from connectx_baselines import teacher_ray
from connectx_baselines.teacher_labels import (
    CHUNK,
    ChunkResult,
    ChunkSettings,
    LabellingStoppedError,
    label_chunks,
)
from connectx_baselines.teacher_ray import ChunkLostError
from tests.ray.conftest import local_cluster, node_workers, running

#: 6x7 positions of 14 stones or more: most of a second a chunk, long enough to lose a node
SETTINGS = ChunkSettings((6, 7, 4), min_ply=14, keep=0.35, node_limit=100_000)
COUNT, SEED = 3 * CHUNK, 5
#: a task that does not show up or a cluster that does not come back fails the test, never hangs
DEADLINE = 120.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with local_cluster(workers=2) as started:
        yield started


@pytest.fixture(scope="module")
def local_labels() -> list[ChunkResult]:
    return label(workers=1)


def label(cache: Path | None = None, **options: Any) -> list[ChunkResult]:
    return label_chunks(SETTINGS, COUNT, SEED, exclude=(), cache=cache, shipped=False, **options)


def assert_same(got: list[ChunkResult], expected: list[ChunkResult]) -> None:
    assert len(got) == len(expected) == 3
    for (moves, values, games, skipped), (moves_0, values_0, games_0, skipped_0) in zip(
        got, expected, strict=True
    ):
        assert [list(m) for m in moves] == [list(m) for m in moves_0]
        np.testing.assert_array_equal(np.array(values), np.array(values_0))
        assert (games, skipped) == (games_0, skipped_0)


def labelling_on(node: Any) -> bool:
    """Whether a worker of ``node`` (a child of its raylet) is labelling a chunk now."""
    return bool(running(node_workers(node), "ray::label_chunk"))


def remove_when(cluster: Cluster, ready: Callable[[], bool]) -> list[Any]:
    """From a thread, once ``ready()``, remove a worker node that is labelling a chunk; the list
    gets the node."""
    removed: list[Any] = []

    def watch() -> None:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            busy = [node for node in cluster.worker_nodes if labelling_on(node)]
            if busy and ready():
                cluster.remove_node(busy[0], allow_graceful=False)
                removed.append(busy[0])
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return removed


def test_the_clusters_workers_run_at_the_niceness_of_the_tests(cluster):
    @ray.remote
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote(), timeout=DEADLINE) == os.nice(0)


def test_same_labels_on_the_cluster_as_in_one_process(cluster, local_labels, tmp_path):
    assert_same(label(tmp_path, ray=cluster.address), local_labels)
    assert len(list(tmp_path.glob("chunk*.npz"))) == 3


def test_a_node_lost_mid_chunk_has_the_chunk_run_again_elsewhere(cluster, local_labels):
    removed = remove_when(cluster, lambda: True)
    labels = label(ray=cluster.address)
    assert removed, "the node never labelled a chunk"
    assert_same(labels, local_labels)


def test_a_chunk_lost_for_good_stops_with_the_chunks_done_kept(
    cluster, local_labels, tmp_path, monkeypatch
):
    monkeypatch.setattr(teacher_ray, "RETRIES", 0)
    monkeypatch.setattr(teacher_ray, "NO_CPU_SECONDS", 5.0)
    # the first chunk's file appears as soon as its result is fetched, while the node still has
    # the next chunks to label (fetched once a second, the three could all be done by then)
    monkeypatch.setattr(teacher_ray, "POLL_SECONDS", 0.1)
    removed = remove_when(cluster, lambda: any(tmp_path.glob("chunk*.npz")))
    started = time.monotonic()
    with pytest.raises(ChunkLostError) as lost:
        label(tmp_path, ray=cluster.address)
    assert removed
    assert time.monotonic() - started < DEADLINE
    message = str(lost.value)
    assert len(message.splitlines()) == 1
    assert lost.value.total == 3
    assert 1 <= lost.value.done < 3
    assert f"{lost.value.done} of 3 chunks done (kept in {tmp_path}" in message
    assert len(list(tmp_path.glob("chunk*.npz"))) == lost.value.done
    assert_same(label(tmp_path, workers=1), local_labels)  # the rest labelled here


# The tests above removed both worker nodes: the cluster has no CPU left.


def test_a_cluster_without_cpus_stops_the_labelling_in_bounded_time(cluster, monkeypatch):
    monkeypatch.setattr(teacher_ray, "NO_CPU_SECONDS", 2.0)
    assert not cluster.worker_nodes
    started = time.monotonic()
    with pytest.raises(ChunkLostError, match=r"no CPU for 2 s .*0 of 3 chunks done"):
        label(ray=cluster.address)
    assert time.monotonic() - started < 30


def test_stop_cancels_the_chunks_and_says_how_far_it_got(cluster):
    asked = time.monotonic() + 1.5
    with pytest.raises(LabellingStoppedError, match="0 of 3 chunks done"):
        label(ray=cluster.address, stop=lambda: time.monotonic() > asked)
    assert time.monotonic() - asked < 10
