"""The policy registry: spec strings, lazy entry points, errors and the Kaggle adapter."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import connectx_gym
from connectx_gym import (
    Board,
    Geometry,
    KaggleAgentPolicy,
    Policy,
    RandomPolicy,
    Struct,
    as_kaggle_agent,
    list_policies,
    make_policy,
    parse_spec,
    register_policy,
)
from connectx_gym import registry as registry_module

BUILT_IN = [
    "alphabeta",
    "file",
    "kaggle:negamax",
    "kaggle:random",
    "minimax",
    "negamax",
    "onestep",
    "random",
    "solver",
]


@pytest.fixture(autouse=True)
def private_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test registers into a copy of the registry, thrown away afterwards."""
    monkeypatch.setattr(registry_module, "_registry", dict(registry_module._registry))


class ColumnPolicy(Policy):
    """Plays ``column`` when legal, else the rightmost legal column; remembers its parameters."""

    def __init__(self, column: int = 0, label: str = "plain", *, scale: float = 1.0) -> None:
        super().__init__()
        self.column, self.label, self.scale = column, label, scale
        self.boards: list[Board] = []
        self.resets = 0

    def act(self, board: Board, rng: np.random.Generator) -> int:
        self.boards.append(board)
        return self.column if board.can_play(self.column) else board.legal_moves()[-1]

    def reset(self) -> None:
        self.resets += 1


# -- parse_spec -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "name", "params"),
    [
        ("random", "random", {}),
        ("  random  ", "random", {}),
        ("minimax:depth=4", "minimax", {"depth": 4}),
        ("minimax: depth = 4 ", "minimax", {"depth": 4}),
        ("kaggle:negamax", "kaggle:negamax", {}),
        ("kaggle:negamax:depth=2", "kaggle:negamax", {"depth": 2}),
        (
            "solver:time_budget=1,fallback_depth=8",
            "solver",
            {"time_budget": 1, "fallback_depth": 8},
        ),
        ("alphabeta:time_budget=0.5", "alphabeta", {"time_budget": 0.5}),
        (
            "x:a=True,b=false,c=None,d=null,e='text',f=word,g=-3",
            "x",
            {"a": True, "b": False, "c": None, "d": None, "e": "text", "f": "word", "g": -3},
        ),
        ("file:path=C:/runs/final.npz", "file", {"path": "C:/runs/final.npz"}),
        ("minimax:depth=4,", "minimax", {"depth": 4}),
    ],
)
def test_parse_spec(spec: str, name: str, params: dict[str, Any]) -> None:
    parsed_name, parsed = parse_spec(spec)
    assert parsed_name == name
    assert parsed == params
    assert all(type(parsed[key]) is type(value) for key, value in params.items())


@pytest.mark.parametrize(
    "spec",
    ["", "   ", ":depth=3", "=3", "minimax:depth=4,oops", "minimax:4x=2", "minimax:depth=4,=5"],
)
def test_parse_spec_rejects_bad_specs(spec: str) -> None:
    with pytest.raises(ValueError, match="policy spec"):
        parse_spec(spec)


# -- make_policy ----------------------------------------------------------------------------------


def test_make_policy_random_and_its_errors() -> None:
    assert isinstance(make_policy("random"), RandomPolicy)
    with pytest.raises(ValueError, match=r"unknown policy 'randm'\. Did you mean 'random'\?"):
        make_policy("randm")
    with pytest.raises(ValueError, match=r"unknown policy 'minimx'\. Did you mean 'minimax'\?"):
        make_policy("minimx:depth=3")
    with pytest.raises(ValueError, match=r"unknown policy 'zzzz'\. Registered: .*random"):
        make_policy("zzzz")
    with pytest.raises(ValueError, match=r"does not take parameter\(s\) depth; it takes: none"):
        make_policy("random:depth=3")
    with pytest.raises(ValueError, match=r"unknown policy 'random:depth'\. Did you mean 'random'"):
        make_policy("random:depth")
    with pytest.raises(TypeError, match="must be a string, a Policy or a callable"):
        make_policy(3)  # type: ignore[arg-type]


def test_make_policy_passes_objects_and_wraps_callables() -> None:
    policy = ColumnPolicy()
    assert make_policy(policy) is policy
    with pytest.raises(ValueError, match="cannot be applied"):
        make_policy(policy, column=2)

    def agent(obs: Any, config: Any) -> int:
        return 0

    wrapped = make_policy(agent)
    assert isinstance(wrapped, KaggleAgentPolicy)
    assert wrapped.name == "agent"
    assert make_policy(agent, name="mine").name == "mine"


