"""connectx_train.device_snapshots: self-play snapshots answered by torch on the training device
answer as their numpy forward pass does (checked here on the CPU; CI has no GPU)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from connectx_gym import Geometry, make_policy
from connectx_gym.batch import BoardBatch, choose_columns
from connectx_gym.files import NumpyNetPolicy, save_weights
from connectx_gym.weights import WeightsFile
from connectx_train.model import model_weights
from connectx_train.opponents import (
    DeviceWeights,
    TimedBatchPolicy,
    collect_timing,
    queue_opponents,
    snapshot_device,
)
from tests.connectx_gym.test_files import random_board, random_weights
from tests.train.test_export import make_model
from tests.train.test_train_batched import play, slots

CPU = torch.device("cpu")


def batch_of(geometry: Geometry, count: int, seed: int) -> BoardBatch:
    rng = np.random.default_rng(seed)
    boards = []
    while len(boards) < count:
        board = random_board(geometry, rng)
        if not board.is_terminal():
            boards.append(board)
    return BoardBatch(
        geometry,
        np.array([b.current for b in boards], dtype=np.int64),
        np.array([b.mask for b in boards], dtype=np.int64),
        np.array([b.moves for b in boards], dtype=np.int64),
    )


@pytest.mark.parametrize(("rows", "columns", "inarow"), [(6, 7, 4), (5, 4, 3)])
def test_the_torch_network_gives_the_numpy_logits(
    tmp_path: Path, rows: int, columns: int, inarow: int
) -> None:
    geometry = Geometry(rows, columns, inarow)
    weights = model_weights(make_model(tmp_path, rows, columns, inarow, seed=3), geometry)
    planes = batch_of(geometry, 40, seed=1).planes()
    on_device = DeviceWeights.of(weights, CPU)
    np.testing.assert_allclose(on_device.logits(planes), weights.logits(planes), atol=1e-4)


def test_the_shipped_network_rebuilds_too() -> None:
    shipped = make_policy("ppo")
    assert isinstance(shipped, NumpyNetPolicy)
    planes = batch_of(Geometry(), 24, seed=2).planes()
    logits = DeviceWeights.of(shipped.weights, CPU).logits(planes)
    np.testing.assert_allclose(logits, shipped.weights.logits(planes), atol=1e-4)


@pytest.mark.parametrize("deterministic", [True, False])
def test_a_snapshot_on_the_device_plays_the_numpy_moves(
    tmp_path: Path, deterministic: bool
) -> None:
    weights = model_weights(make_model(tmp_path, 6, 7, 4, seed=4), Geometry())
    batch = batch_of(Geometry(), 64, seed=3)
    moves = []
    for answering in (weights, DeviceWeights.of(weights, CPU)):
        policy = NumpyNetPolicy(answering, deterministic=deterministic, name="self")
        moves.append(choose_columns(policy, batch, np.random.default_rng(9), "self"))
    np.testing.assert_array_equal(moves[0], moves[1])


def test_any_weights_only_network_runs_and_pickles_stay_numpy(tmp_path: Path) -> None:
    other = random_weights(Geometry())  # not a ConnectXPolicy export: ones_plane, tanh, linear
    planes = batch_of(Geometry(), 16, seed=4).planes()
    logits = DeviceWeights.of(other, CPU).logits(planes)
    np.testing.assert_allclose(logits, other.logits(planes), atol=1e-4)
    weights = model_weights(make_model(tmp_path, 6, 7, 4, seed=5), Geometry())
    copied = pickle.loads(pickle.dumps(DeviceWeights.of(weights, CPU)))  # to a subprocess env
    assert type(copied) is WeightsFile
    assert copied.params.keys() == weights.params.keys()
    assert all(np.array_equal(copied.params[k], weights.params[k]) for k in weights.params)


def test_snapshots_go_to_the_gpu_only() -> None:
    assert snapshot_device(torch.device("cpu")) is None
    assert snapshot_device(torch.device("cuda", 0)) == torch.device("cuda", 0)


def test_queued_snapshots_answer_on_the_device(tmp_path: Path) -> None:
    weights = model_weights(make_model(tmp_path, 6, 7, 4, seed=6), Geometry())
    snapshot = str(save_weights(weights, tmp_path / "snapshot.npz"))
    env = slots(n_envs=4)
    env.reset()
    cache: dict[str, WeightsFile] = {}
    queue_opponents(env, [("self", 1.0)], [snapshot], np.random.default_rng(0), cache, CPU)
    assert isinstance(cache[snapshot], DeviceWeights)  # built once, kept for the next rollouts
    finished = play(env, 80)
    timed = [p for p in env.env._policies if isinstance(p, TimedBatchPolicy)]
    assert [type(p.policy.weights) for p in timed] == [DeviceWeights]
    for board in range(env.num_envs):  # the first game began before the queue
        assert {label for b, label in finished if b == board}.issubset({"random", "self"})
    assert collect_timing(env)["opponents"]["self"][1] > 0
    env.close()
