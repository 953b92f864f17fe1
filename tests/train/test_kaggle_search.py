"""Kaggle export of a network with its search (``mcts:net=...``): a self-contained ``main.py``
(numpy only) that plays legal moves within its time, takes wins in one, and runs in
kaggle-environments."""

from __future__ import annotations

import ast
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from connectx_gym import Board, Geometry
from connectx_gym.cli import main
from connectx_gym.files import SHIPPED_WEIGHTS, load_weights, save_weights
from connectx_gym.outputs import OutputPathError
from connectx_train.export import export_search
from tests.baselines.test_mcts_value import square_network

STANDARD_LIBRARY = set(sys.stdlib_module_names)
CONFIG = {"rows": 6, "columns": 7, "inarow": 4, "actTimeout": 2}


def load_agent(path: Path):
    """The file's ``agent``, run as Kaggle runs a file: ``exec`` in a namespace of its own."""
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace["agent"]


def observation(board: Board) -> dict:
    return {"board": board.to_kaggle(), "mark": board.mark}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export") / "main.py"
    return export_search("mcts:net=ppo,time_budget=0.1", path)


def test_the_file_is_self_contained(exported: Path) -> None:
    tree = ast.parse(exported.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= STANDARD_LIBRARY | {"numpy"}
    functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert functions[-1] == "agent"  # Kaggle calls the file's last function
    assert "mcts:net=ppo,time_budget=0.1" in exported.read_text()


def test_plays_legal_moves_within_its_time(exported: Path) -> None:
    agent = load_agent(exported)
    rng = np.random.default_rng(3)
    for plies in (0, 3, 8, 15, 24, 33):
        board = Board(Geometry(), 0, 0, 0)
        for _ in range(plies):
            following = board.play(int(rng.choice(board.legal_moves())))
            if following.is_terminal():
                break
            board = following
        started = time.perf_counter()
        column = agent(observation(board), CONFIG)
        assert time.perf_counter() - started < 1.0  # its budget is 0.1 s; Kaggle allows 2
        assert isinstance(column, int)
        assert board.can_play(column)


def test_takes_a_win_and_blocks_a_loss(exported: Path) -> None:
    agent = load_agent(exported)
    win = Board.from_moves(Geometry(), (0, 1, 0, 1, 0, 6))
    assert agent(observation(win), CONFIG) == 0
    threat = Board.from_moves(Geometry(), (0, 6, 1, 6, 2))
    assert agent(observation(threat), CONFIG) == 3


def test_a_network_with_a_value_head_scores_the_leaves_by_it(tmp_path: Path) -> None:
    # the value alone says the bottom square of column 5 wins: the exported search finds it
    network = save_weights(square_network(Geometry(), 5), tmp_path / "square.npz")
    output = export_search(f"mcts:net={network},simulations=300", tmp_path / "main.py")
    assert "_VALUE_LEAVES = True" in output.read_text()
    agent = load_agent(output)
    assert agent(observation(Board.empty()), CONFIG) == 5
    assert agent(observation(Board.from_moves(Geometry(), (0,))), CONFIG) == 5


def test_refuses_another_board_size(exported: Path) -> None:
    agent = load_agent(exported)
    with pytest.raises(ValueError, match="another board size"):
        agent({"board": [0] * 20, "mark": 1}, {"rows": 4, "columns": 5, "inarow": 4})


def test_runs_in_kaggle_environments(exported: Path) -> None:
    kaggle_environments = pytest.importorskip("kaggle_environments")
    for agents in ([str(exported), "negamax"], ["negamax", str(exported)]):
        env = kaggle_environments.make("connectx", debug=False)
        final = env.run(agents)[-1]
        assert all(state["status"] == "DONE" for state in final), final


def test_the_command_writes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "main.py"
    assert main(["export-kaggle", "mcts:net=ppo,simulations=16", "-o", str(output)]) == 0
    assert "wrote" in capsys.readouterr().err  # a status line, on stderr
    board = Board.from_moves(Geometry(), (3, 3))
    assert board.can_play(load_agent(output)(observation(board), CONFIG))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("mcts:simulations=10", "exports with its network"),
        ("mcts:net=ppo,simulations=0", "simulations must be an integer >= 1"),
        ("mcts:net=ppo,depth=2", "does not take parameter"),
        ("mcts:net=ppo,simulations=10,solver_nodes=1000", "export it without solver_nodes"),
    ],
)
def test_refuses_what_it_cannot_export(tmp_path: Path, spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        export_search(spec, tmp_path / "main.py")
    assert not (tmp_path / "main.py").exists()


def test_refuses_to_write_onto_its_network(tmp_path: Path) -> None:
    network = tmp_path / "final.npz"
    save_weights(load_weights(SHIPPED_WEIGHTS["ppo"]), network)
    before = network.read_bytes()
    with pytest.raises(OutputPathError, match="refusing to write"):
        export_search(f"mcts:net={network},simulations=8", network)
    assert network.read_bytes() == before
