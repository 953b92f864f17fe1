"""The critic of a ConnectXPolicy exports as the weights-only value head: numpy's values are
``policy.predict_values`` on random legal boards, with a shared or an own features extractor,
through a saved ``.npz`` and an SB3 ``.zip``; a critic the format cannot hold is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import torch
from gymnasium import spaces

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.env import ConnectXEnv
from connectx_gym.files import load_weights, save_weights
from connectx_train import networks
from connectx_train.config import TrainConfig
from connectx_train.model import model_weights, new_model, policy_kwargs
from connectx_train.sb3_files import weights_from_sb3


def random_boards(geometry: Geometry, count: int, seed: int) -> np.ndarray:
    """Observations of ``count`` positions of random games, none over."""
    rng = np.random.default_rng(seed)
    planes = []
    while len(planes) < count:
        board = Board(geometry, 0, 0, 0)
        for _ in range(int(rng.integers(0, geometry.cells))):
            after = board.play(int(rng.choice(board.legal_moves())))
            if after.is_terminal():
                break
            board = after
        planes.append(board.to_planes())
    return np.stack(planes).astype(np.float32)


def spread_critic(policy: torch.nn.Module, seed: int) -> None:
    """Give the critic's layers random weights of a useful size (a fresh value layer is near 0)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in [*policy.mlp_extractor.value_net, policy.value_net]:
            if isinstance(module, torch.nn.Linear):
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * 0.3)
                module.bias.copy_(torch.randn(module.bias.shape, generator=generator) * 0.3)


def torch_values(policy: torch.nn.Module, planes: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return policy.predict_values(torch.as_tensor(planes)).numpy()[:, 0]


@pytest.mark.parametrize(("rows", "columns", "inarow"), [(6, 7, 4), (4, 5, 3)])
def test_model_weights_values_equal_the_critic(tmp_path: Path, rows, columns, inarow) -> None:
    config = TrainConfig(
        rows=rows, columns=columns, inarow=inarow, seed=rows, vf_layers=(32, 16), channels=8
    )
    model = new_model(config, ConnectXEnv(rows, columns, inarow), tmp_path)
    spread_critic(model.policy, seed=rows)
    geometry = Geometry(rows, columns, inarow)
    weights = model_weights(model, geometry)
    planes = random_boards(geometry, 40, seed=rows)
    expected = torch_values(model.policy, planes)
    assert np.abs(expected).max() > 0.05  # a critic that says something
    np.testing.assert_allclose(weights.values(planes), expected, atol=1e-4)
    # the logits are unchanged by the head beside them, alone or together with the values
    logits, values = weights.logits_and_values(planes)
    np.testing.assert_allclose(logits, weights.logits(planes), atol=1e-6)
    np.testing.assert_allclose(values, weights.values(planes), atol=1e-6)
    # saved and read back, and from the SB3 .zip
    loaded = load_weights(save_weights(weights, tmp_path / "net.npz"))
    assert loaded.value == weights.value
    np.testing.assert_allclose(loaded.values(planes), expected, atol=1e-4)
    model.save(tmp_path / "model.zip")
    with pytest.warns(UserWarning, match="unpickles"):
        from_zip = weights_from_sb3(tmp_path / "model.zip")
    np.testing.assert_allclose(from_zip.values(planes), expected, atol=1e-4)


def test_a_critic_with_its_own_features_extractor_exports_with_its_own_trunk() -> None:
    geometry = Geometry(5, 6, 4)
    config = TrainConfig(rows=5, columns=6, inarow=4, vf_layers=(16,), channels=8, blocks=2)
    kwargs = policy_kwargs(config) | {"share_features_extractor": False}
    observations = spaces.Box(0, 1, (2, 5, 6), np.int8)
    torch.manual_seed(0)
    policy = networks.ConnectXPolicy(observations, spaces.Discrete(6), lambda _: 1e-3, **kwargs)
    spread_critic(policy, seed=1)
    weights = networks.numpy_weights(policy, geometry)
    assert weights.value is not None
    assert weights.value.after == 0
    planes = random_boards(geometry, 20, seed=2)
    np.testing.assert_allclose(weights.values(planes), torch_values(policy, planes), atol=1e-4)


def test_a_critic_layer_the_format_lacks_is_refused() -> None:
    config = TrainConfig(vf_layers=(16,), channels=8)
    kwargs = policy_kwargs(config) | {"activation_fn": torch.nn.LeakyReLU}
    observations = spaces.Box(0, 1, (2, 6, 7), np.int8)
    policy = networks.ConnectXPolicy(observations, spaces.Discrete(7), lambda _: 1e-3, **kwargs)
    with pytest.raises(ValueError, match="cannot export the critic's layer LeakyReLU"):
        networks.numpy_weights(policy, Geometry())
