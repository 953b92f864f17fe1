"""Search baselines under misuse: Ctrl-C, bad limits, time budgets, pickling mid-game."""

from __future__ import annotations

import copy
import pickle
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from connectx_gym import Board, Geometry, make_policy

SIXBY7 = Geometry(6, 7, 4)

CHILD = """
import sys
import numpy as np
from connectx_gym import Board, Geometry, make_policy
board = Board.from_moves(Geometry(6, 7, 4), [3])
make_policy(sys.argv[2]).act(board, np.random.default_rng(0))  # compile or load the kernels
print("ready", flush=True)
make_policy(sys.argv[1]).act(board, np.random.default_rng(0))
print("finished", flush=True)
"""


def _default_sigint() -> None:
    # A background shell starts its jobs with SIGINT ignored, and children inherit that.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("spec", "warm_up"),
    [
        ("minimax:depth=16", "minimax:depth=1"),
        ("negamax:depth=30", "negamax:depth=1"),
        ("alphabeta:time_budget=120", "alphabeta:time_budget=0.1"),
        ("solver:time_budget=120", "solver:time_budget=0.1"),
    ],
)
@pytest.mark.slow
def test_ctrl_c_stops_a_deep_search(spec: str, warm_up: str) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, spec, warm_up],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # well inside the deep search
        child.send_signal(signal.SIGINT)
        sent = time.perf_counter()
        out, err = child.communicate(timeout=10)
        elapsed = time.perf_counter() - sent
    finally:
        child.kill()
    assert "finished" not in out
    assert "KeyboardInterrupt" in err
    assert elapsed < 2.5, f"{spec} took {elapsed:.1f} s to stop"


@pytest.mark.parametrize(
    ("spec", "parameter"),
    [
        ("minimax:depth=0", "depth"),
        ("negamax:depth=-3", "depth"),
        ("alphabeta:time_budget=nan", "time_budget"),
        ("alphabeta:time_budget=-1", "time_budget"),
        ("alphabeta:time_budget=inf", "time_budget"),
        ("alphabeta:max_depth=0", "max_depth"),
        ("solver:time_budget=nan", "time_budget"),
        ("solver:node_limit=-1", "node_limit"),
        ("solver:node_limit=0", "node_limit"),
        ("solver:solve_share=2", "solve_share"),
        ("solver:table_bits=99", "table_bits"),
        ("solver:fallback_depth=0", "fallback_depth"),
    ],
)
def test_bad_limits_name_the_parameter(spec: str, parameter: str) -> None:
    with pytest.raises(ValueError, match=parameter):
        make_policy(spec)


@pytest.mark.parametrize("value", ["1", None, True, float("nan")])
def test_time_budget_of_the_wrong_type(value: object) -> None:
    from connectx_baselines.alphabeta import AlphaBetaPolicy
    from connectx_baselines.solver import SolverPolicy

    for policy in (AlphaBetaPolicy, SolverPolicy):
        with pytest.raises(ValueError, match="time_budget"):
            policy(time_budget=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", ["minimax:depth=43", "negamax:depth=50", "alphabeta:max_depth=99"])
def test_depth_beyond_the_board_is_refused(spec: str) -> None:
    policy = make_policy(spec)
    with pytest.raises(ValueError, match="depth must be <= 42"):
        policy.act(Board.empty(), np.random.default_rng(0))


def test_solver_limits_are_checked() -> None:
    from connectx_baselines.solver import solve

    board = Board.from_moves(SIXBY7, [3, 3, 4])
    for limits in ({"node_limit": -1}, {"node_limit": 2.5}, {"time_limit": float("nan")}):
        with pytest.raises(ValueError, match=next(iter(limits))):
            solve(board, **limits)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "spec",
    [
        "onestep",
        "minimax:depth=3",
        "negamax:depth=4",
        "alphabeta:max_depth=5,time_budget=30",
        "solver:time_budget=30,node_limit=20000,fallback_depth=4",
        "solver:time_budget=30,node_limit=20000,fallback_depth=4,table_bits=14",
    ],
)
def test_policies_pickle_and_copy_mid_game(spec: str) -> None:
    """A copy made mid-game plays on exactly like the original, given the same generator."""
    policy = make_policy(spec)
    rng = np.random.default_rng(5)
    opponent = make_policy("minimax:depth=2")
    board = Board.from_moves(SIXBY7, [3, 3])
    for _ in range(2):  # into the game: tables filled, kernels compiled
        board = board.play(policy.act(board, rng))
        board = board.play(opponent.act(board, rng))
    assert not board.is_terminal()
    copies = [pickle.loads(pickle.dumps(policy)), copy.deepcopy(policy)]
    played = []
    for player in [policy, *copies]:
        generator = np.random.default_rng(9)
        position, moves = board, []
        while not position.is_terminal() and len(moves) < 6:
            column = player.act(position, generator)
            moves.append(column)
            position = position.play(column)
            if not position.is_terminal():
                position = position.play(position.legal_moves()[0])
        played.append(moves)
    assert played[0] == played[1] == played[2]


