"""Kaggle export: the exported main.py plays the model's deterministic moves, with numpy only."""

from __future__ import annotations

import ast
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import torch
from stable_baselines3.common.vec_env import DummyVecEnv

from connectx_gym import Board, Geometry
from connectx_gym.env import ConnectXEnv
from connectx_gym.files import save_weights
from connectx_train.config import TrainConfig
from connectx_train.export import export_kaggle
from connectx_train.model import model_weights, new_model

STANDARD_LIBRARY = set(sys.stdlib_module_names)


def load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"exported_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_positions(geometry: Geometry, count: int, seed: int) -> list[Board]:
    rng = np.random.default_rng(seed)
    positions: list[Board] = []
    while len(positions) < count:
        board = Board(geometry, 0, 0, 0)
        for _ in range(rng.integers(0, geometry.cells)):
            if board.is_terminal():
                break
            board = board.play(int(rng.choice(board.legal_moves())))
        if not board.is_terminal():
            positions.append(board)
    return positions


def make_model(tmp_path: Path, rows: int, columns: int, inarow: int, seed: int):
    config = TrainConfig(rows=rows, columns=columns, inarow=inarow, seed=seed)
    env = DummyVecEnv([lambda: ConnectXEnv(rows, columns, inarow)])
    model = new_model(config, env, tmp_path)
    # A fresh network has near-uniform logits; spread them so that argmaxes are well separated.
    action_net = model.policy.action_net
    assert isinstance(action_net, torch.nn.Linear)
    with torch.no_grad():
        action_net.weight.mul_(40)
    return model


@pytest.mark.parametrize(
    ("rows", "columns", "inarow", "source"),
    [
        (6, 7, 4, "zip"),
        (6, 7, 4, "npz"),
        (5, 4, 3, "zip"),
    ],
)
def test_exported_moves_equal_model_moves(
    tmp_path: Path, rows: int, columns: int, inarow: int, source: str
) -> None:
    model = make_model(tmp_path, rows, columns, inarow, seed=rows + columns)
    geometry = Geometry(rows, columns, inarow)
    if source == "zip":
        model.save(tmp_path / "model.zip")
        with pytest.warns(UserWarning, match="unpickles"):
            exported = export_kaggle(tmp_path / "model.zip", tmp_path / "main.py")
    else:
        save_weights(model_weights(model, geometry), tmp_path / "model.npz")
        exported = export_kaggle(tmp_path / "model.npz", tmp_path / "main.py")
    agent = load_module(exported).agent
    config = {"rows": rows, "columns": columns, "inarow": inarow}
    positions = random_positions(geometry, 400, seed=1)
    planes = np.stack([board.to_planes() for board in positions])
    masks = np.stack([board.legal_mask() for board in positions])
    expected, _ = model.predict(planes, deterministic=True, action_masks=masks)
    answers = [agent({"board": b.to_kaggle(), "mark": b.mark}, config) for b in positions]
    assert answers == [int(a) for a in expected]


def test_exported_file_is_self_contained(tmp_path: Path) -> None:
    model = make_model(tmp_path, 6, 7, 4, seed=0)
    save_weights(model_weights(model, Geometry()), tmp_path / "model.npz")
    exported = export_kaggle(tmp_path / "model.npz", tmp_path / "main.py")
    tree = ast.parse(exported.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= STANDARD_LIBRARY | {"numpy", "threadpoolctl"}
    # threadpoolctl only where it imports: its import opens a try that falls back on ImportError
    guarded = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Try) and isinstance(node.body[0], ast.ImportFrom)
    ]
    assert [node.body[0].module for node in guarded] == ["threadpoolctl"]  # type: ignore[attr-defined]
    assert [handler.type.id for handler in guarded[0].handlers] == ["ImportError"]  # type: ignore[union-attr]
    functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert functions[-1] == "agent"  # Kaggle calls the file's last function
    module = load_module(exported)
    with pytest.raises(ValueError, match="another board size"):
        module.agent({"board": [0] * 20, "mark": 1}, {"rows": 4, "columns": 5, "inarow": 4})


