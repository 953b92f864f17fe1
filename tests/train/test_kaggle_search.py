"""Kaggle export of a network with its search (``mcts:net=...``): a self-contained ``main.py``
(numpy, and numba where it imports) that plays legal moves within its time, takes wins in one,
runs in kaggle-environments, plays the same moves compiled and as plain Python, and carries the
exact solver at its leaves (``solver_nodes``) where numba compiles it."""

from __future__ import annotations

import ast
import builtins
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from connectx_baselines.mcts import DEFAULT_MIRROR
from connectx_baselines.solver import Solver
from connectx_gym import Board, Geometry, make_policy
from connectx_gym.cli import main
from connectx_gym.files import SHIPPED_WEIGHTS, load_weights, save_weights
from connectx_gym.outputs import OutputPathError
from connectx_train.kaggle_search import export_search
from tests.baselines.test_mcts import random_board
from tests.baselines.test_mcts_proofs import late_positions
from tests.baselines.test_mcts_value import square_network

STANDARD_LIBRARY = set(sys.stdlib_module_names)
CONFIG = {"rows": 6, "columns": 7, "inarow": 4, "actTimeout": 2}
#: For searches that a count of simulations ends: a clock that a loaded machine cannot reach.
UNHURRIED = {**CONFIG, "actTimeout": 60}


def load_file(path: Path, numba: bool = True) -> dict:
    """The file's namespace, run as Kaggle runs a file: ``exec`` in a namespace of its own (with
    ``numba=False``, one where ``import numba`` fails, as on a Python without it)."""
    namespace: dict = {}
    if not numba:

        def without_numba(name: str, *args: object, **kwargs: object) -> object:
            if name == "numba":
                raise ImportError("No module named 'numba'")
            return builtins.__import__(name, *args, **kwargs)  # type: ignore[arg-type]

        namespace["__builtins__"] = {**vars(builtins), "__import__": without_numba}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


def load_agent(path: Path, numba: bool = True):
    """The file's ``agent`` (see :func:`load_file`)."""
    return load_file(path, numba)["agent"]


def observation(board: Board) -> dict:
    return {"board": board.to_kaggle(), "mark": board.mark}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export") / "main.py"
    return export_search("mcts:net=ppo,time_budget=0.1", path)


@pytest.fixture(scope="module")
def exported_agent(exported: Path):
    """The exported file's ``agent``, loaded (and compiled) once for the tests that only play."""
    return load_agent(exported)