def test_budgeted_policies_stay_within_their_budget() -> None:
    """The first move compiles outside the clock; no move overruns by more than a few ms."""
    budget = 0.05
    overruns = []
    for spec in (f"alphabeta:time_budget={budget}", f"solver:time_budget={budget}"):
        policy = make_policy(spec)
        rng = np.random.default_rng(0)
        board = Board.from_moves(SIXBY7, [3])
        for _ in range(12):
            started = time.perf_counter()
            column = policy.act(board, rng)
            overruns.append(time.perf_counter() - started - budget)
            board = board.play(column)
            if board.is_terminal():
                break
            board = board.play(int(rng.choice(board.legal_moves())))
            if board.is_terminal():
                break
    # A shared CI machine can deschedule a move; a compile inside the clock costs 100s of ms.
    assert max(overruns) < 0.03, f"worst overrun {1e3 * max(overruns):.1f} ms"


def test_table_bits_are_capped_by_a_share_of_the_ram(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables of 16-byte entries may take at most a quarter of the machine's RAM."""
    from connectx_baselines import _checks

    gib = 2**30
    assert _checks.TABLE_RAM_SHARE == 0.25
    assert _checks.max_table_bits(24 * gib) == 28  # 2**28 entries: 4.3 GB of 6 GiB
    assert _checks.max_table_bits(8 * gib) == 26
    assert _checks.max_table_bits(2**40) == 30
    monkeypatch.setattr(_checks, "_physical_memory", lambda: 8 * gib)
    with pytest.raises(ValueError, match=r"table_bits=30 needs 17\.2 GB") as refused:
        make_policy("solver:table_bits=30")
    message = str(refused.value)
    assert "more than 25% of this machine's 8.6 GB of RAM allows" in message
    assert "at most table_bits=26 here now" in message
    assert "\n" not in message
    with pytest.raises(ValueError, match="at most table_bits=26"):
        make_policy("solver:table_bits=27")
    assert make_policy("solver:table_bits=14").table_bits == 14


def test_table_bits_count_the_tables_already_in_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One budget for the process: a second table that fits alone but not beside the first is
    refused, and fits again once the first is freed."""
    import gc

    from connectx_baselines import _checks
    from connectx_baselines.solver import Solver

    gc.collect()
    table = _checks.table_bytes(16)
    before = _checks.tables_in_use()
    budget = before + table + table // 2  # room for one table of 16 bits, not two
    monkeypatch.setattr(_checks, "_physical_memory", lambda: int(budget / _checks.TABLE_RAM_SHARE))
    first = Solver(Geometry(), table_bits=16)
    assert _checks.tables_in_use() == before + table
    with pytest.raises(ValueError, match=r"table_bits=16 .* beside the .* this process holds"):
        Solver(Geometry(), table_bits=16)
    with pytest.raises(ValueError, match="table_bits=16"):
        make_policy("solver:table_bits=16")
    assert _checks.tables_in_use() == before + table
    del first
    gc.collect()
    assert _checks.tables_in_use() == before
    second = Solver(Geometry(), table_bits=16)
    assert _checks.tables_in_use() == before + table
    del second


@pytest.mark.slow
def test_the_shared_solvers_keep_a_few_geometries() -> None:
    from connectx_baselines import solver

    for columns in range(4, 4 + solver.SHARED_SOLVERS + 3):
        solver.move_scores(Board.from_moves(Geometry(4, columns, 3), [0]))
    assert len(solver._solvers) == solver.SHARED_SOLVERS


@pytest.mark.parametrize(
    ("spec", "warm_up"),
    [
        ("minimax:depth=16", "minimax:depth=1"),
        ("negamax:depth=30", "negamax:depth=1"),
        ("alphabeta:time_budget=120", "alphabeta:time_budget=0.1"),
        ("solver:time_budget=120", "solver:time_budget=0.1"),
    ],
)
def test_searches_obey_the_callers_deadline(spec: str, warm_up: str) -> None:
    from connectx_gym.deadline import DeadlineExceededError, search_deadline, time_left

    board = Board.from_moves(SIXBY7, [3])
    make_policy(warm_up).act(board, np.random.default_rng(0))  # compile or load the kernels
    policy = make_policy(spec)
    started = time.perf_counter()
    answered = True
    try:
        with search_deadline(0.3):
            policy.act(board, np.random.default_rng(0))
    except DeadlineExceededError:
        answered = False  # stopped at the deadline: no result
    elapsed = time.perf_counter() - started
    # Alpha-beta answers with the depth it completed before the deadline; the others stop.
    assert answered == spec.startswith("alphabeta")
    assert elapsed < (0.35 if answered else 1.0), f"{spec} took {elapsed:.2f} s"
    assert time_left() is None  # outside the block: no deadline


def test_nested_deadlines_keep_the_earliest() -> None:
    from connectx_gym.deadline import search_deadline, time_left

    with search_deadline(1.0):
        with search_deadline(60.0):
            left = time_left()
            assert left is not None
            assert left <= 1.0
        with search_deadline(0.1):
            left = time_left()
            assert left is not None
            assert left <= 0.1
