"""``mcts`` with a network's value head: the leaves are scored by the value (no rollout), backed
up with the right signs (a hand-built head that knows one square decides the game), wins and
blocks in one are taken; what ``rollouts`` means with and without a value head."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from connectx_baselines import _mcts_kernels as kernels
from connectx_baselines._mcts_search import network_answers
from connectx_baselines.mcts import MCTSPolicy
from connectx_gym import Board, Geometry, make_policy
from connectx_gym.files import save_weights
from connectx_gym.weights import WeightsFile
from tests.baselines.test_mcts import random_board


def square_network(geometry: Geometry, column: int, sign: float = 1.0) -> WeightsFile:
    """Even priors, and a value head of ``sign`` times (the mover's disc on the bottom cell of
    ``column``) minus (the opponent's disc there): whoever holds that square is winning. Not
    mirror-symmetric as a taught network is: searches with it take ``mirror=false``, which
    would average that square with its image."""
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
    policy = make_policy(f"mcts:net={square_net},simulations=300,mirror=false")
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
    policy = make_policy(f"mcts:net={square_net_path(tmp_path, 1.0)},simulations=300,mirror=false")
    assert policy.act(board, np.random.default_rng(1)) == 5
    # a head that says holding the square loses: the search leaves it to the opponent
    avoid = make_policy(f"mcts:net={square_net_path(tmp_path, -1.0)},simulations=300,mirror=false")
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


def test_answers_with_mirror_images_are_the_mean_of_both_views() -> None:
    policy = MCTSPolicy(net="ppo", simulations=8)
    rng = np.random.default_rng(3)
    boards = [random_board(Geometry(), rng, plies) for plies in (0, 3, 8, 15)]
    planes = np.stack([board.to_planes() for board in boards]).astype(np.float32)
    images = np.ascontiguousarray(planes[..., ::-1])
    logits, values = network_answers(policy._evaluate, planes, True, mirror=False)
    image_logits, image_values = network_answers(policy._evaluate, images, True, mirror=False)
    assert logits.dtype == np.float64
    assert values is not None
    assert image_values is not None
    both_logits, both_values = network_answers(policy._evaluate, planes, True, mirror=True)
    assert both_values is not None
    # float32 products in batches of other lengths: equal to rounding
    np.testing.assert_allclose(both_logits, (logits + image_logits[:, ::-1]) / 2, atol=1e-5)
    np.testing.assert_allclose(both_values, (values + image_values) / 2, atol=1e-5)
    # a board and its image get mirrored answers
    image_both, image_both_values = network_answers(policy._evaluate, images, True, mirror=True)
    np.testing.assert_allclose(image_both, both_logits[:, ::-1], atol=1e-5)
    np.testing.assert_allclose(image_both_values, both_values, atol=1e-5)
    # the network alone is not mirror-symmetric, even on the empty board, which is its own
    # image; with mirror images its answer there is
    assert not np.allclose(logits, image_logits[:, ::-1], atol=1e-3)
    np.testing.assert_allclose(both_logits[0], both_logits[0, ::-1], atol=1e-5)
    # without the value head the values are None
    only_logits, no_values = network_answers(
        lambda x: policy._evaluate(x)[0], planes, False, mirror=True
    )
    assert no_values is None
    np.testing.assert_allclose(only_logits, both_logits, atol=1e-5)


def test_a_search_with_mirror_images_evaluates_each_leaf_once_with_its_image() -> None:
    calls: list[int] = []
    policy = make_policy("mcts:net=ppo,simulations=30,mirror=true")
    assert isinstance(policy, MCTSPolicy)
    assert policy.mirror
    evaluate = policy._evaluate

    def counted(planes: np.ndarray) -> object:
        calls.append(len(planes))
        return evaluate(planes)

    policy._evaluate = counted  # type: ignore[method-assign]
    board = Board.from_moves(Geometry(), [3, 3, 2])
    found = policy.search(board, np.random.default_rng(0))
    assert found["simulations"] == 30
    assert calls
    assert all(count % 2 == 0 for count in calls)  # each board with its image
    assert "mirror=True" in repr(policy)
    assert MCTSPolicy(net="ppo").mirror is True  # the default of a network search
    assert MCTSPolicy(net="ppo", mirror=False).mirror is False
