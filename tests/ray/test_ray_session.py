"""One Ray start for a run: within ``one_ray_start`` the instance the first Ray session starts is
the one every later session uses, and it is stopped once, by the last; ``connectx train --ray``
labels its teacher positions and runs its rollouts' actors on one instance. A start of Ray that
fails half way leaves no Ray process behind."""

from __future__ import annotations

import argparse
import os
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
pytest.importorskip("sb3_contrib")
psutil = pytest.importorskip("psutil")

from connectx_baselines.teacher_ray import LOCAL, one_ray_start, ray_session  # noqa: E402
from connectx_gym.ray_executor import RayExecutor  # noqa: E402
from connectx_train.config import TrainConfig  # noqa: E402
from connectx_train.config_cli import add_arguments, config_from_args  # noqa: E402
from connectx_train.trainer import train  # noqa: E402
from tests.train.test_train_smoke import SMALL  # noqa: E402

#: a tiny run on 5x6 whose own 500 teacher positions (2 chunks) are labelled, none read from the
#: shipped labels, then its 2 env slices play 128 steps
RUN = [
    *SMALL,
    *("--rows", "5", "--columns", "6", "--inarow", "4", "--timesteps", "128"),
    *("--n-envs", "4", "--n-steps", "32", "--batch-size", "64", "--n-epochs", "1"),
    *("--panel", "random", "--final-games", "2", "--eval-every", "0", "--torch-threads", "1"),
    *("--teacher-positions", "500", "--teacher-labels", "label", "--teacher-epochs", "1"),
    *("--teacher-book", "none", "--no-scale-teacher", "--env-slices", "2"),
]


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The arguments of every ``ray.init`` call from here on (each still starts Ray)."""
    calls: list[dict[str, Any]] = []
    real_init = ray.init

    def init(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real_init(*args, **kwargs)

    monkeypatch.setattr(ray, "init", init)
    return calls


def node_id() -> str:
    return str(ray.get_runtime_context().get_node_id())


def test_the_sessions_of_a_block_share_one_start_stopped_at_its_end(starts):
    assert not ray.is_initialized()
    with one_ray_start():
        with ray_session(LOCAL):
            first = node_id()
        assert ray.is_initialized()  # kept for the next session
        with ray_session(LOCAL):
            assert node_id() == first
        assert ray.is_initialized()
    assert not ray.is_initialized()
    assert len(starts) == 1


def test_a_session_open_at_the_blocks_end_stops_ray_when_it_ends(starts):
    with one_ray_start():
        with ray_session(LOCAL):
            first = node_id()
        session = ray_session(LOCAL)
        session.__enter__()
    try:
        assert ray.is_initialized()  # the session still has it
        assert node_id() == first
    finally:
        session.__exit__(None, None, None)
    assert not ray.is_initialized()
    assert len(starts) == 1


def test_a_run_labels_and_plays_its_rollouts_on_one_ray_start(starts, tmp_path, monkeypatch):
    stops: list[int] = []
    real_shutdown = ray.shutdown

    def shutdown(*args: Any, **kwargs: Any) -> Any:
        stops.append(1)
        return real_shutdown(*args, **kwargs)

    monkeypatch.setattr(ray, "shutdown", shutdown)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config: TrainConfig = config_from_args(
        parser.parse_args([*RUN, "--out", str(tmp_path / "run"), "--ray"])
    )
    lines: list[str] = []
    report = train(config, lines.append)
    assert len(starts) == 1, starts
    assert starts[0]["address"] == "local"
    assert len(stops) == 1
    assert not ray.is_initialized()
    assert len(list((tmp_path / "run" / "teacher").glob("chunk*.npz"))) == 2  # labelled here
    assert "2 env slices as Ray actors" in report["cluster"]
    assert "a Ray instance on this machine" in report["cluster"]


def ray_children() -> set[int]:
    """This process's descendants (Ray's control, store and raylet processes among them)."""
    return {child.pid for child in psutil.Process(os.getpid()).children(recursive=True)}


def test_a_start_that_fails_half_way_leaves_no_ray_process(monkeypatch):
    from ray._private import worker

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the driver could not connect\nmore lines")

    monkeypatch.setattr(worker, "connect", refuse)  # after the local instance's processes start
    before = ray_children()
    with pytest.raises(ConnectionError) as failure:
        RayExecutor(num_cpus=1)
    assert str(failure.value) == (
        "cannot start or join Ray at a local instance: the driver could not connect"
    )
    assert not ray.is_initialized()
    started = [psutil.Process(pid) for pid in ray_children() - before if psutil.pid_exists(pid)]
    _, alive = psutil.wait_procs(started, timeout=60)
    left = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [" ".join(p.cmdline()) for p in left]


def test_without_a_block_each_session_starts_its_own(starts):
    with ray_session(LOCAL):
        assert len(starts) == 1
    assert not ray.is_initialized()
    with ray_session(LOCAL):
        assert len(starts) == 2
    assert not ray.is_initialized()
