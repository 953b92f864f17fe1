"""Monte Carlo tree search (``mcts``): legal and reproducible play on any board, wins and blocks
in one, its budgets, its parameters, its strength against minimax, and the network variant."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectx_baselines import _mcts_kernels as kernels
from connectx_baselines import mcts
from connectx_baselines.mcts import MCTSPolicy
from connectx_gym import Board, Geometry, make_policy
from connectx_gym._dims import dims
from connectx_gym.files import SHIPPED_WEIGHTS, load_weights, save_weights
from connectx_gym.match import play_match
from connectx_gym.registry import parse_spec


def random_board(geometry: Geometry, rng: np.random.Generator, plies: int) -> Board:
    """A position ``plies`` random moves (or fewer, to stay unfinished) into a game."""
    board = Board(geometry, 0, 0, 0)
    for _ in range(plies):
        following = board.play(int(rng.choice(board.legal_moves())))
        if following.is_terminal():
            break
        board = following
    return board


@pytest.mark.parametrize(
    ("rows", "columns", "inarow"),
    [(6, 7, 4), (5, 4, 3), (1, 5, 2), (3, 1, 2), (4, 9, 4), (9, 7, 4)],  # 9x7: beyond 64 bits
)
def test_legal_moves_on_any_board(rows: int, columns: int, inarow: int) -> None:
    geometry = Geometry(rows, columns, inarow)
    policy = make_policy("mcts:simulations=60")
    rng = np.random.default_rng(rows * columns)
    for plies in range(0, geometry.cells, max(1, geometry.cells // 6)):
        board = random_board(geometry, rng, plies)
        if board.is_terminal():
            continue
        assert board.can_play(policy.act(board, rng))
        assert policy.last_info["simulations"] <= 60


def test_deterministic_given_the_seed() -> None:
    rng = np.random.default_rng(5)
    boards = [random_board(Geometry(), rng, plies) for plies in (0, 5, 11, 20)]
    for spec in ("mcts:simulations=300", "mcts:net=ppo,simulations=24"):
        first, again = make_policy(spec), make_policy(spec)
        for board in boards:
            scores = first.scores(board, np.random.default_rng(9))
            assert np.array_equal(scores, again.scores(board, np.random.default_rng(9)), True)
            for seed in (1, 2):
                move = first.act(board, np.random.default_rng(seed))
                assert move == again.act(board, np.random.default_rng(seed))


def test_plays_a_seeded_match_the_same_twice() -> None:
    first = play_match("mcts:simulations=200", "random", games=2, seed=4)
    again = play_match("mcts:simulations=200", "random", games=2, seed=4)
    assert [r.moves for r in first.records] == [r.moves for r in again.records]


# The mover (X) wins at once: a vertical four in column 0; a row of four at 1 or 5.
WIN_IN_ONE = [(0, 1, 0, 1, 0, 6), (3, 3, 4, 4, 2, 2)]
# The opponent (X) threatens to win in column 6 (a vertical three) or 3 (a bottom row): one
# block each.
BLOCKS = [((6, 0, 6, 1, 6), 6), ((0, 6, 1, 6, 2), 3)]


@pytest.mark.parametrize("spec", ["mcts:simulations=1", "mcts:net=ppo,simulations=1"])
@pytest.mark.parametrize("moves", WIN_IN_ONE)
def test_takes_a_win_in_one(spec: str, moves: tuple[int, ...]) -> None:
    board = Board.from_moves(Geometry(), moves)
    winning = [c for c in board.legal_moves() if board.is_winning_move(c)]
    assert winning
    policy = make_policy(spec)
    for seed in range(5):
        assert policy.act(board, np.random.default_rng(seed)) in winning
    assert policy.last_info["stopped"] == "proven"


@pytest.mark.parametrize("spec", ["mcts:simulations=1", "mcts:net=ppo,simulations=1"])
@pytest.mark.parametrize(("moves", "block"), BLOCKS)
def test_blocks_a_loss_in_one(spec: str, moves: tuple[int, ...], block: int) -> None:
    board = Board.from_moves(Geometry(), moves)
    assert board.play(0 if block else 1).is_winning_move(block)  # the threat is real
    assert not any(board.is_winning_move(c) for c in board.legal_moves())
    policy = make_policy(spec)
    scores = policy.scores(board)
    assert np.flatnonzero(scores > -1e11).tolist() == [block]  # every other move proven lost
    for seed in range(5):
        assert policy.act(board, np.random.default_rng(seed)) == block


def test_a_lost_position_still_answers_a_legal_move() -> None:
    # X's bottom row 2, 3, 4 wins at 1 and at 5: O cannot block both, every move is lost.
    board = Board.from_moves(Geometry(), (2, 2, 3, 3, 4))
    policy = make_policy("mcts:simulations=50")
    scores = policy.scores(board)
    assert (scores[~np.isnan(scores)] < -1e11).all()
    assert policy.last_info["stopped"] == "proven"
    assert board.can_play(policy.act(board, np.random.default_rng(0)))


@pytest.mark.parametrize("spec", ["mcts:time_budget=0.1", "mcts:net=ppo,time_budget=0.1"])
def test_respects_its_time_budget(spec: str) -> None:
    policy = make_policy(spec)
    rng = np.random.default_rng(0)
    for plies in (0, 6, 14):
        board = random_board(Geometry(), rng, plies)
        started = time.perf_counter()
        assert board.can_play(policy.act(board, rng))
        elapsed = time.perf_counter() - started
        assert elapsed < 0.1 + 0.15  # a generous margin for a loaded machine
        if policy.last_info["stopped"] == "time":
            assert policy.last_info["simulations"] >= 1


@pytest.mark.parametrize("simulations", [1, 7, 100, 1000])
def test_simulation_counts_are_honoured(simulations: int) -> None:
    for spec in (f"mcts:simulations={simulations}", f"mcts:net=ppo,simulations={simulations}"):
        if "net" in spec and simulations > 100:
            continue
        policy = make_policy(spec)
        policy.act(Board.empty(), np.random.default_rng(0))
        assert policy.last_info["simulations"] == simulations
        assert policy.last_info["stopped"] == "simulations"
        root_visits = np.nansum(policy.scores(Board.empty(), np.random.default_rng(0)))
        assert root_visits == simulations - 1  # the first simulation expands the root


def test_default_budget() -> None:
    assert make_policy("mcts").simulations == 1000
    timed = make_policy("mcts:time_budget=0.2")
    assert timed.simulations is None
    assert timed.time_budget == 0.2


def test_a_network_search_defaults_to_c_puct_1() -> None:
    # the default searches as c_puct=1 does, and not as 4 does (4 follows the priors further:
    # after 3 3 2 it leaves five of the seven moves unvisited in 60 simulations)
    board = Board.from_moves(Geometry(6, 7, 4), [3, 3, 2])

    def visits(spec: str) -> np.ndarray:
        policy = make_policy(spec)
        assert isinstance(policy, MCTSPolicy)
        return policy.search(board, np.random.default_rng(0))["visits"]

    default = visits("mcts:net=ppo,simulations=60")
    assert np.array_equal(default, visits("mcts:net=ppo,simulations=60,c_puct=1"))
    assert not np.array_equal(default, visits("mcts:net=ppo,simulations=60,c_puct=4"))
    assert MCTSPolicy(net="ppo").exploration == mcts.DEFAULT_C_PUCT == 1.0


def two_children(parent_value_sum: float) -> tuple[np.ndarray, np.ndarray]:
    """A tree of a root visited 10 times (``parent_value_sum`` for the player who chose it) and
    two children: row 1 visited 9 times at Q -0.7 with prior 0.9, row 2 never, with prior 0.1."""
    ints = np.zeros((3, kernels.INT_COLUMNS), dtype=np.int64)
    floats = np.zeros((3, kernels.FLOAT_COLUMNS))
    ints[:, kernels.OUTCOME] = kernels.UNKNOWN
    ints[:, kernels.FIRST_CHILD] = -1
    ints[0, [kernels.VISITS, kernels.FIRST_CHILD, kernels.CHILDREN]] = 10, 1, 2
    ints[1:, kernels.PARENT] = 0
    ints[1, kernels.VISITS] = 9
    floats[0, kernels.VALUE_SUM] = parent_value_sum
    floats[1, [kernels.VALUE_SUM, kernels.PRIOR]] = -6.3, 0.9
    floats[2, kernels.PRIOR] = 0.1
    return ints, floats


def test_a_network_search_scores_two_leaves_a_call_by_default() -> None:
    board = Board.from_moves(Geometry(6, 7, 4), [3])
    calls: list[int] = []
    policy = make_policy("mcts:net=ppo,simulations=40")
    assert isinstance(policy, MCTSPolicy)
    assert policy.batch == mcts.DEFAULT_BATCH == 2
    evaluate = policy._evaluate

    def counted(planes: np.ndarray) -> object:
        calls.append(len(planes))
        return evaluate(planes)

    policy._evaluate = counted  # type: ignore[method-assign]
    policy.search(board, np.random.default_rng(0))
    assert calls
    images = 2 if policy.mirror else 1  # each leaf asked about with its mirror image, by default
    assert max(calls) == 2 * images  # a batch never exceeds two leaves a call


def test_first_play_urgency_values_an_untried_move_from_its_parent() -> None:
    # The chooser at the root stands at -0.8 (the root's sum of 8 is for the player who chose
    # it). Scores with c_puct 1: the tried move -0.7 + 0.9 sqrt(10) / 10 = -0.42; the untried
    # one as a draw 0 + 0.1 sqrt(10) = 0.32, and with a reduction of 0.1: -0.9 + 0.32 = -0.58.
    ints, floats = two_children(8.0)
    assert kernels.select_child(ints, floats, 0, 1.0, True, np.nan) == 2
    assert kernels.select_child(ints, floats, 0, 1.0, True, 0.1) == 1
    # standing at +0.8 the untried move's first play is 0.7 + 0.32, above the tried one's
    ints, floats = two_children(-8.0)
    assert kernels.select_child(ints, floats, 0, 1.0, True, 0.1) == 2
    # UCT tries every child first whatever the reduction
    assert kernels.select_child(ints, floats, 0, 1.0, False, 0.1) == 2


def test_fpu_reduction_keeps_a_losing_side_from_trying_every_reply() -> None:
    # After 3 the second player stands to lose (ppo's value): valued as draws, every untried
    # reply looks better than the tried ones and each is tried; valued from the parent, less
    # 0.3, the search stays on the replies it has
    board = Board.from_moves(Geometry(6, 7, 4), [3])

    def visits(spec: str) -> np.ndarray:
        policy = make_policy(spec)
        assert isinstance(policy, MCTSPolicy)
        return policy.search(board, np.random.default_rng(0))["visits"]

    assert (visits("mcts:net=ppo,simulations=60") > 0).all()
    assert (visits("mcts:net=ppo,simulations=60,fpu_reduction=0.3") == 0).sum() >= 3
    assert "fpu_reduction=0.3" in repr(make_policy("mcts:net=ppo,fpu_reduction=0.3"))
    assert MCTSPolicy(net="ppo").fpu_reduction is None


def test_prior_temperature_divides_the_logits_the_priors_come_from() -> None:
    board = Board.from_moves(Geometry(6, 7, 4), [3, 3, 2])
    plain = make_policy("mcts:net=ppo,simulations=40")
    warm = make_policy("mcts:net=ppo,simulations=40,prior_temperature=2")
    assert isinstance(plain, MCTSPolicy)
    assert isinstance(warm, MCTSPolicy)
    planes = np.zeros((1, 2, 6, 7), dtype=np.float32)
    planes[0, 0, 5, 3] = planes[0, 1, 4, 3] = planes[0, 0, 5, 2] = 1
    logits, values = plain._evaluate(planes)
    warm_logits, warm_values = warm._evaluate(planes)
    np.testing.assert_allclose(warm_logits, logits / 2, rtol=1e-6)
    np.testing.assert_array_equal(warm_values, values)  # the leaves' values stay the network's
    # flatter priors spread the same 40 simulations over more moves
    spread = [
        np.count_nonzero(p.search(board, np.random.default_rng(0))["visits"] > 1)
        for p in (plain, warm)
    ]
    assert spread[1] >= spread[0]
    assert "prior_temperature=2.0" in repr(warm)
    assert "prior_temperature" not in repr(plain)  # 1: the network's own probabilities
    assert plain.prior_temperature == 1.0
    # a tiny temperature leaves the priors finite: the network's favourite alone
    cold = make_policy("mcts:net=ppo,simulations=40,prior_temperature=1e-300")
    assert isinstance(cold, MCTSPolicy)
    cold_logits, _ = cold._evaluate(planes)
    assert np.isfinite(cold_logits).all()
    found = cold.search(board, np.random.default_rng(0))["visits"]
    assert np.isfinite(found[~np.isnan(found)]).all()
    assert np.nansum(found) == 39  # the first of the 40 simulations expands the root


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("mcts:simulations=0", "simulations must be an integer >= 1"),
        ("mcts:simulations=2.5", "simulations"),
        ("mcts:time_budget=0", "time_budget must be a finite number of seconds > 0"),
        ("mcts:time_budget=nan", "time_budget"),
        ("mcts:uct_c=-1", "uct_c must be a finite number > 0"),
        ("mcts:rollouts=0", "rollouts=0 scores the leaves by a network.s value: give net="),
        ("mcts:rollouts=-1", "rollouts must be an integer >= 1"),
        ("mcts:c_puct=1", "c_puct applies to a search with a network"),
        ("mcts:batch=4", "batch applies to a search with a network"),
        ("mcts:net=ppo,uct_c=1", "uct_c applies to a search without a network"),
        ("mcts:net=ppo,c_puct=inf", "c_puct must be a finite number > 0"),
        ("mcts:net=ppo,batch=0", "batch must be an integer >= 1"),
        ("mcts:fpu_reduction=0.2", "fpu_reduction applies to a search with a network"),
        ("mcts:net=ppo,fpu_reduction=-0.1", "fpu_reduction must be a finite number >= 0"),
        ("mcts:net=ppo,fpu_reduction=nan", "fpu_reduction must be a finite number >= 0"),
        ("mcts:prior_temperature=2", "prior_temperature applies to a search with a network"),
        ("mcts:net=ppo,prior_temperature=0", "prior_temperature must be a finite number > 0"),
        ("mcts:net=ppo,prior_temperature=inf", "prior_temperature must be a finite number > 0"),
        ("mcts:mirror=true", "mirror applies to a search with a network"),
        ("mcts:net=ppo,mirror=2", "mirror must be true or false, got 2"),
        ("mcts:net=random", "is not a network"),
        ("mcts:depth=3", "does not take parameter"),
    ],
)
def test_parameter_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        make_policy(spec)
    assert "\n" not in str(error.value)


def test_a_missing_network_file_is_named() -> None:
    with pytest.raises(FileNotFoundError, match=r"nothing\.npz"):
        make_policy("mcts:net=runs/nothing/nothing.npz,simulations=5")


def test_the_network_plays_only_its_board_size() -> None:
    policy = make_policy("mcts:net=ppo,simulations=5")
    with pytest.raises(ValueError, match="trained on"):
        policy.act(Board(Geometry(5, 4, 3), 0, 0, 0), np.random.default_rng(0))


def test_a_network_path_in_a_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_spec("mcts:net=runs/connectx/final.npz,simulations=400") == (
        "mcts",
        {"net": "runs/connectx/final.npz", "simulations": 400},
    )
    (tmp_path / "runs" / "connectx").mkdir(parents=True)
    save_weights(load_weights(SHIPPED_WEIGHTS["ppo"]), tmp_path / "runs/connectx/final.npz")
    monkeypatch.chdir(tmp_path)
    policy = make_policy("mcts:net=runs/connectx/final.npz,simulations=400")
    assert isinstance(policy, MCTSPolicy)
    assert policy.simulations == 400
    board = Board.from_moves(Geometry(), (3, 3))
    assert board.can_play(policy.act(board, np.random.default_rng(0)))
    assert policy.last_info["simulations"] == 400
    # a spec that ends in the file's suffix is still the spec, not a file of that name
    ending = make_policy("mcts:simulations=8,net=runs/connectx/final.npz")
    assert isinstance(ending, MCTSPolicy)


def test_as_an_env_opponent() -> None:
    gymnasium = pytest.importorskip("gymnasium")
    import connectx_gym  # noqa: F401 - registers ConnectX-v0

    for spec in ("mcts:simulations=50", "mcts:net=ppo,time_budget=0.05"):
        env = gymnasium.make("ConnectX-v0", opponent=spec)
        _, info = env.reset(seed=1)
        done = False
        while not done:
            legal = np.flatnonzero(info["action_mask"])
            _, _, terminated, truncated, info = env.step(int(legal[0]))
            done = terminated or truncated
        env.close()


def test_the_kernels_prove_children_when_expanded() -> None:
    geometry = Geometry()
    tree = make_policy("mcts:simulations=1")._tree(geometry)
    board = Board.from_moves(geometry, BLOCKS[0][0])
    tree.search(board.current, board.mask, board.moves, np.random.default_rng(0), 1, None, 2.0, 1)
    first, count = tree.ints[0, kernels.FIRST_CHILD], tree.ints[0, kernels.CHILDREN]
    outcomes = dict(
        zip(
            tree.ints[first : first + count, kernels.COLUMN].tolist(),
            tree.ints[first : first + count, kernels.OUTCOME].tolist(),
            strict=True,
        )
    )
    assert outcomes == {c: kernels.LOSS if c != 6 else kernels.UNKNOWN for c in range(7)}


def test_beats_minimax_depth_3() -> None:
    """1000 simulations against the tutorial's 3-ply lookahead, from two-ply openings."""
    result = play_match("mcts:simulations=1000", "minimax:depth=3", games=12, seed=0)
    assert result.illegal_a == result.illegal_b == 0
    assert result.wins >= 9, (result.wins, result.draws, result.losses)


