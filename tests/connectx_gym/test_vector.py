"""The batched env: every board follows ``ConnectX-v0`` exactly; Gymnasium's vector-env contract;
batch opponents equal the per-board ones; bad actions never touch other boards."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from connectx_gym import Board, Geometry, IllegalMoveError, Policy, make_policy
from connectx_gym.batch import BoardBatch, choose_columns
from connectx_gym.env import ConnectXEnv
from connectx_gym.vector import ConnectXVectorEnv
from tests.support.board_batches import random_batch


class Scripted(Policy):
    """A deterministic opponent (no randomness): the ``(5 * moves + 3) % open``-th open column."""

    name = "scripted"

    def act(self, board: Board, rng: np.random.Generator) -> int:
        legal = board.open_columns()
        return legal[(5 * board.moves + 3) % len(legal)]


class ScriptedBatch(Scripted):
    """The same opponent answering a whole batch at once (the batch protocol)."""

    def act_batch(self, batch: BoardBatch, rng: np.random.Generator) -> np.ndarray:
        legal = batch.legal()
        pick = (5 * batch.moves + 3) % legal.sum(axis=1)
        return np.argmax(np.cumsum(legal, axis=1) > pick[:, None], axis=1)


GEOMETRIES = [(6, 7, 4), (4, 5, 3), (6, 7, 5), (7, 8, 4), (8, 8, 4), (3, 3, 1), (1, 1, 4)]


@pytest.mark.parametrize("opponent_class", [Scripted, ScriptedBatch])
@pytest.mark.parametrize(("rows", "columns", "inarow"), GEOMETRIES)
def test_every_board_follows_the_single_env(rows, columns, inarow, opponent_class):
    n = 6
    marks = [1, 2] * (n // 2)
    opponent = opponent_class()
    kwargs = {"rows": rows, "columns": columns, "inarow": inarow}
    venv = gym.make_vec("ConnectX-v0", num_envs=n, opponent=opponent, agent_mark=marks, **kwargs)
    singles = [ConnectXEnv(opponent=Scripted(), agent_mark=m, **kwargs) for m in marks]
    observations, infos = venv.reset(seed=0)
    for i, env in enumerate(singles):
        obs, info = env.reset(seed=0)
        check_board(i, observations, infos, obs, info)
    rng = np.random.default_rng(rows * 100 + columns * 10 + inarow)
    episodes = 0
    for _ in range(60):
        masks = venv.action_masks()
        actions = np.argmax(masks * rng.random(masks.shape), axis=1)
        wild = rng.random(n) < 0.03  # now and then an illegal move: full or off the board
        actions[wild] = rng.choice([-1, columns, *np.flatnonzero(~masks[0])], size=wild.sum())
        observations, rewards, terminated, truncated, infos = venv.step(actions)
        assert not truncated.any()
        for i, env in enumerate(singles):
            obs, reward, done, _, info = env.step(int(actions[i]))
            assert reward == rewards[i]
            assert done == terminated[i]
            if done:
                episodes += 1
                assert infos["_final_obs"][i]
                np.testing.assert_array_equal(infos["final_obs"][i], obs)
                check_info(i, infos["final_info"], info)
                assert infos["final_info"]["winner"][i] == info["winner"]
                assert infos["final_info"]["illegal_action"][i] == info.get("illegal_action", False)
                obs, info = env.reset()
            check_board(i, observations, infos, obs, info)
    assert episodes >= n


def check_info(i: int, infos: dict, info: dict) -> None:
    np.testing.assert_array_equal(infos["action_mask"][i], info["action_mask"])
    assert infos["agent_mark"][i] == info["agent_mark"]
    assert infos["opponent_action"][i] == info["opponent_action"]  # -1 where it did not move
    assert infos["_opponent_action"][i] == (info["opponent_action"] != -1)


def check_board(i: int, observations: np.ndarray, infos: dict, obs: np.ndarray, info: dict) -> None:
    np.testing.assert_array_equal(observations[i], obs)
    check_info(i, infos, info)


def play(venv: ConnectXVectorEnv, seed: int, steps: int) -> list:
    rng = np.random.default_rng(seed)
    out = [venv.reset(seed=seed)]
    for _ in range(steps):
        masks = venv.action_masks()
        out.append(venv.step(np.argmax(masks * rng.random(masks.shape), axis=1)))
    return out


def same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) or (isinstance(a, np.ndarray) and a.dtype == object):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return np.array_equal(a, b)


def test_same_seed_and_actions_give_the_same_episodes():
    opponents = ["random", "minimax:depth=2~0.3", "negamax:depth=2", "onestep"] * 4

    def make() -> ConnectXVectorEnv:
        return ConnectXVectorEnv(num_envs=16, opponent=opponents)

    first, second, other = play(make(), 3, 40), play(make(), 3, 40), play(make(), 4, 40)
    assert same(first, second)
    assert not same(first, other)


def test_vector_env_contract():
    venv = gym.make_vec("ConnectX-v0", num_envs=5, vectorization_mode="vector_entry_point")
    assert isinstance(venv, ConnectXVectorEnv)
    assert venv.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert venv.single_observation_space.shape == (2, 6, 7)
    assert venv.observation_space.shape == (5, 2, 6, 7)
    assert venv.action_space.shape == (5,)
    observations, infos = venv.reset(seed=1)
    assert observations.dtype == np.int8
    assert observations in venv.observation_space
    assert infos["action_mask"].shape == (5, 7)
    assert infos["action_mask"].dtype == np.int8
    masks = venv.action_masks()
    assert masks.shape == (5, 7)
    assert masks.dtype == bool
    observations[:] = 9  # a copy: the env's buffer is untouched
    observations, rewards, terminated, truncated, _ = venv.step(venv.action_space.sample())
    assert observations.max() <= 1
    assert rewards.shape == terminated.shape == truncated.shape == (5,)
    assert rewards.dtype == np.float64
    assert terminated.dtype == truncated.dtype == bool
    venv.close()
    assert venv.closed


def test_step_before_reset_and_bad_arguments():
    venv = ConnectXVectorEnv(num_envs=3)
    with pytest.raises(RuntimeError, match="reset"):
        venv.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="num_envs"):
        ConnectXVectorEnv(num_envs=0)
    with pytest.raises(ValueError, match="3 boards"):
        ConnectXVectorEnv(num_envs=3, opponent=["random"] * 2)
    with pytest.raises(ValueError, match="agent_mark"):
        ConnectXVectorEnv(num_envs=3, agent_mark=3)
    with pytest.raises(ValueError, match="unknown reset options"):
        venv.reset(options={"colour": 1})


@pytest.mark.parametrize("mode", ["lose", "raise"])
def test_bad_actions(mode):
    class Leftmost(Policy):
        def act(self, board, rng):
            return board.open_columns()[0]

    venv = ConnectXVectorEnv(
        num_envs=4, rows=2, columns=3, agent_mark=1, opponent=Leftmost(), illegal_action=mode
    )
    venv.reset(seed=0)
    before = (venv.step(np.zeros(4, dtype=np.int64))[0], venv.action_masks())  # column 0 is full
    assert not before[1][:, 0].any()
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        venv.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(TypeError, match="integer"):
        venv.step(np.zeros(4))
    actions = np.array([0, 1, 7, -2])
    if mode == "raise":
        with pytest.raises(ValueError, match=r"board 0: column 0 .*board 2: column 7"):
            venv.step(actions)
        np.testing.assert_array_equal(venv._output(), before[0])  # nothing moved
        np.testing.assert_array_equal(venv.action_masks(), before[1])
        return
    observations, rewards, terminated, _, infos = venv.step(actions)
    np.testing.assert_array_equal(terminated, [True, False, True, True])
    np.testing.assert_array_equal(rewards[[0, 2, 3]], -1.0)
    np.testing.assert_array_equal(infos["final_info"]["illegal_action"], [True, False, True, True])
    np.testing.assert_array_equal(infos["final_info"]["winner"][[0, 2, 3]], 2)
    # the illegal boards' final observations are the positions before the bad move
    for i in (0, 2, 3):
        np.testing.assert_array_equal(infos["final_obs"][i], before[0][i])
    assert observations[1].sum() > before[0][1].sum()  # board 1 played on


def test_illegal_opponent_answer_raises():
    class Bad(Policy):
        def act(self, board, rng):
            return 99

    venv = ConnectXVectorEnv(num_envs=2, opponent=Bad(), agent_mark=1)
    venv.reset(seed=0)
    with pytest.raises(IllegalMoveError, match="99"):
        venv.step(np.array([0, 0]))
    with pytest.raises(RuntimeError, match="reset"):  # the games cannot go on
        venv.step(np.array([1, 1]))
    venv.reset(options={"opponent": "random"})
    venv.step(np.array([1, 1]))


def test_per_board_opponents_change_at_each_boards_next_game():
    venv = ConnectXVectorEnv(num_envs=3, rows=2, columns=2, inarow=2, agent_mark=1)
    venv.reset(seed=0)
    venv.set_opponent("onestep", boards=[1])
    assert venv.opponent_names() == ["random"] * 3  # games in progress keep their opponent
    for _ in range(4):
        masks = venv.action_masks()
        venv.step(np.argmax(masks, axis=1))
    assert venv.opponent_names() == ["random", "onestep", "random"]
    venv.reset(options={"opponent": ["negamax", "random", "onestep"]})
    assert venv.opponent_names() == ["negamax", "random", "onestep"]


@pytest.mark.parametrize(
    ("rows", "columns", "inarow"), [(6, 7, 4), (5, 6, 3), (7, 8, 4), (9, 9, 5)]
)
@pytest.mark.parametrize("spec", ["onestep", "minimax:depth=3", "negamax:depth=4"])
def test_batched_search_opponents_score_like_the_single_ones(rows, columns, inarow, spec):
    from connectx_baselines.batch_actors import (
        SEARCH_MINIMAX,
        SEARCH_NEGAMAX,
        SEARCH_ONESTEP,
        batch_scores,
    )

    geometry = Geometry(rows, columns, inarow)
    rng = np.random.default_rng(0)
    batch, boards = random_batch(geometry, 12, seed=0)
    policy = make_policy(spec)
    searches = {"onestep": SEARCH_ONESTEP, "minimax": SEARCH_MINIMAX, "negamax": SEARCH_NEGAMAX}
    search = searches[policy.name]
    if search == SEARCH_MINIMAX:
        own, other = policy.weights.arrays(inarow)
        scores = batch_scores(search, batch, policy.depth, own, other)
        expected = [policy._search(b, exact=False) for b in boards]
    else:
        own = other = np.zeros(inarow + 1)
        if search == SEARCH_ONESTEP:
            own, other = policy.weights.arrays(inarow)
        scores = batch_scores(search, batch, getattr(policy, "depth", 1), own, other)
        expected = [policy.scores(b) for b in boards]
    np.testing.assert_array_equal(scores, np.array(expected))
    columns_played = choose_columns(policy, batch, rng, spec)
    for k, board in enumerate(boards):
        assert np.isclose(scores[k, columns_played[k]], np.nanmax(scores[k]))
        assert board.can_play(int(columns_played[k]))


def test_network_opponent_answers_all_boards_in_one_pass():
    from connectx_gym.files import NumpyNetPolicy, WeightsFile

    geometry = Geometry(4, 5, 3)
    rng = np.random.default_rng(1)
    weights = WeightsFile(
        geometry,
        [{"op": "flatten"}, {"op": "linear", "weight": "w", "bias": "b"}],
        {"w": rng.normal(size=(5, 40)), "b": rng.normal(size=5)},
    )
    calls = []
    original = weights.logits
    weights.logits = lambda planes: calls.append(len(planes)) or original(planes)
    policy = NumpyNetPolicy(weights)
    venv = ConnectXVectorEnv(num_envs=8, rows=4, columns=5, inarow=3, opponent=policy, agent_mark=1)
    venv.reset(seed=0)
    singles = [
        ConnectXEnv(4, 5, 3, opponent=NumpyNetPolicy(weights), agent_mark=1) for _ in range(8)
    ]
    for env in singles:
        env.reset(seed=0)
    actions = np.arange(8) % 5
    observations, *_ = venv.step(actions)
    assert calls[-1] == 8
    for i, env in enumerate(singles):  # distinct random logits: no ties, the same reply
        np.testing.assert_array_equal(observations[i], env.step(int(actions[i]))[0])


def test_render_draws_every_board():
    venv = ConnectXVectorEnv(num_envs=3, render_mode="ansi", agent_mark=2)
    venv.reset(seed=0)
    drawings = venv.render()
    assert len(drawings) == 3
    assert all(isinstance(text, str) and "mark 2" in text for text in drawings)
    assert len(ConnectXVectorEnv(num_envs=2, render_mode="rgb_array").render()) == 2


def test_memory_of_8192_boards():
    venv = ConnectXVectorEnv(num_envs=8192)
    venv.reset(seed=0)
    arrays = [v for v in vars(venv).values() if isinstance(v, np.ndarray)]
    assert sum(a.nbytes for a in arrays) < 5_000_000


def test_a_batch_larger_than_memory_is_refused_before_allocating(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from connectx_gym import vector

    started = time.perf_counter()
    with pytest.raises(ValueError, match="max_num_envs"):
        gym.make_vec("ConnectX-v0", num_envs=10**12)
    monkeypatch.setattr(vector, "available_memory", lambda: 4 * 10**9)  # a 4 GB machine
    cap = vector.max_num_envs(Geometry())
    assert 10**5 < cap < 10**7
    with pytest.raises(ValueError, match=rf"more than the {cap} boards \(max_num_envs\)"):
        gym.make_vec("ConnectX-v0", num_envs=10**7)
    assert time.perf_counter() - started < 5  # refused, not allocated
    assert ConnectXVectorEnv(num_envs=2).num_envs == 2


@pytest.mark.parametrize("mark", [2.0, 1.0, True, "2"])
def test_agent_marks_follow_the_whole_number_rule(mark: object) -> None:
    with pytest.raises(ValueError, match="agent_mark must be 1, 2 or None"):
        ConnectXVectorEnv(num_envs=2, agent_mark=mark)  # type: ignore[arg-type]
