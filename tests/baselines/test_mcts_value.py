"""``mcts`` with a network's value head: the leaves are scored by the value (no rollout), backed
up with the right signs (a hand-built head that knows one square decides the game), wins and
blocks in one are taken; what ``rollouts`` means with and without a value head."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from connectx_baselines import _mcts_kernels as kernels
from connectx_baselines.mcts import MCTSPolicy
from connectx_gym import Board, Geometry, make_policy
from connectx_gym.files import save_weights
from connectx_gym.weights import WeightsFile


def square_network(geometry: Geometry, column: int, sign: float = 1.0) -> WeightsFile:
    """Even priors, and a value head of ``sign`` times (the mover's disc on the bottom cell of
    ``column``) minus (the opponent's disc there): whoever holds that square is winning."""
    rows, columns = geometry.rows, geometry.columns
    cells = rows * columns
    bottom = (rows - 1) * columns + column  # (row, column) in the flattened (plane, row, column)
    value = np.zeros((1, 2 * cells), np.float32)
    value[0, bottom], value[0, cells + bottom] = sign, -sign
    arrays = {
        "pw": np.zeros((columns, 2 * cells), np.float32),
        "pb": np.zeros(columns, np.float32),
        "vw": value,
        "vb": np.zeros(1, np.float32),
    }
    policy = [{"op": "flatten"}, {"op": "linear", "weight": "pw", "bias": "pb"}]
    head = {"after": 1, "layers": [{"op": "linear", "weight": "vw", "bias": "vb"}]}
    return WeightsFile(geometry, policy, arrays, head)


@pytest.fixture(scope="module")
def square_net(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 6x7 :func:`square_network` of column 5, saved."""
    path = tmp_path_factory.mktemp("value") / "square.npz"
    return save_weights(square_network(Geometry(), 5), path)


def test_the_value_scores_the_leaves_with_the_signs_right(square_net: Path) -> None:
    policy = make_policy(f"mcts:net={square_net},simulations=300")
    assert isinstance(policy, MCTSPolicy)
    assert policy.rollouts == 0
    assert policy.value_leaves
    tree = policy._trees[Geometry()]
    draws = int(tree.state[kernels.STATE_RANDOM])
    scores = policy.scores(Board.empty(), np.random.default_rng(0))
    assert int(np.argmax(scores)) == 5  # the square that wins, by the value alone
    assert scores[5] > 0.5 * policy.last_info["simulations"]
    assert tree.state[kernels.STATE_RANDOM] == draws  # no random game was played


def test_the_second_player_takes_the_square_and_a_head_of_the_other_sign_avoids_it(
    tmp_path: Path,
) -> None:
    board = Board.from_moves(Geometry(), (0,))  # the second player to move
    policy = make_policy(f"mcts:net={square_net_path(tmp_path, 1.0)},simulations=300")
    assert policy.act(board, np.random.default_rng(1)) == 5
    # a head that says holding the square loses: the search leaves it to the opponent
    avoid = make_policy(f"mcts:net={square_net_path(tmp_path, -1.0)},simulations=300")
    scores = avoid.scores(board, np.random.default_rng(1))
    assert scores[5] < np.nanmax(scores)


def square_net_path(tmp_path: Path, sign: float) -> Path:
    return save_weights(square_network(Geometry(), 5, sign), tmp_path / f"square{sign:+}.npz")


def test_takes_a_win_and_blocks_a_loss_by_value(square_net: Path) -> None:
    policy = make_policy(f"mcts:net={square_net},simulations=200")
    win = Board.from_moves(Geometry(), (0, 1, 0, 1, 0, 6))
    assert policy.act(win, np.random.default_rng(0)) == 0
    threat = Board.from_moves(Geometry(), (0, 6, 1, 6, 2))
    assert policy.act(threat, np.random.default_rng(0)) == 3


def test_what_rollouts_means(square_net: Path) -> None:
    assert MCTSPolicy(net=str(square_net)).rollouts == 0  # the value where there is one
    assert MCTSPolicy(net="ppo").rollouts == 0  # the shipped network has a value head
    assert MCTSPolicy(net="ppo-v3").rollouts == 0  # so have the two before it
    assert MCTSPolicy(net="ppo-v2").rollouts == 0
    assert MCTSPolicy(net="ppo-v1").rollouts == 1  # random games where there is none
    assert MCTSPolicy().rollouts == 1
    random_games = MCTSPolicy(net=str(square_net), rollouts=3, simulations=8)
    assert random_games.rollouts == 3
    assert not random_games.value_leaves
    tree = random_games._trees[Geometry()]
    draws = int(tree.state[kernels.STATE_RANDOM])
    random_games.act(Board.empty(), np.random.default_rng(0))
    assert tree.state[kernels.STATE_RANDOM] > draws  # random games scored the leaves
    with pytest.raises(ValueError, match="no value head: give rollouts >= 1"):
        MCTSPolicy(net="ppo-v1", rollouts=0)
    with pytest.raises(ValueError, match="give net="):
        MCTSPolicy(rollouts=0)
    for bad in (-1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="rollouts must be an integer >= 1"):
            MCTSPolicy(net=str(square_net), rollouts=bad)


def test_the_search_loop_refuses_rollouts_beside_values() -> None:
    policy = MCTSPolicy(simulations=8)
    tree = next(iter(policy._trees.values()))
    logits_and_values = lambda planes: (planes[:, 0, 0], np.zeros(len(planes)))  # noqa: E731
    with pytest.raises(ValueError, match="no rollouts"):
        tree.search(0, 0, 0, np.random.default_rng(0), 4, None, 1.0, 1, logits_and_values, 2, True)
    with pytest.raises(ValueError, match="rollouts >= 1"):
        tree.search(0, 0, 0, np.random.default_rng(0), 4, None, 1.0, 0)