def test_a_large_tree_is_not_kept_between_moves() -> None:
    """A search past KEEP_TREE_NODES lets its tree go (a server holds many policies); a small
    one keeps it for the next move."""
    board = Board.from_moves(Geometry(), [3, 3])
    small = make_policy("mcts:simulations=50")
    small.act(board, np.random.default_rng(0))
    assert Geometry() in small._trees
    large = make_policy(f"mcts:simulations={mcts.KEEP_TREE_NODES // 2}")
    result = large.search(board, np.random.default_rng(0))
    assert result["nodes"] > mcts.KEEP_TREE_NODES
    assert Geometry() not in large._trees
    assert large.act(board, np.random.default_rng(0)) in board.legal_moves()


def unstoppable(after: Board) -> bool:
    """The slow reference of :func:`kernels.wins_next_move`: whatever the player to move in
    ``after`` plays, the player who made the last move wins at once."""
    return bool(after.legal_moves()) and all(
        any(reply.is_winning_move(column) for column in reply.legal_moves())
        for reply in (after.play(column) for column in after.legal_moves())
    )


@pytest.mark.parametrize(
    ("moves", "column"),
    [
        # two cells of row 0 that win at once (columns 1 and 5) after 2, 3, 4
        ((2, 2, 3, 3), 4),
        # one cell that wins at once, right below another: blocking it opens the other
        ((1, 0, 2, 3, 3, 6, 4, 0, 0, 2, 2, 1, 6, 4), 3),
        # no cell wins at once yet, but the opponent's one move (column 1) opens one above it
        (tuple(map(int, "43206504220035356006642444366151522315")), 3),
    ],
)
def test_a_move_that_makes_an_unstoppable_threat_is_proven_won_where_none_wins_at_once(
    moves: tuple[int, ...], column: int
) -> None:
    board = Board.from_moves(Geometry(), moves)
    after = board.play(column)
    assert not any(board.is_winning_move(c) for c in board.legal_moves())
    assert unstoppable(after)
    d = dims(board.geometry)
    assert kernels.wins_next_move(after.current ^ after.mask, after.mask, d)
    policy = make_policy("mcts:simulations=1")
    found = policy.search(board, np.random.default_rng(0))
    assert found["outcomes"][column] == kernels.WIN


@settings(max_examples=300, deadline=None)
@given(
    size=st.sampled_from([(6, 7, 4), (5, 4, 3), (4, 5, 3), (6, 7, 3), (3, 4, 3)]),
    picks=st.lists(st.integers(0, 99), max_size=30),
)
def test_a_threat_proven_unstoppable_wins_whatever_the_reply(
    size: tuple[int, int, int], picks: list[int]
) -> None:
    geometry = Geometry(*size)
    board = Board.empty(*size)
    for pick in picks:
        legal = board.legal_moves()
        column = legal[pick % len(legal)]
        if board.is_winning_move(column) or board.moves + 1 == size[0] * size[1]:
            break
        board = board.play(column)
    d = dims(geometry)
    for column in board.legal_moves():
        after = board.play(column)
        if after.is_terminal() or any(after.is_winning_move(c) for c in after.legal_moves()):
            continue  # the kernel proves these children otherwise (won, drawn, lost)
        claimed = kernels.wins_next_move(after.current ^ after.mask, after.mask, d)
        if claimed:
            assert unstoppable(after), (board.to_array().tolist(), column)