def test_parameters_defaults_spec_and_keywords_in_order() -> None:
    register_policy("column", ColumnPolicy, column=1, label="default")
    policy = make_policy("column")
    assert (policy.column, policy.label, policy.scale) == (1, "default", 1.0)
    policy = make_policy("column:column=3,scale=0.5")
    assert (policy.column, policy.label, policy.scale) == (3, "default", 0.5)
    policy = make_policy("column:column=3", column=5, label="keyword")
    assert (policy.column, policy.label) == (5, "keyword")
    with pytest.raises(ValueError, match=r"parameter\(s\) colour, depth; it takes: column, label"):
        make_policy("column:depth=2,colour=red")
    register_policy("column", RandomPolicy)  # registering again replaces
    assert isinstance(make_policy("column"), RandomPolicy)


def test_policy_parameters_name_what_a_spec_may_give_with_the_defaults_it_gets() -> None:
    import inspect

    from connectx_gym.registry import policy_parameters

    register_policy("column", ColumnPolicy, label="default")
    assert policy_parameters("column") == {"column": 0, "label": "default", "scale": 1.0}
    assert policy_parameters("file")["path"] is inspect.Parameter.empty  # a spec must give it
    register_policy("anything", lambda **kwargs: RandomPolicy())
    assert policy_parameters("anything") is None  # it takes any name: none to list
    assert policy_parameters("random") == {}
    with pytest.raises(ValueError, match="unknown policy 'nosuch'"):
        policy_parameters("nosuch")


def test_factory_must_return_a_policy() -> None:
    register_policy("not-a-policy", lambda: "column 3")
    with pytest.raises(TypeError, match="not a Policy"):
        make_policy("not-a-policy")


# -- register_policy: lazy entry points -----------------------------------------------------------


