"""Every search agent on hand-drawn tactical positions (6 rows x 7 columns, X moves first)."""

from __future__ import annotations

import numpy as np
import pytest

from connectx_gym import Board, Geometry, make_policy

GEOMETRY = Geometry(6, 7, 4)

# X to move and win in column 3:
#   . . . . . . O
#   X X X . . O O
WIN_IN_ONE = Board.from_moves(GEOMETRY, [0, 6, 1, 6, 2, 5])

# X to move; O threatens column 4, the only block:
#   . . . . . . X
#   X O O O . . X
BLOCK = Board.from_moves(GEOMETRY, [0, 1, 6, 2, 6, 3])

# X to move; a disc in column 4 lets O complete its second row there:
#   X O O O . . X
#   O X X O . . X
DO_NOT_HAND = Board.from_moves(GEOMETRY, [1, 0, 2, 3, 0, 1, 6, 2, 6, 3])

AGENTS = [
    "onestep",
    "minimax:depth=1",
    "minimax:depth=2",
    "minimax:depth=3",
    "minimax:depth=4",
    "negamax:depth=2",
    "negamax",
    "alphabeta:time_budget=0.2",
    "alphabeta:max_depth=2",
]


def test_positions_are_what_they_claim() -> None:
    assert [c for c in WIN_IN_ONE.legal_moves() if WIN_IN_ONE.is_winning_move(c)] == [3]
    for board in (BLOCK, DO_NOT_HAND):
        assert board.mark == 1
        assert not any(board.is_winning_move(c) for c in board.legal_moves())
    o_to_move = Board(GEOMETRY, BLOCK.opponent, BLOCK.mask, BLOCK.moves + 1)
    assert [c for c in BLOCK.legal_moves() if o_to_move.is_winning_move(c)] == [4]
    o_to_move = Board(GEOMETRY, DO_NOT_HAND.opponent, DO_NOT_HAND.mask, DO_NOT_HAND.moves + 1)
    assert not any(o_to_move.is_winning_move(c) for c in DO_NOT_HAND.legal_moves())
    assert DO_NOT_HAND.play(4).is_winning_move(4)


@pytest.mark.parametrize("spec", AGENTS)
def test_takes_a_win_in_one(spec: str) -> None:
    policy = make_policy(spec)
    assert {policy.act(WIN_IN_ONE, np.random.default_rng(seed)) for seed in range(10)} == {3}


@pytest.mark.parametrize("spec", AGENTS)
@pytest.mark.slow
def test_blocks_a_loss_in_one(spec: str) -> None:
    policy = make_policy(spec)
    assert {policy.act(BLOCK, np.random.default_rng(seed)) for seed in range(10)} == {4}


@pytest.mark.parametrize("spec", [a for a in AGENTS if a not in ("onestep", "minimax:depth=1")])
def test_does_not_hand_the_opponent_a_win(spec: str) -> None:
    policy = make_policy(spec)
    chosen = {policy.act(DO_NOT_HAND, np.random.default_rng(seed)) for seed in range(20)}
    assert 4 not in chosen
    scores = policy.scores(DO_NOT_HAND)
    assert scores[4] < np.nanmax(scores)


@pytest.mark.parametrize("spec", AGENTS)
def test_scores_mark_full_columns(spec: str) -> None:
    board = Board.from_moves(GEOMETRY, [3, 3, 3, 3, 3, 3, 2])
    scores = make_policy(spec).scores(board)
    assert scores.shape == (7,)
    assert np.isnan(scores[3])
    assert not np.isnan(np.delete(scores, 3)).any()
