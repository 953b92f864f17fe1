"""What the Ray tests share: Ray's multi-node test cluster on this machine, the worker processes
of its nodes, and ``connectx train``'s settings read from its flags.

Ray, psutil and the training settings are imported where they are used, not here: the tests of
this folder that need them skip without them (``pytest.importorskip``), which an import here
would turn into an error of the whole folder.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray.cluster_utils import Cluster

    from connectx_train.config import TrainConfig


@contextlib.contextmanager
def local_cluster(workers: int) -> Iterator[Cluster]:
    """Ray's test cluster: a head without CPUs and ``workers`` worker nodes of one CPU, all on
    this machine, with this process connected to it; all of it stopped on leaving. Its workers
    run at this process's niceness, as those of the package's own local instance do (Ray's
    default, nice 15, starves them beside any busy process)."""
    import ray
    from ray.cluster_utils import Cluster

    from connectx_gym.ray_executor import LOCAL_SYSTEM_CONFIG

    head = {"num_cpus": 0, "include_dashboard": False, "_system_config": LOCAL_SYSTEM_CONFIG}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        for _ in range(workers):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.ERROR)
        try:
            yield cluster
        finally:
            ray.shutdown()
    finally:
        cluster.shutdown()


def node_workers(node: Any) -> list[Any]:
    """The worker processes of a test cluster's ``node`` (its raylet's children): none once the
    raylet is gone."""
    import psutil
    from ray._private import ray_constants

    raylet = node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid
    try:
        return psutil.Process(raylet).children()
    except psutil.NoSuchProcess:
        return []


def running(processes: Iterable[Any], name: str) -> list[Any]:
    """Those of ``processes`` whose command line holds ``name`` (a Ray task's or actor's,
    ``"ray::label_chunk"``, ``"ray::EnvSlice"``); those that have ended are left out."""
    import psutil

    found = []
    for process in processes:
        try:
            if name in " ".join(process.cmdline()):
                found.append(process)
        except psutil.Error:
            continue
    return found


def train_config(*argv: str) -> TrainConfig:
    """The settings ``connectx train`` reads from ``argv``."""
    from connectx_train.config_cli import add_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return config_from_args(parser.parse_args(list(argv)))