def test_a_move_holds_blas_to_one_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second BLAS thread that waits for a busy core makes a move several times slower: the
    network's products run on one thread, and the file plays without threadpoolctl too."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    exported = export_kaggle("ppo", tmp_path / "main.py")
    module = load_module(exported)
    seen: list[int] = []
    masked_logits = module.masked_logits

    def watched(*arguments):
        pools = threadpoolctl.threadpool_info()
        seen.append(max(pool["num_threads"] for pool in pools if pool["user_api"] == "blas"))
        return masked_logits(*arguments)

    monkeypatch.setattr(module, "masked_logits", watched)
    config = {"rows": 6, "columns": 7, "inarow": 4}
    empty = {"board": [0] * 42, "mark": 1}
    assert module.agent(empty, config) == 3
    assert seen == [1]
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # its import fails
    plain = load_module(exported)
    assert plain._BLAS is None
    assert plain.agent(empty, config) == 3


def test_export_rejects_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        export_kaggle(tmp_path / "missing.zip", tmp_path / "main.py")
    other = tmp_path / "model.txt"
    other.write_text("x")
    with pytest.raises(ValueError, match=r"expected a \.npz"):
        export_kaggle(other, tmp_path / "main.py")
    assert not (tmp_path / "main.py").exists()


def test_exported_agent_in_kaggle_environments(tmp_path: Path) -> None:
    kaggle_environments = pytest.importorskip("kaggle_environments")
    model = make_model(tmp_path, 6, 7, 4, seed=3)
    save_weights(model_weights(model, Geometry()), tmp_path / "model.npz")
    exported = export_kaggle(tmp_path / "model.npz", tmp_path / "main.py")
    agent = load_module(exported).agent
    for agents in ([str(exported), "negamax"], ["negamax", str(exported)]):
        env = kaggle_environments.make("connectx", debug=False)
        steps = env.run(agents)
        final = steps[-1]
        assert all(state["status"] == "DONE" for state in final), final
    # Far inside Kaggle's 2-second actTimeout.
    config = {"rows": 6, "columns": 7, "inarow": 4}
    boards = random_positions(Geometry(), 50, seed=2)
    started = time.perf_counter()
    for board in boards:
        agent({"board": board.to_kaggle(), "mark": board.mark}, config)
    assert (time.perf_counter() - started) / len(boards) < 0.2


@pytest.mark.parametrize("command", ["export-kaggle", "export-onnx"])
@pytest.mark.parametrize("name", ["same path", "relative path", "symbolic link", "hard link"])
def test_an_export_never_writes_onto_its_model(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    name: str,
) -> None:
    from connectx_gym import cli
    from connectx_gym.files import SHIPPED_WEIGHTS, shipped_weights

    model = tmp_path / "model.npz"
    model.write_bytes(shipped_weights(next(iter(SHIPPED_WEIGHTS))).read_bytes())
    before = model.read_bytes()
    source, output = str(model), str(model)
    if name == "relative path":
        monkeypatch.chdir(tmp_path)
        output = f"../{tmp_path.name}/./model.npz"
    elif name == "symbolic link":
        (tmp_path / "link.npz").symlink_to(model)
        source = str(tmp_path / "link.npz")
    elif name == "hard link":
        (tmp_path / "other.npz").hardlink_to(model)
        output = str(tmp_path / "other.npz")
    status = cli.main([command, source, "-o", output])
    error = capsys.readouterr().err.strip()
    assert status != 0
    assert len(error.splitlines()) == 1
    assert "it is the model being exported" in error
    assert model.read_bytes() == before
    assert {path.name for path in tmp_path.iterdir()} <= {"link.npz", "model.npz", "other.npz"}