def test_entry_points_are_imported_only_when_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = "connectx_lazy_test_policies"
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(
            """
            import numpy as np
            from connectx_gym import Policy

            class Leftmost(Policy):
                def __init__(self, offset: int = 0) -> None:
                    super().__init__()
                    self.offset = offset

                def act(self, board, rng: np.random.Generator) -> int:
                    return board.legal_moves()[self.offset]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    register_policy("leftmost", f"{module}:Leftmost", offset=1)
    assert "leftmost" in list_policies()
    assert module not in sys.modules
    policy = make_policy("leftmost")
    assert module in sys.modules
    assert type(policy).__name__ == "Leftmost"
    assert policy.offset == 1
    assert policy.act(Board.empty(), np.random.default_rng(0)) == 1
    with pytest.raises(ValueError, match="does not take"):
        make_policy("leftmost:depth=1")
    register_policy("missing", f"{module}_absent:Nothing")
    with pytest.raises(ImportError, match=r"^cannot load policy 'missing': .* cannot be imported"):
        make_policy("missing")


def test_builtin_entry_points_are_lazy() -> None:
    import subprocess

    code = (
        "import sys, connectx_gym\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('baselines', 'numba', 'torch', 'stable_baselines3', 'kaggle_environments')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("name", "entry_point"),
    [
        ("", "module:attr"),
        (" padded", "module:attr"),
        ("a=b", "module:attr"),
        ("ok", "no-colon"),
        ("ok", "too:many:colons"),
    ],
)
def test_register_policy_rejects_bad_names(name: str, entry_point: str) -> None:
    with pytest.raises(ValueError, match=r"invalid policy name|entry point"):
        register_policy(name, entry_point)


def test_list_policies() -> None:
    names = list_policies()
    assert names == sorted(names)
    assert set(BUILT_IN) <= set(names)
    register_policy("aaa-first", ColumnPolicy)
    assert list_policies() == ["aaa-first", *names]


# -- as_kaggle_agent ------------------------------------------------------------------------------


def random_game(geometry: Geometry, seed: int) -> list[Board]:
    rng = np.random.default_rng(seed)
    board = Board(geometry, 0, 0, 0)
    boards = []
    while not board.is_terminal():
        boards.append(board)
        board = board.play(int(rng.choice(board.legal_moves())))
    return boards


def test_as_kaggle_agent_with_plain_dicts() -> None:
    geometry = Geometry(5, 6, 4)
    config = {"rows": 5, "columns": 6, "inarow": 4}
    boards = random_game(geometry, 0)
    answers = []
    for seed in (11, 11, 12):
        agent = as_kaggle_agent("random", seed=seed)
        answers.append([agent({"board": b.to_kaggle(), "mark": b.mark}, config) for b in boards])
        assert all(b.can_play(a) for b, a in zip(boards, answers[-1], strict=True))
        assert all(type(a) is int for a in answers[-1])
    assert answers[0] == answers[1]
    assert answers[0] != answers[2]
    assert agent.__name__ == "random_agent"


def test_as_kaggle_agent_sees_the_right_board_with_structs() -> None:
    policy = ColumnPolicy(column=2)
    agent = as_kaggle_agent(policy)
    geometry = Geometry(6, 7, 4)
    config = Struct(rows=6, columns=7, inarow=4, timeout=2, actTimeout=2)
    for board in random_game(geometry, 3):
        obs = Struct(board=board.to_kaggle(), mark=board.mark, step=board.moves)
        assert agent(obs, config) == (2 if board.can_play(2) else board.legal_moves()[-1])
        assert policy.boards[-1] == board
        assert policy.boards[-1].mark == board.mark
    with pytest.raises(ValueError, match="floats"):
        agent({"board": [1] + [0] * 41, "mark": 2}, config)


def test_as_kaggle_agent_resets_the_policy_at_each_new_game() -> None:
    policy = ColumnPolicy()
    agent = as_kaggle_agent(policy)
    config = {"rows": 6, "columns": 7, "inarow": 4}
    game = random_game(Geometry(), 5)
    assert len(game) > 6
    first_game_boards = [game[1], game[3], game[5]]  # the agent plays mark 2
    for board in first_game_boards:
        agent({"board": board.to_kaggle(), "mark": board.mark}, config)
    assert policy.resets == 0
    agent({"board": game[1].to_kaggle(), "mark": 2}, config)  # a new game, mark 2 again
    assert policy.resets == 1
    agent({"board": game[3].to_kaggle(), "mark": 2}, config)
    agent({"board": game[0].to_kaggle(), "mark": 1}, config)  # a new game, as mark 1
    assert policy.resets == 2
    agent({"board": game[0].to_kaggle(), "mark": 1}, config)  # as many stones: a new game too
    assert policy.resets == 3


def test_kaggle_agent_round_trip() -> None:
    """policy -> Kaggle agent -> policy plays the same columns as the policy itself."""
    original = ColumnPolicy(column=4)
    round_trip = make_policy(as_kaggle_agent(ColumnPolicy(column=4), seed=0))
    assert isinstance(round_trip, KaggleAgentPolicy)
    rng = np.random.default_rng(0)
    for board in random_game(Geometry(7, 9, 5), 1) + random_game(Geometry(10, 12, 4), 2):
        assert round_trip.act(board, rng) == original.act(board, rng)
    spec_round_trip = make_policy(as_kaggle_agent("random", seed=4))
    for board in random_game(Geometry(), 2):
        assert board.can_play(spec_round_trip.act(board, rng))


def test_as_kaggle_agent_does_not_import_kaggle_environments() -> None:
    import subprocess

    code = (
        "import sys, connectx_gym\n"
        "agent = connectx_gym.as_kaggle_agent('random', seed=0)\n"
        "print(agent({'board': [0] * 42, 'mark': 1}, {'rows': 6, 'columns': 7, 'inarow': 4}))\n"
        "print('kaggle_environments' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    column, imported = result.stdout.split()
    assert 0 <= int(column) < 7
    assert imported == "False"


def test_package_exports() -> None:
    for name in connectx_gym.__all__:
        assert hasattr(connectx_gym, name), name


def test_noise_suffix_softens_any_spec() -> None:
    from connectx_gym.policy import NoisyPolicy

    policy = make_policy("onestep~0.25")
    assert isinstance(policy, NoisyPolicy)
    assert policy.epsilon == 0.25
    assert policy.name == "onestep~0.25"
    board = Board.from_moves(Geometry(6, 7, 4), [3, 3, 2])
    always_random = make_policy("onestep~1")
    rng = np.random.default_rng(0)
    assert {always_random.act(board, rng) for _ in range(200)} == set(range(7))


@pytest.mark.parametrize("spec", ["onestep~2", "onestep~-0.1", "onestep~x", "onestep~nan"])
def test_noise_suffix_rejects_bad_values(spec: str) -> None:
    with pytest.raises(ValueError, match="noise"):
        make_policy(spec)


@pytest.mark.parametrize(
    ("name", "entry_point", "error"),
    [
        ("answer", 42, TypeError),
        ("answer", None, TypeError),
        ("has,comma", "module:attr", ValueError),
        ("has~tilde", "module:attr", ValueError),
        ("ok", "not a module:attr", ValueError),
        ("ok", "module:", ValueError),
        (42, "module:attr", ValueError),
    ],
)
def test_register_policy_checks_types(name: Any, entry_point: Any, error: type) -> None:
    with pytest.raises(error, match=r"invalid policy name|entry point"):
        register_policy(name, entry_point)
    assert str(name) not in list_policies()


def test_duplicate_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="'depth' given twice"):
        parse_spec("minimax:depth=3,depth=4")
    with pytest.raises(ValueError, match="given twice"):
        make_policy("random:seed=1,seed=2~0.5")


def test_overlong_specs_are_one_clear_error() -> None:
    with pytest.raises(ValueError, match="longer than 1024"):
        make_policy("x" * 5000)
    # Between the file system's name limit (255) and the spec limit: not a path, not an OSError.
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("y" * 300)
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("nul\x00byte")


def test_special_float_values_are_numbers() -> None:
    assert parse_spec("p:a=nan,b=inf,c=-inf")[1]["b"] == float("inf")
    assert np.isnan(parse_spec("p:a=nan")[1]["a"])
    with pytest.raises(ValueError, match="more than 4000 characters"):  # too long for int()
        parse_spec("p:a=" + "9" * 5000)
    assert parse_spec("p:a=" + "(" * 500)[1]["a"] == "(" * 500


def test_missing_entry_point_attribute_is_an_import_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from connectx_gym import registry

    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    register_policy("ghost", "connectx_gym.policy:NoSuchPolicy")
    with pytest.raises(ImportError, match="not found"):
        make_policy("ghost")


@pytest.mark.parametrize("value", ["1_0", "0x10", "1e1_0", "(1_0)", "1j"])
def test_spec_numbers_have_one_parser_without_underscores(value: str) -> None:
    with pytest.raises(ValueError, match=f"depth '{re.escape(value)}' is not a number"):
        make_policy(f"minimax:depth={value}")


def test_spec_numbers_read_as_written() -> None:
    params = parse_spec("p:a=10,b=-3,c=0.5,d=1e-3,e=+2,f=.5,g=word,h='quoted'")[1]
    assert params == {"a": 10, "b": -3, "c": 0.5, "d": 1e-3, "e": 2, "f": 0.5, "g": "word",
                      "h": "quoted"}  # fmt: skip
    assert isinstance(params["a"], int)
    with pytest.raises(ValueError, match="bad noise"):
        make_policy("random~0_5")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("alphabeta:weights=random", r"weights of policy 'alphabeta' takes WindowWeights"),
        ("minimax:weights=1", r"parameter weights of policy 'minimax' takes WindowWeights"),
        ("kaggle:random:x=1", r"policy 'kaggle:random' does not take parameter\(s\) x"),
        ("column:label=3", r"parameter label of policy 'column' takes str, not 3"),
        ("column:column=left", r"parameter column of policy 'column' takes int, not 'left'"),
    ],
)
def test_spec_values_the_factory_cannot_take_are_refused_before_making(
    spec: str, message: str
) -> None:
    register_policy("column", ColumnPolicy)
    with pytest.raises(ValueError, match=message):
        registry_module.check_spec(spec)  # nothing made, no process started
    with pytest.raises(ValueError, match=message):
        make_policy(spec)


def test_spec_values_of_the_annotated_kinds_pass() -> None:
    register_policy("column", ColumnPolicy)
    assert registry_module.check_spec("column:column=2,label=x,scale=1") == (
        "column",
        {"column": 2, "label": "x", "scale": 1},
    )
    assert make_policy("minimax:weights=None,depth=2").depth == 2
    assert registry_module.check_spec("solver:fallback=alphabeta,table_bits=None")[0] == "solver"


def test_a_spec_whose_value_ends_in_a_file_suffix_is_a_spec() -> None:
    register_policy("column", ColumnPolicy)
    policy = make_policy("column:column=2,label=runs/x/final.npz")
    assert isinstance(policy, ColumnPolicy)
    assert policy.label == "runs/x/final.npz"
    from connectx_gym.policy import NoisyPolicy

    noisy = make_policy("column:label=agent.py~0.5")
    assert isinstance(noisy, NoisyPolicy)
    assert noisy.policy.label == "agent.py"
    with pytest.raises(FileNotFoundError, match=r"unknown:label=x\.npz"):
        make_policy("unknown:label=x.npz")  # no such policy: still read as a path
