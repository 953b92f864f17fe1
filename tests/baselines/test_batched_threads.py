"""The batch opponents on several threads answer exactly what they answer on one thread and
what the single-board policies answer (alphabeta: after a reset); the choice between one thread
and many."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import connectx_baselines.alphabeta
import connectx_baselines.batch_actors
from connectx_baselines._thread_choice import FIRST_SAMPLES, PROBE_EVERY, ThreadChoice
from connectx_baselines.alphabeta import AlphaBetaPolicy
from connectx_baselines.batch_actors import (
    SEARCH_MINIMAX,
    SEARCH_NEGAMAX,
    SEARCH_ONESTEP,
    alphabeta_batch_scores,
    batch_scores,
)
from connectx_gym import Board, Geometry, make_policy
from connectx_gym.batch import batch_actor, choose_columns
from tests.support.board_batches import random_batch

SEARCHES = {"onestep": SEARCH_ONESTEP, "minimax": SEARCH_MINIMAX, "negamax": SEARCH_NEGAMAX}


def single_scores(spec: str, boards: list[Board]) -> np.ndarray:
    """What the single-board policy computes for ``act`` on each board."""
    policy = make_policy(spec)
    if policy.name == "minimax":
        return np.array([policy._search(board, exact=False) for board in boards])
    return np.array([policy.scores(board) for board in boards])


@settings(max_examples=40, deadline=None)
@given(
    spec=st.sampled_from(["onestep", "minimax:depth=1", "minimax:depth=3", "negamax:depth=4"]),
    size=st.sampled_from([(6, 7, 4), (5, 6, 3), (4, 4, 3)]),
    count=st.integers(1, 20),
    threads=st.integers(2, 5),
    seed=st.integers(0, 2**32 - 1),
)
def test_many_threads_score_like_one_and_like_the_single_policy(
    spec: str, size: tuple[int, int, int], count: int, threads: int, seed: int
) -> None:
    geometry = Geometry(*size)
    batch, boards = random_batch(geometry, count, seed)
    policy = make_policy(spec)
    search = SEARCHES[policy.name]
    own = other = np.zeros(geometry.inarow + 1)
    if search != SEARCH_NEGAMAX:
        own, other = policy.weights.arrays(geometry.inarow)
    depth = getattr(policy, "depth", 1)
    one = batch_scores(search, batch, depth, own, other, threads=1)
    many = batch_scores(search, batch, depth, own, other, threads=threads)
    np.testing.assert_array_equal(many, one)
    np.testing.assert_array_equal(one, single_scores(spec, boards))


def test_a_batch_of_minimax_depth_4_is_the_same_on_every_thread_count() -> None:
    geometry = Geometry(6, 7, 4)
    batch, boards = random_batch(geometry, 48, seed=7)
    own, other = make_policy("minimax:depth=4").weights.arrays(4)
    one = batch_scores(SEARCH_MINIMAX, batch, 4, own, other, threads=1)
    for threads in (2, 3, 8, 48):
        scores = batch_scores(SEARCH_MINIMAX, batch, 4, own, other, threads)
        np.testing.assert_array_equal(scores, one)
    np.testing.assert_array_equal(one, single_scores("minimax:depth=4", boards))


def test_boards_beyond_64_bits_score_on_one_thread_alike() -> None:
    geometry = Geometry(9, 9, 5)
    batch, boards = random_batch(geometry, 3, seed=1)
    own, other = make_policy("onestep").weights.arrays(5)
    scores = batch_scores(SEARCH_ONESTEP, batch, 1, own, other, threads=4)
    np.testing.assert_array_equal(scores, single_scores("onestep", boards))


def alphabeta_after_reset(policy: AlphaBetaPolicy, boards: list[Board]) -> np.ndarray:
    """``policy.scores`` of each board from an empty table (a new game)."""
    scores = []
    for board in boards:
        policy.reset()
        scores.append(policy.scores(board))
    return np.array(scores)


@settings(max_examples=30, deadline=None)
@given(
    size=st.sampled_from([(6, 7, 4), (5, 6, 3), (4, 4, 3)]),
    max_depth=st.integers(1, 7),
    count=st.integers(1, 12),
    threads=st.integers(2, 5),
    seed=st.integers(0, 2**32 - 1),
)
def test_alphabeta_on_many_threads_scores_like_one_and_like_the_single_policy(
    size: tuple[int, int, int],
    max_depth: int,
    count: int,
    threads: int,
    seed: int,
) -> None:
    geometry = Geometry(*size)
    batch, boards = random_batch(geometry, count, seed)
    policy = AlphaBetaPolicy(time_budget=60.0, max_depth=max_depth)
    one = alphabeta_batch_scores(policy, batch, threads=1)
    np.testing.assert_array_equal(alphabeta_batch_scores(policy, batch, threads=threads), one)
    # In a table of the policy's own size, the batch searches exactly as the policy does.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            connectx_baselines.batch_actors,
            "ALPHABETA_TABLE_SIZE",
            connectx_baselines.alphabeta._TABLE_SIZE,
        )
        same_table = alphabeta_batch_scores(policy, batch, threads=threads)
    np.testing.assert_array_equal(same_table, alphabeta_after_reset(policy, boards))


def test_a_batch_of_alphabeta_depth_8_is_the_same_on_every_thread_count() -> None:
    batch, boards = random_batch(Geometry(6, 7, 4), 40, seed=11)
    policy = make_policy("alphabeta:max_depth=8")
    one = alphabeta_batch_scores(policy, batch, threads=1)
    for threads in (2, 3, 8, 40):
        np.testing.assert_array_equal(alphabeta_batch_scores(policy, batch, threads), one)
    # Every board's best columns are the single policy's (its larger table may tell apart the
    # scores of the columns below the best, which are upper bounds).
    single = alphabeta_after_reset(policy, boards)
    for batch_row, single_row in zip(one, single, strict=True):
        assert np.nanargmax(batch_row) in np.flatnonzero(single_row == np.nanmax(single_row))


def test_alphabeta_answers_batches_and_boards_beyond_64_bits() -> None:
    policy = make_policy("alphabeta:max_depth=3")
    assert batch_actor(policy) is not None
    geometry = Geometry(9, 9, 5)
    batch, boards = random_batch(geometry, 3, seed=2)
    np.testing.assert_array_equal(
        alphabeta_batch_scores(policy, batch, threads=4), alphabeta_after_reset(policy, boards)
    )
    columns = choose_columns(policy, batch, np.random.default_rng(0), "alphabeta")
    assert all(boards[k].can_play(int(c)) for k, c in enumerate(columns))


def test_alphabeta_batches_under_a_time_budget_stop_in_time() -> None:
    batch, _ = random_batch(Geometry(6, 7, 4), 6, seed=3)
    policy = AlphaBetaPolicy(time_budget=0.05)  # no max_depth: the clock ends every search
    alphabeta_batch_scores(policy, batch, threads=2)  # compiles (or loads) the kernels
    started = time.perf_counter()
    scores = alphabeta_batch_scores(policy, batch, threads=2)
    # Six boards of 50 ms each stop within their budgets, even one after the other (a busy core
    # may run both parts in turn); each legal column has a score.
    assert time.perf_counter() - started < 6 * 0.05 + 0.15
    assert (~np.isnan(scores)).sum(axis=1).tolist() == batch.legal().sum(axis=1).tolist()


INTERRUPTED_CHILD = """
import sys, time
import numpy as np
from connectx_baselines.alphabeta import AlphaBetaPolicy
from connectx_baselines.batch_actors import alphabeta_batch_scores
from connectx_gym import Geometry
from tests.support.board_batches import random_batch
batch, _ = random_batch(Geometry(6, 7, 4), 8, seed=5)
short = AlphaBetaPolicy(time_budget=60.0, max_depth=4)
before = alphabeta_batch_scores(short, batch, threads=1)  # compiles (or loads) the kernels
print("ready", flush=True)
try:
    alphabeta_batch_scores(AlphaBetaPolicy(time_budget=5.0), batch, threads=1)  # about 40 s
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
# the next batch is searched as before: nothing of the stop is left behind
after = alphabeta_batch_scores(short, batch, threads=1)
print("same" if np.array_equal(before, after, equal_nan=True) else "different", flush=True)
"""


@pytest.mark.slow
def test_ctrl_c_stops_a_batch_under_a_time_budget_at_once(tmp_path: Path) -> None:
    # The batch reads the clock in C, where Ctrl-C cannot reach it: it runs on a helper thread
    # while the main thread waits for signals, and a Ctrl-C halts every search of the batch.
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", INTERRUPTED_CHILD],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # inside the first board's five seconds
        child.send_signal(signal.SIGINT)
        sent = time.perf_counter()
        assert child.stdout.readline().strip() == "interrupted"
        elapsed = time.perf_counter() - sent
        child.wait(timeout=60)
        # The rest from the stream readline() read: when the last line came in the same read as
        # "interrupted" it waits in that stream's buffer, where communicate(), which reads the
        # pipe itself, would not see it.
        out = child.stdout.read()
    finally:
        child.kill()
    assert elapsed < 1.0, f"the batch took {elapsed:.1f} s to stop"
    # the exit status says how a child that printed nothing more ended (a signal: negative)
    assert out.split() == ["same"], f"exit status {child.returncode}: {errors.read_text()}"


def test_only_batches_that_may_take_long_wait_on_a_helper_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    helped: list[str] = []
    run_stoppable = connectx_baselines.batch_actors.run_stoppable

    def spy(call, stop):  # type: ignore[no-untyped-def]
        helped.append(threading.current_thread().name)
        run_stoppable(call, stop)

    monkeypatch.setattr(connectx_baselines.batch_actors, "run_stoppable", spy)
    batch, _ = random_batch(Geometry(6, 7, 4), 4, seed=6)
    quick = AlphaBetaPolicy(time_budget=7.0, max_depth=2)  # a class of its own in the choice
    for _ in range(3):  # the first call of a class is not timed (it may compile)
        alphabeta_batch_scores(quick, batch, threads=1)
    assert len(helped) == 2  # no time per board known yet
    alphabeta_batch_scores(quick, batch, threads=1)
    assert len(helped) == 2  # a batch of four boards at depth 2 takes well under 50 ms
    timed = AlphaBetaPolicy(time_budget=0.2)  # no max_depth: the clock ends each search
    for _ in range(3):
        alphabeta_batch_scores(timed, batch, threads=1)
    assert len(helped) == 5


class FakeClock:
    """A clock that the timed call moves forward by ``cost[threads]`` seconds per board."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def timed_calls(choice: ThreadChoice, clock: FakeClock, cost: dict[int, float], calls: int):
    """The threads ``choice`` picks over ``calls`` batches of 10 boards whose time per board on
    each way is ``cost``."""
    picked = []
    for _ in range(calls):
        threads = choice.threads("key", 4, nanoseconds=1e9)
        picked.append(threads)

        def call(threads: int = threads) -> None:
            clock.now += cost[threads] * 10

        choice.run("key", threads, 10, call)
    return picked


