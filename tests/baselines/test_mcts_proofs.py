"""``mcts`` with the exact solver at its leaves (``solver_nodes``): a leaf the solver proves
within its nodes is settled (MCTS-Solver) with no network call, so a search led by a network
that misjudges a position still keeps its value; the root is never proven by its value alone;
budgets, parameters, the solver's own table; :meth:`Solver.game_value` against ``solve``."""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectx_baselines import _mcts_kernels as kernels
from connectx_baselines.mcts import LeafProver, MCTSPolicy
from connectx_baselines.solver import SearchLimitError, Solver, get_solver
from connectx_gym import Board, Geometry, make_policy
from connectx_gym._dims import dims
from connectx_gym.files import save_weights
from tests.baselines.test_mcts import random_board
from tests.baselines.test_mcts_value import square_network


@pytest.fixture(scope="module")
def misleading_net(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Even priors and a value head that says whoever holds the bottom cell of column 5 wins:
    wrong in most positions, so the search alone errs where the solver does not."""
    path = tmp_path_factory.mktemp("proofs") / "square.npz"
    return save_weights(square_network(Geometry(), 5), path)


def late_positions(count: int, seed: int = 3) -> list[Board]:
    """Positions of 20 to 27 random stones where no move wins at once and some move loses
    value (the solver settles them in milliseconds)."""
    rng = np.random.default_rng(seed)
    solver = Solver(Geometry())
    found: list[Board] = []
    while len(found) < count:
        board = random_board(Geometry(), rng, int(rng.integers(20, 28)))
        if board.is_terminal() or board.moves < 20:
            continue
        if any(board.is_winning_move(column) for column in board.legal_moves()):
            continue
        values = solver.move_values(board)
        if np.nanmin(values) < np.nanmax(values):
            found.append(board)
    return found


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), plies=st.integers(14, 36))
def test_game_value_is_the_sign_of_the_score(seed: int, plies: int) -> None:
    board = random_board(Geometry(), np.random.default_rng(seed), plies)
    if board.is_terminal():
        return
    solver = get_solver(Geometry())
    assert solver.game_value(board) == int(np.sign(solver.solve(board)))


def test_game_value_under_too_few_nodes_raises() -> None:
    with pytest.raises(SearchLimitError):
        Solver(Geometry(), 16).game_value(Board.from_moves(Geometry(), (3, 3)), node_limit=100)


def test_the_solver_keeps_the_value_where_the_network_misleads(misleading_net: Path) -> None:
    solver = Solver(Geometry())
    alone = make_policy(f"mcts:net={misleading_net},simulations=8")
    proving = make_policy(f"mcts:net={misleading_net},simulations=8,solver_nodes=200000")
    misled = 0
    for index, board in enumerate(late_positions(100)):
        values = solver.move_values(board)
        best = np.nanmax(values)
        if values[alone.act(board, np.random.default_rng(index))] == best:
            continue  # only the positions where the search alone loses value
        misled += 1
        column = proving.act(board, np.random.default_rng(index))
        assert values[column] == best, (board, column, values)
    assert misled >= 3


def test_proven_leaves_cost_no_network_call(misleading_net: Path) -> None:
    asked: list[int] = []
    policy = make_policy(f"mcts:net={misleading_net},simulations=32,solver_nodes=200000")
    assert isinstance(policy, MCTSPolicy)
    evaluate = policy._evaluate

    def counting(planes: np.ndarray) -> object:
        asked.append(len(planes))
        return evaluate(planes)

    policy._evaluate = counting  # type: ignore[method-assign]
    searched = 0
    for index, board in enumerate(late_positions(10, seed=8)):
        asked.clear()
        policy.reset()
        policy.act(board, np.random.default_rng(index))
        prover = policy._provers[Geometry()]
        if prover.tried == 0:
            continue  # the root was proven when expanded: no leaf to offer
        searched += 1
        # the root itself is asked about (its value names no move); each other leaf is asked
        # about only where the solver did not prove it
        images = 2 if policy.mirror else 1  # each leaf asked about with its mirror image
        assert sum(asked) <= images * (1 + prover.tried - prover.proven)
        assert prover.proven > 0
        assert policy.last_info["solver_tried"] == prover.tried
        assert policy.last_info["solver_proven"] == prover.proven
        prover.tried = prover.proven = 0
    assert searched >= 3


def test_the_root_is_searched_not_proven_by_its_value(misleading_net: Path) -> None:
    # Positions the first expansion does not settle: the solver would prove the root's value at
    # once, which names no move; the search goes on and proves its children instead.
    probe = make_policy(f"mcts:net={misleading_net},simulations=1")
    boards = [
        board
        for board in late_positions(10, seed=5)
        if probe.scores(board, np.random.default_rng(0)) is not None
        and probe.last_info["stopped"] != "proven"
    ]
    assert boards
    policy = make_policy(f"mcts:net={misleading_net},simulations=64,solver_nodes=200000")
    for board in boards:
        scores = policy.scores(board, np.random.default_rng(0))
        values = Solver(Geometry()).move_values(board)
        assert values[int(np.nanargmax(scores))] == np.nanmax(values)
        assert policy.last_info["simulations"] > 1


def test_leaves_with_fewer_stones_are_not_offered() -> None:
    policy = make_policy("mcts:net=ppo,simulations=40,solver_nodes=1000,solver_min_stones=30")
    policy.act(Board.from_moves(Geometry(), (3, 3, 2)), np.random.default_rng(0))
    assert policy._provers[Geometry()].tried == 0


def test_seeded_search_with_proofs_repeats() -> None:
    boards = [*late_positions(3, seed=11), Board.from_moves(Geometry(), (3, 3, 4, 2, 2))]
    spec = "mcts:net=ppo,simulations=48,solver_nodes=5000"
    first, again = make_policy(spec), make_policy(spec)
    for board in boards:
        first.reset(), again.reset()  # the proofs kept from earlier moves are a game's
        scores = first.scores(board, np.random.default_rng(2))
        assert np.array_equal(scores, again.scores(board, np.random.default_rng(2)), True)


def test_respects_its_time_budget_with_proofs() -> None:
    policy = make_policy("mcts:net=ppo,time_budget=0.05,solver_nodes=50000")
    rng = np.random.default_rng(4)
    for plies in (4, 12, 16, 20, 26):
        board = random_board(Geometry(), rng, plies)
        if board.is_terminal():
            continue
        started = time.perf_counter()
        assert board.can_play(policy.act(board, rng))
        assert time.perf_counter() - started < 0.05 + 0.15  # a margin for a loaded machine


def test_the_prover_has_its_own_table_and_a_copy_drops_it() -> None:
    policy = make_policy("mcts:net=ppo,simulations=8,solver_nodes=1000")
    policy.act(late_positions(1)[0], np.random.default_rng(0))
    prover = policy._provers[Geometry()]
    assert isinstance(prover, LeafProver)
    assert prover.solver is not get_solver(Geometry())  # never the judge's table
    copy = pickle.loads(pickle.dumps(policy))
    assert copy._provers == {}
    assert copy.act(late_positions(1)[0], np.random.default_rng(0)) in range(7)


def test_a_new_game_forgets_the_proofs() -> None:
    policy = make_policy("mcts:net=ppo,simulations=16,solver_nodes=20000")
    policy.act(late_positions(1)[0], np.random.default_rng(0))
    table = policy._provers[Geometry()].solver._table
    assert table.any()
    policy.reset()
    assert not table.any()


def test_the_kernel_settles_a_proven_leaf_and_its_ancestors() -> None:
    ints = np.zeros((16, kernels.INT_COLUMNS), dtype=np.int64)
    floats = np.zeros((16, kernels.FLOAT_COLUMNS))
    state = np.zeros(kernels.STATE_SIZE, dtype=np.int64)
    kernels.new_tree(ints, floats, state)
    g = Geometry(1, 2, 2)  # two columns of one cell: the root has two children
    kernels.expand(ints, floats, state, kernels.ROOT, 0, 0, 0, np.array([0, 1]), dims(g))
    first = int(ints[kernels.ROOT, kernels.FIRST_CHILD])
    leaves = np.array([first, first + 1])
    kernels.prove_leaves(1, leaves, np.array([kernels.DRAW]), ints)
    assert ints[first, kernels.OUTCOME] == kernels.DRAW
    assert ints[kernels.ROOT, kernels.OUTCOME] == kernels.UNKNOWN  # one child still open
    kernels.prove_leaves(2, leaves, np.array([kernels.UNKNOWN, kernels.WIN]), ints)
    assert ints[kernels.ROOT, kernels.OUTCOME] == kernels.LOSS  # its chooser let a win happen


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("mcts:solver_nodes=1000", "solver_nodes applies to a search with a network"),
        ("mcts:net=ppo,solver_nodes=0", "solver_nodes must be an integer >= 1"),
        ("mcts:net=ppo,solver_nodes=1.5", "solver_nodes must be an integer >= 1"),
        ("mcts:net=ppo,solver_min_stones=10", "solver_min_stones applies with solver_nodes"),
        ("mcts:net=ppo,solver_nodes=9,solver_min_stones=-1", "solver_min_stones must be"),
    ],
)
def test_parameter_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        make_policy(spec)
    assert "\n" not in str(error.value)


def test_a_board_beyond_64_bits_offers_its_leaves_too(tmp_path: Path) -> None:
    geometry = Geometry(9, 7, 4)  # the plain-Python kernels and solver
    net = save_weights(square_network(geometry, 3), tmp_path / "wide.npz")
    policy = make_policy(f"mcts:net={net},simulations=16,solver_nodes=200,solver_min_stones=0")
    board = Board.from_moves(geometry, (3, 3, 4))
    assert board.can_play(policy.act(board, np.random.default_rng(0)))
    assert policy._provers[geometry].tried > 0


def test_a_reset_empties_the_table_only_after_a_search_wrote_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = make_policy("mcts:net=ppo,simulations=8,solver_nodes=1000,solver_min_stones=30")
    policy.act(Board.from_moves(Geometry(), (3, 3)), np.random.default_rng(0))  # none offered
    prover = policy._provers[Geometry()]
    emptied: list[int] = []
    monkeypatch.setattr(prover.solver, "reset", lambda: emptied.append(1))
    policy.reset()
    assert emptied == []
    board = late_positions(1)[0]
    prover.stones = 0  # offer it one leaf: the solver writes its table
    prover(board.current, board.mask)
    policy.reset()
    assert emptied == [1]
