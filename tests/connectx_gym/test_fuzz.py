"""Fuzzing the edges users type into: spec strings, env actions and reset options.

Whatever comes in, the answer is a valid result or a clear exception (``ValueError``,
``TypeError``, ``FileNotFoundError``, ``ImportError``, or ``RuntimeError`` for stepping a finished
game), never another exception type and never a hang (hypothesis' deadline).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectx_gym import Board, Policy, make_policy, parse_spec
from connectx_gym.env import ConnectXEnv

CLEAR = (ValueError, TypeError, FileNotFoundError, ImportError)
NAMES = ["random", "onestep", "minimax", "negamax", "file", "kaggle:random", "nosuch", ""]
VALUES = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "True", "None", "[1, 2]", "{'a': 1}", "'x'", "(", ""]),
    st.text(max_size=12),
)
KEYS = st.sampled_from(["depth", "seed", "path", "agent", "time_budget", "bogus", "1x", ""])


@st.composite
def specs(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(NAMES))
    items = draw(st.lists(st.tuples(KEYS, VALUES), max_size=3))
    params = ",".join(f"{key}={value}" for key, value in items)
    spec = f"{name}:{params}" if params else name
    if draw(st.booleans()):
        spec += "~" + draw(VALUES)
    return spec


def make(spec: str) -> Policy | None:
    try:
        policy = make_policy(spec)
    except CLEAR:
        return None
    assert isinstance(policy, Policy)
    return policy


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(specs(), st.text(max_size=300)))
@pytest.mark.slow
def test_spec_strings_give_a_policy_or_a_clear_error(spec: str) -> None:
    policy = make(spec)
    with contextlib.suppress(ValueError):
        parse_spec(spec)
    if policy is not None and spec.split(":")[0].split("~")[0] == "random":
        board = Board.empty(3, 4, 3)
        assert board.can_play(policy.act(board, np.random.default_rng(0)))


ACTIONS = st.one_of(
    st.integers(-3, 10),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.integers(-3, 10).map(np.int64),
    st.integers(0, 10).map(np.uint8),
    st.integers(-3, 10).map(lambda c: np.array([c])),
    st.integers(-3, 10).map(lambda c: np.array([[c, c]])),
    st.just(np.array(1.0)),
)
OPTIONS = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["opponent", "agent_mark", "seed", "bogus"]),
        st.one_of(
            st.sampled_from(["random", "random~0.5", "nosuch", "minimax:depth=-1", 1, 2, 3]),
            st.none(),
            st.integers(-5, 5),
            st.floats(),
        ),
        max_size=3,
    ),
)


@settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(
    size=st.tuples(st.integers(1, 6), st.integers(1, 7), st.integers(1, 5)),
    options=OPTIONS,
    actions=st.lists(ACTIONS, max_size=30),
    illegal=st.sampled_from(["lose", "raise"]),
)
@pytest.mark.slow
def test_env_actions_and_options(
    size: tuple[int, int, int], options: Any, actions: list[Any], illegal: str
) -> None:
    rows, columns, inarow = size
    env = ConnectXEnv(rows, columns, inarow, illegal_action=illegal)  # type: ignore[arg-type]
    try:
        observation, info = env.reset(seed=0, options=options)
    except CLEAR:
        observation, info = env.reset(seed=0)
    done = False
    for action in actions:
        try:
            observation, reward, done, truncated, info = env.step(action)
        except CLEAR:
            continue
        except RuntimeError:
            assert done  # only a finished game refuses a step
            observation, info = env.reset()
            done = False
            continue
        assert observation.shape == (2, rows, columns)
        assert reward in (-1.0, 0.0, 1.0)
        assert not truncated
        assert observation.sum() == env.board().moves
        np.testing.assert_array_equal(info["action_mask"], env.action_masks())
        if done:
            assert not env.action_masks().any()


@pytest.mark.parametrize("spec", ["random:depth=3,depth=4", "x" * 2000, "random~" + "9" * 5000])
def test_examples_found_by_hand(spec: str) -> None:
    assert make(spec) is None