@pytest.mark.parametrize(("faster", "slower"), [(4, 1), (1, 4)])
def test_the_choice_measures_both_ways_then_keeps_the_faster(faster: int, slower: int) -> None:
    clock = FakeClock()
    choice = ThreadChoice(clock)
    cost = {faster: 1.0, slower: 3.0}
    calls = 20 * PROBE_EVERY
    picked = timed_calls(choice, clock, cost, calls)
    explored = 2 * (FIRST_SAMPLES + 1)  # each way's first call (compilation) is not counted
    assert sorted(set(picked[:explored])) == [1, 4]
    settled = picked[explored:]
    probes = settled.count(slower)  # about one per PROBE_EVERY * 3 calls (3x slower)
    assert calls // (PROBE_EVERY * 3) - 2 <= probes <= calls // (PROBE_EVERY * 3) + 1
    assert settled.count(faster) == len(settled) - probes


def test_the_choice_follows_a_change_of_load() -> None:
    clock = FakeClock()
    choice = ThreadChoice(clock)
    timed_calls(choice, clock, {1: 3.0, 4: 1.0}, PROBE_EVERY)
    assert choice.threads("key", 4, 1e9) == 4
    picked = timed_calls(choice, clock, {1: 3.0, 4: 9.0}, 8 * PROBE_EVERY)  # cores now busy
    assert picked[-2 * PROBE_EVERY :].count(4) <= 2  # the probes only


def test_short_batches_and_one_thread_stay_on_one_thread() -> None:
    choice = ThreadChoice()
    assert choice.threads("key", 8, nanoseconds=1_000) == 1
    assert choice.threads("key", 1, nanoseconds=1e9) == 1


def test_a_long_batch_search_leaves_the_other_threads_running() -> None:
    # Compiled kernels release the GIL (nogil): while a batch searches for about a second, a
    # Python thread beside it keeps running (with the GIL held it would stall for the whole call).
    batch, _ = random_batch(Geometry(6, 7, 4), 16, seed=4)
    policy = AlphaBetaPolicy(time_budget=0.1)
    alphabeta_batch_scores(policy, batch, threads=1)  # compiles (or loads) the kernels
    searching = threading.Thread(target=alphabeta_batch_scores, args=(policy, batch, 1))
    last, longest = time.perf_counter(), 0.0
    searching.start()
    while searching.is_alive():
        time.sleep(0.001)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    assert longest < 0.1, f"the main thread stalled for {longest:.2f} s"
