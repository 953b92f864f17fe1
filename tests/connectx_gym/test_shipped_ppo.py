"""The shipped policy "ppo": package data read without pickle, legal play on its board, wins
against random and onestep, usable as an env opponent and as a Kaggle export."""

from __future__ import annotations

import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import connectx_gym  # noqa: F401 (registers ConnectX-v0 and the policies)
from connectx_gym.bitboard import Board
from connectx_gym.files import SHIPPED_WEIGHTS, shipped_weights
from connectx_gym.match import play_match
from connectx_gym.registry import make_policy
from connectx_gym.weights import read_weights

PPO = SHIPPED_WEIGHTS["ppo"]


def test_the_weights_are_package_data_without_pickled_objects() -> None:
    assert PPO.is_file()
    assert PPO.stat().st_size < 5_000_000  # 96 channels, 3 blocks, float32: 4.1 MB
    with zipfile.ZipFile(PPO) as archive:
        for name in archive.namelist():
            header = archive.read(name)[:128]
            assert b"'descr': '|O'" not in header, name  # no object arrays (they need pickle)
    weights = read_weights(PPO)
    g = weights.geometry
    assert (g.rows, g.columns, g.inarow) == (6, 7, 4)


def test_ppo_plays_legal_moves_on_its_board() -> None:
    policy = make_policy("ppo")
    assert policy.name == "ppo"
    rng = np.random.default_rng(0)
    for _ in range(20):
        board = Board.empty()
        while not board.is_terminal():
            column = policy.act(board, rng)
            assert board.can_play(column)
            board = board.play(column if board.moves % 2 else int(rng.choice(board.legal_moves())))


def test_ppo_refuses_another_board_size() -> None:
    with pytest.raises(ValueError, match="trained on"):
        make_policy("ppo").act(Board.empty(5, 6, 4), np.random.default_rng(0))


@pytest.mark.parametrize("opponent", ["random", "onestep"])
def test_ppo_beats_weak_opponents(opponent: str) -> None:
    result = play_match("ppo", opponent, games=20, seed=1)
    assert result.score >= 0.9, result.summary()


def test_ppo_as_env_opponent_and_sampling_spec() -> None:
    env = gym.make("ConnectX-v0", opponent="ppo:deterministic=False~0.1")
    env.reset(seed=0)
    terminated = truncated = False
    while not (terminated or truncated):
        column = int(np.flatnonzero(env.unwrapped.action_masks())[0])
        _, _, terminated, truncated, _ = env.step(column)
    env.close()


def test_ppo_exports_to_kaggle(tmp_path: Path) -> None:
    from connectx_train.export import export_kaggle

    path = export_kaggle("ppo", tmp_path / "main.py")
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    board = Board.from_moves(Board.empty().geometry, [3, 3, 2])
    observation = {"board": board.to_kaggle(), "mark": board.mark}
    configuration = {"rows": 6, "columns": 7, "inarow": 4}
    expected = make_policy("ppo").act(board, np.random.default_rng(0))
    assert namespace["agent"](observation, configuration) == expected


def test_unknown_shipped_name() -> None:
    with pytest.raises(ValueError, match="no shipped weights"):
        shipped_weights("alphazero")
