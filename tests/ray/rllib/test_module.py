"""The RLlib module (:mod:`connectx_train.rllib.module`) is the project's network: its masked logits
and values are those of its weights-only export, which loads as a policy like any ``final.npz``.
Runs in the RLlib environment (``.ci/rllib_tests``); skipped without ``pip install -e ".[rllib]"``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

rl_module = pytest.importorskip(
    "connectx_train.rllib.module",
    reason='RLlib is not installed (pip install -e ".[rllib]")',
    exc_type=ImportError,
)

import torch  # noqa: E402
from ray.rllib.core.columns import Columns  # noqa: E402

from connectx_gym import make_policy  # noqa: E402
from connectx_gym.bitboard import Board, Geometry  # noqa: E402
from connectx_gym.files import save_weights  # noqa: E402
from connectx_train.networks import ConnectXCNN, ConnectXPolicy  # noqa: E402
from connectx_train.rllib.env import ConnectXMultiAgentEnv, observation  # noqa: E402

NETWORK = {"channels": 8, "blocks": 1, "features_dim": 16, "vf_layers": [16, 8]}
GEOMETRY = Geometry(6, 7, 4)


def make_module(**network):
    env = ConnectXMultiAgentEnv()
    torch.manual_seed(0)
    return rl_module.ConnectXPPOModule(
        observation_space=env.observation_spaces["player_0"],
        action_space=env.action_spaces["player_0"],
        model_config={**NETWORK, **network},
    )


def random_boards(count, seed=0):
    rng = np.random.default_rng(seed)
    boards = []
    while len(boards) < count:
        board = Board.empty(*GEOMETRY.key)
        for _ in range(int(rng.integers(0, 30))):
            if board.is_terminal():
                break
            board = board.play(int(rng.choice(board.legal_moves())))
        if not board.is_terminal():
            boards.append(board)
    return boards


def batch_of(boards):
    observations = [observation(board) for board in boards]
    return {
        Columns.OBS: {
            key: torch.from_numpy(np.stack([o[key] for o in observations]))
            for key in ("observations", "action_mask")
        }
    }


def test_module_holds_the_projects_policy_with_the_run_settings():
    module = make_module()
    assert isinstance(module.policy, ConnectXPolicy)
    extractor = module.policy.features_extractor
    assert isinstance(extractor, ConnectXCNN)
    assert extractor.stem.out_channels == 8
    assert len(extractor.blocks) == 1
    assert extractor.head.out_features == 16
    hidden = [
        m.out_features for m in module.policy.mlp_extractor.value_net if hasattr(m, "out_features")
    ]
    assert hidden == [16, 8]


def test_masked_logits_and_values_are_those_of_the_export():
    module = make_module()
    boards = random_boards(32)
    batch = batch_of(boards)
    with torch.no_grad():
        output = module.forward_train(batch)
        logits = output[Columns.ACTION_DIST_INPUTS].numpy()
        values = module.compute_values(batch, output[Columns.EMBEDDINGS]).numpy()
        values_alone = module.compute_values(batch_of(boards)).numpy()
    weights = rl_module.module_weights(module, GEOMETRY)
    planes = np.stack([board.to_planes() for board in boards]).astype(np.float32)
    exported, exported_values = weights.logits_and_values(planes)
    legal = np.stack([board.legal_mask() for board in boards])
    assert (logits[~legal] < -1e6).all()  # illegal columns are never sampled
    expected = torch.log_softmax(torch.from_numpy(np.where(legal, exported, -np.inf)), 1)
    np.testing.assert_allclose(logits[legal], expected.numpy()[legal], atol=1e-4)
    np.testing.assert_allclose(values, exported_values.ravel(), atol=1e-4)
    np.testing.assert_allclose(values_alone, values, atol=1e-6)


def test_export_loads_as_a_policy_and_plays_legal_moves(tmp_path: Path):
    path = save_weights(rl_module.module_weights(make_module(), GEOMETRY), tmp_path / "final.npz")
    policy = make_policy(str(path))
    rng = np.random.default_rng(0)
    for board in random_boards(20, seed=1):
        assert board.can_play(policy.act(board, rng))
    full_centre = Board.from_moves(GEOMETRY, [3] * 6)
    assert policy.act(full_centre, rng) != 3


def test_a_module_needs_the_planes_and_mask():
    import gymnasium as gym

    with pytest.raises(ValueError, match="planes and action mask"):
        rl_module.ConnectXPPOModule(
            observation_space=gym.spaces.Box(0.0, 1.0, (2, 6, 7), np.float32),
            action_space=gym.spaces.Discrete(7),
            model_config=NETWORK,
        )