def test_the_file_is_self_contained(exported: Path) -> None:
    tree = ast.parse(exported.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= STANDARD_LIBRARY | {"numpy", "numba", "threadpoolctl"}
    # numba and threadpoolctl only where they import: each import of them opens a try that
    # falls back on ImportError
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and isinstance(node.body[0], ast.Import | ast.ImportFrom):
            assert [handler.type.id for handler in node.handlers] == ["ImportError"]  # type: ignore[union-attr]
            first = node.body[0]
            guarded.add(first.module if isinstance(first, ast.ImportFrom) else first.names[0].name)
    assert guarded == {"numba", "threadpoolctl"}
    functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert functions[-1] == "agent"  # Kaggle calls the file's last function
    assert "mcts:net=ppo,time_budget=0.1" in exported.read_text()


def test_plays_legal_moves_within_its_time(exported_agent) -> None:
    agent = exported_agent
    rng = np.random.default_rng(3)
    for plies in (0, 3, 8, 15, 24, 33):
        board = random_board(Geometry(), rng, plies)
        started = time.perf_counter()
        column = agent(observation(board), CONFIG)
        assert time.perf_counter() - started < 1.0  # its budget is 0.1 s; Kaggle allows 2
        assert isinstance(column, int)
        assert board.can_play(column)


def test_takes_a_win_and_blocks_a_loss(exported_agent) -> None:
    agent = exported_agent
    win = Board.from_moves(Geometry(), (0, 1, 0, 1, 0, 6))
    assert agent(observation(win), CONFIG) == 0
    threat = Board.from_moves(Geometry(), (0, 6, 1, 6, 2))
    assert agent(observation(threat), CONFIG) == 3


def test_a_network_with_a_value_head_scores_the_leaves_by_it(tmp_path: Path) -> None:
    # the value alone says the bottom square of column 5 wins: the exported search finds it
    network = save_weights(square_network(Geometry(), 5), tmp_path / "square.npz")
    output = export_search(f"mcts:net={network},simulations=300", tmp_path / "main.py")
    assert "_VALUE_LEAVES = True" in output.read_text()
    agent = load_agent(output, numba=False)
    assert agent(observation(Board.empty()), UNHURRIED) == 5
    assert agent(observation(Board.from_moves(Geometry(), (0,))), UNHURRIED) == 5


def test_refuses_another_board_size(exported_agent) -> None:
    agent = exported_agent
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
    assert board.can_play(load_agent(output, numba=False)(observation(board), CONFIG))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("mcts:simulations=10", "exports with its network"),
        ("mcts:net=ppo,simulations=0", "simulations must be an integer >= 1"),
        ("mcts:net=ppo,depth=2", "does not take parameter"),
    ],
)
def test_refuses_what_it_cannot_export(tmp_path: Path, spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        export_search(spec, tmp_path / "main.py")
    assert not (tmp_path / "main.py").exists()


def test_compiled_and_plain_python_play_the_same_moves(tmp_path: Path) -> None:
    output = export_search("mcts:net=ppo,simulations=48", tmp_path / "main.py")
    compiled, plain = load_file(output), load_file(output, numba=False)
    assert compiled["_COMPILED"]
    assert not plain["_COMPILED"]
    assert compiled["_BLAS"] is not None  # threadpoolctl, here: a move holds BLAS to one thread
    assert "CPUDispatcher" in type(compiled["gather_leaves"]).__name__
    rng = np.random.default_rng(5)
    for plies in (0, 4, 9, 16, 25):
        board = random_board(Geometry(), rng, plies)
        moves = [
            namespace["agent"](observation(board), UNHURRIED) for namespace in (compiled, plain)
        ]
        assert moves[0] == moves[1], (board, moves)


@pytest.mark.parametrize(
    ("option", "written", "default"),
    [
        ("fpu_reduction=0.25", "_FPU_REDUCTION = 0.25", "_FPU_REDUCTION = None"),
        ("prior_temperature=1.5", "_PRIOR_TEMPERATURE = 1.5", "_PRIOR_TEMPERATURE = 1.0"),
        (
            f"mirror={not DEFAULT_MIRROR}",
            f"_MIRROR = {not DEFAULT_MIRROR}",
            f"_MIRROR = {DEFAULT_MIRROR}",
        ),
    ],
)
def test_carries_its_search_options(
    tmp_path: Path, option: str, written: str, default: str
) -> None:
    spec = f"mcts:net=ppo,simulations=48,{option}"
    output = export_search(spec, tmp_path / "main.py")
    assert written in output.read_text()
    plain = load_file(output, numba=False)  # plays as compiled (above) and loads at once
    policy = make_policy(spec)
    rng = np.random.default_rng(11)
    for plies in (2, 7, 12):
        board = random_board(Geometry(), rng, plies)
        found = policy.search(board, np.random.default_rng(0))
        exported = plain["_TREE"].search(
            board.current, board.mask, board.moves, np.random.default_rng(0),
            plain["_SIMULATIONS"], None, plain["_EXPLORATION"], plain["_ROLLOUTS"],
            plain["_evaluate"], plain["_BATCH"], plain["_VALUE_LEAVES"], plain["_PROVER"],
            plain["_FPU_REDUCTION"], plain["_MIRROR"],
        )  # fmt: skip
        assert np.array_equal(found["visits"], exported["visits"], equal_nan=True), board
    unset = export_search("mcts:net=ppo,simulations=48", tmp_path / "default.py")
    assert default in unset.read_text()


def test_the_solver_at_its_leaves_keeps_the_value_where_the_network_misleads(
    tmp_path: Path,
) -> None:
    # the value head of this network is wrong in most positions: the search alone loses value
    # where the exported solver, like the policy's, proves the leaves and keeps it
    network = save_weights(square_network(Geometry(), 5), tmp_path / "square.npz")
    alone = load_agent(  # as plain Python: it plays as compiled (above) and loads at once
        export_search(f"mcts:net={network},simulations=8", tmp_path / "a.py"), numba=False
    )
    spec = f"mcts:net={network},simulations=8,solver_nodes=200000"
    proving = load_file(export_search(spec, tmp_path / "b.py"))
    assert proving["_PROVER"] is not None
    assert "_SOLVER_NODES = 200000" in (tmp_path / "b.py").read_text()
    solver = Solver(Geometry())
    misled = 0
    for board in late_positions(60):
        values = solver.move_values(board)
        best = np.nanmax(values)
        if values[alone(observation(board), UNHURRIED)] == best:
            continue  # only the positions where the search alone loses value
        misled += 1
        column = proving["agent"](observation(board), UNHURRIED)
        assert values[column] == best, (board, column, values)
    assert misled >= 3
    assert proving["_PROVER"].stats[0] > 0  # nodes of its last proof


def test_without_numba_the_search_says_it_runs_without_its_solver(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = export_search("mcts:net=ppo,simulations=16,solver_nodes=1000", tmp_path / "main.py")
    namespace = load_file(output, numba=False)
    assert namespace["_PROVER"] is None
    assert "numba is not installed: the search runs without its solver" in capsys.readouterr().err
    board = Board.from_moves(Geometry(), (3, 3, 2))
    assert board.can_play(namespace["agent"](observation(board), CONFIG))


def test_refuses_to_write_onto_its_network(tmp_path: Path) -> None:
    network = tmp_path / "final.npz"
    save_weights(load_weights(SHIPPED_WEIGHTS["ppo"]), network)
    before = network.read_bytes()
    with pytest.raises(OutputPathError, match="refusing to write"):
        export_search(f"mcts:net={network},simulations=8", network)
    assert network.read_bytes() == before


def test_a_board_beyond_64_bits_runs_as_plain_python_without_its_solver(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    geometry = Geometry(9, 7, 4)  # 7 columns of 10 bits: beyond int64, so nothing compiles
    network = save_weights(square_network(geometry, 3), tmp_path / "wide.npz")
    spec = f"mcts:net={network},simulations=8,solver_nodes=1000"
    namespace = load_file(export_search(spec, tmp_path / "main.py"))
    assert not namespace["_COMPILED"]
    assert namespace["_PROVER"] is None
    assert "the board is beyond 64 bits: the search runs without" in capsys.readouterr().err
    board = Board.from_moves(geometry, (3, 3, 2))
    config = {"rows": 9, "columns": 7, "inarow": 4, "actTimeout": 60}
    assert board.can_play(namespace["agent"](observation(board), config))
