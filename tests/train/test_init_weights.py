"""``--init-weights``: a run starts from a weights-only network (a shipped name or a ``.npz``):
the copy is exact, logits and value alike; a file without a value head leaves the critic as
initialised; a file of another network or board is refused, naming why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from connectx_gym.bitboard import Geometry
from connectx_gym.env import ConnectXEnv
from connectx_gym.files import save_weights
from connectx_gym.weights import WeightsFile
from connectx_train.config import TrainConfig
from connectx_train.model import model_weights, new_model, read_init_weights, start_from_weights
from tests.train.test_networks_value import random_boards, spread_critic

GEOMETRY = Geometry(4, 5, 3)


def small_model(tmp_path: Path, seed: int, channels: int = 6):
    config = TrainConfig(rows=4, columns=5, inarow=3, seed=seed, channels=channels, blocks=1)
    return new_model(config, ConnectXEnv(4, 5, 3), tmp_path)


def test_a_network_starts_from_another_ones_weights_and_value(tmp_path: Path) -> None:
    source = small_model(tmp_path, seed=1)
    spread_critic(source.policy, seed=2)
    weights = model_weights(source, GEOMETRY)
    target = small_model(tmp_path, seed=2)
    planes = random_boards(GEOMETRY, 30, seed=3)
    assert not np.allclose(model_weights(target, GEOMETRY).logits(planes), weights.logits(planes))
    said = start_from_weights(target.policy, weights, "net.npz")
    assert said == "starting from the weights of net.npz and its value head"
    copied = model_weights(target, GEOMETRY)
    np.testing.assert_allclose(copied.logits(planes), weights.logits(planes), atol=1e-5)
    np.testing.assert_allclose(copied.values(planes), weights.values(planes), atol=1e-5)


def test_a_file_without_a_value_head_leaves_the_critic_fresh(tmp_path: Path) -> None:
    source = model_weights(small_model(tmp_path, seed=1), GEOMETRY)
    logits_only = WeightsFile(source.geometry, source.layers, source.params)
    target = small_model(tmp_path, seed=2)
    fresh = model_weights(target, GEOMETRY).params
    said = start_from_weights(target.policy, logits_only, "old.npz")
    assert said.endswith("(the value head starts fresh)")
    copied = model_weights(target, GEOMETRY)
    planes = random_boards(GEOMETRY, 10, seed=4)
    np.testing.assert_allclose(copied.logits(planes), source.logits(planes), atol=1e-5)
    critic = [name for name in fresh if name.startswith("value") and name.endswith("weight")]
    assert critic  # the value layers, as initialised, not the source's
    for name in critic:
        np.testing.assert_array_equal(copied.params[name], fresh[name])
        assert not np.array_equal(copied.params[name], source.params[name])


def test_another_network_size_is_refused_naming_the_settings(tmp_path: Path) -> None:
    source = model_weights(small_model(tmp_path, seed=1, channels=6), GEOMETRY)
    target = small_model(tmp_path, seed=2, channels=8)
    with pytest.raises(ValueError, match=r"stem\.weight is of shape .*--channels"):
        start_from_weights(target.policy, source, "net.npz")


def test_the_file_is_read_by_name_or_path_for_the_runs_board(tmp_path: Path) -> None:
    assert read_init_weights("ppo-v1", Geometry(6, 7, 4)).geometry.columns == 7
    path = save_weights(model_weights(small_model(tmp_path, seed=1), GEOMETRY), tmp_path / "a.npz")
    assert read_init_weights(str(path), GEOMETRY).geometry.rows == 4
    with pytest.raises(ValueError, match="its board is 4x5 with 3 in a row, the run's 6x7"):
        read_init_weights(str(path), Geometry(6, 7, 4))
    with pytest.raises(FileNotFoundError):
        read_init_weights(str(tmp_path / "missing.npz"), GEOMETRY)


def test_the_setting_names_what_it_takes() -> None:
    TrainConfig(init_weights="ppo").validate()
    TrainConfig(init_weights="runs/a/final.npz").validate()
    with pytest.raises(ValueError, match="neither a shipped network"):
        TrainConfig(init_weights="final.zip").validate()
