"""The bounds of the weights-only loader (``MAX_WORK``, ``MAX_ACTIVATION_BYTES``) admit the
networks the trainer makes, value head included, for its presets, on the largest board it
accepts."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import torch
from gymnasium import spaces

from connectx_gym.bitboard import MAX_CELLS
from connectx_gym.weights import MAX_ACTIVATION_BYTES, MAX_WORK, check_cost
from connectx_train import networks
from connectx_train.config import preset_config
from connectx_train.model import policy_kwargs
from connectx_train.presets import PRESETS


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_network_fits_the_bounds_on_the_largest_board(
    preset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    side = int(MAX_CELLS**0.5)
    config = preset_config(preset)
    observations = spaces.Box(0, 1, (2, side, side), np.float32)
    with torch.device("meta"):  # shapes only: nothing of the network is allocated
        policy = networks.ConnectXPolicy(
            observations, spaces.Discrete(side), lambda _: 1e-3, **policy_kwargs(config)
        )
    monkeypatch.setattr(
        networks, "_array", lambda tensor: np.broadcast_to(np.float32(0), tuple(tensor.shape))
    )
    layers, params = networks.numpy_layers(policy)
    value = networks.numpy_value_head(policy, params)
    cost = check_cost(layers, params, (2, side, side), value)
    assert cost.shape == (side,)
    assert cost.work * 2 < MAX_WORK
    assert cost.largest_activation * 4 * 4 < MAX_ACTIVATION_BYTES
