"""Saved agents: the weights-only format, its numpy forward pass, .py agents, SB3 .zip models."""

from __future__ import annotations

import json
import pickle
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from connectx_gym import Board, Geometry, files, make_policy
from connectx_gym.files import (
    NumpyNetPolicy,
    WeightsFile,
    conv2d_same,
    forward_layers,
    load_policy_file,
    load_weights,
    save_weights,
)
from connectx_gym.weights import conv_kernel


def conv_reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Cross-correlation with zero padding, one output cell at a time."""
    n, _, h, w = x.shape
    out_channels, _, kh, kw = weight.shape
    padded = np.pad(x, ((0, 0), (0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)))
    out = np.zeros((n, out_channels, h, w))
    for b in range(n):
        for o in range(out_channels):
            for i in range(h):
                for j in range(w):
                    out[b, o, i, j] = (padded[b, :, i : i + kh, j : j + kw] * weight[o]).sum()
            out[b, o] += bias[o]
    return out


def random_weights(geometry: Geometry, seed: int = 0, channels: int = 4) -> WeightsFile:
    """A small network in the weights-only format with random parameters."""
    rng = np.random.default_rng(seed)
    g = geometry
    params = {
        "c0.w": rng.normal(size=(channels, 3, 3, 3)),
        "c0.b": rng.normal(size=channels),
        "r.w": rng.normal(size=(channels, channels, 3, 3)) * 0.3,
        "r.b": rng.normal(size=channels),
        "l.w": rng.normal(size=(g.columns, channels * g.rows * g.columns)) * 0.1,
        "l.b": rng.normal(size=g.columns),
    }
    layers = [
        {"op": "ones_plane"},
        {"op": "conv", "weight": "c0.w", "bias": "c0.b"},
        {"op": "relu"},
        {"op": "residual", "body": [{"op": "conv", "weight": "r.w", "bias": "r.b"}]},
        {"op": "tanh"},
        {"op": "flatten"},
        {"op": "linear", "weight": "l.w", "bias": "l.b"},
    ]
    return WeightsFile(g, layers, params)


def random_board(geometry: Geometry, rng: np.random.Generator) -> Board:
    board = Board(geometry, 0, 0, 0)
    for _ in range(rng.integers(0, geometry.cells)):
        if board.is_terminal():
            break
        board = board.play(int(rng.choice(board.legal_moves())))
    return board


@pytest.mark.parametrize("kernel", [1, 3, 5])
@pytest.mark.parametrize("shape", [(1, 2, 6, 7), (3, 3, 4, 5), (2, 1, 1, 1)])
def test_conv_matches_reference(shape: tuple[int, ...], kernel: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=shape)
    weight = rng.normal(size=(4, shape[1], kernel, kernel))
    bias = rng.normal(size=4)
    np.testing.assert_allclose(conv2d_same(x, weight, bias), conv_reference(x, weight, bias))


def test_kernels_are_made_once_and_change_no_logit() -> None:
    weights = random_weights(Geometry(), channels=5)
    # the residual body's 3x3 convolution too; a 1x1 one would multiply its weight directly
    assert sorted(weights.kernels) == ["c0.w", "r.w"]
    for name, kernel in weights.kernels.items():
        np.testing.assert_array_equal(kernel, conv_kernel(weights.params[name]))
        assert not kernel.flags.writeable
    planes = np.random.default_rng(2).integers(0, 2, size=(9, 2, 6, 7)).astype(np.float32)
    # makes each matrix itself, from the parameters as the forward pass holds them
    fresh = forward_layers(weights.layers, weights._run_params, planes)
    np.testing.assert_array_equal(weights.logits(planes), fresh)  # bit for bit
    as_read = forward_layers(weights.layers, weights.params, planes)  # linear weights row-major
    np.testing.assert_allclose(weights.logits(planes), as_read, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("rows", "columns", "inarow"), [(6, 7, 4), (4, 5, 3), (1, 3, 2)])
def test_roundtrip_and_policy(tmp_path: Path, rows: int, columns: int, inarow: int) -> None:
    geometry = Geometry(rows, columns, inarow)
    weights = random_weights(geometry)
    path = save_weights(weights, tmp_path / "agent.npz")
    loaded = load_weights(path)
    assert loaded.meta == weights.meta
    policy = make_policy(str(path))
    assert isinstance(policy, NumpyNetPolicy)
    rng = np.random.default_rng(0)
    for _ in range(30):
        board = random_board(geometry, rng)
        if board.is_terminal():
            continue
        logits = forward_layers(weights.layers, weights.params, board.to_planes()[None] * 1.0)[0]
        legal = board.legal_moves()
        expected = legal[int(np.argmax(logits[legal]))]
        assert policy.act(board, rng) == expected
        scores = policy.scores(board)
        assert np.isnan(scores[[c for c in range(columns) if c not in legal]]).all()


def test_sampling_policy_stays_legal() -> None:
    geometry = Geometry()
    policy = NumpyNetPolicy(random_weights(geometry), deterministic=False)
    rng = np.random.default_rng(0)
    for _ in range(50):
        board = random_board(geometry, rng)
        if not board.is_terminal():
            assert board.can_play(policy.act(board, rng))


def test_probabilities_are_the_softmax_of_the_legal_logits() -> None:
    geometry = Geometry()
    policy = NumpyNetPolicy(random_weights(geometry))
    rng = np.random.default_rng(1)
    for _ in range(20):
        board = random_board(geometry, rng)
        if board.is_terminal():
            continue
        probabilities = policy.probabilities(board)
        logits = policy.scores(board)  # NaN for full columns
        legal = board.legal_mask()
        expected = np.exp(logits[legal] - logits[legal].max())
        np.testing.assert_allclose(probabilities[legal], expected / expected.sum(), rtol=1e-6)
        assert (probabilities[~legal] == 0).all()
        assert int(np.argmax(probabilities)) == policy.act(board, rng)


def blas_threads() -> list[int]:
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


def test_a_board_is_played_with_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[int]] = []
    real = files.masked_logits

    def counting(*args: object) -> np.ndarray:
        seen.append(blas_threads())
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(files, "masked_logits", counting)
    policy = NumpyNetPolicy(random_weights(Geometry()))
    with threadpool_limits(2, user_api="blas"):
        before = blas_threads()
        assert before  # numpy's BLAS is found
        policy.act(Board.empty(), np.random.default_rng(0))
        policy.scores(Board.empty())
        assert blas_threads() == before  # restored after each board
    assert seen == [[1] * len(before)] * 2


def test_weights_as_env_opponent_and_wrong_board(tmp_path: Path) -> None:
    path = save_weights(random_weights(Geometry()), tmp_path / "opponent.npz")
    env = gym.make("connectx_gym:ConnectX-v0", opponent=str(path), agent_mark=2)
    observation, _ = env.reset(seed=0)
    assert observation[1].sum() == 1  # the network moved first
    with pytest.raises(ValueError, match="trained on"):
        make_policy(str(path)).act(Board.empty(5, 5, 4), np.random.default_rng(0))


def test_missing_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_policy_file(str(tmp_path / "absent.npz"))
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match="not a connectx-gym weights file"):
        load_policy_file(str(garbage))
    plain = tmp_path / "plain.npz"
    np.savez(plain, x=np.zeros(3))
    with pytest.raises(ValueError, match="weights file"):
        load_weights(plain)
    wrong_layers = tmp_path / "wrong.npz"
    meta = dict(random_weights(Geometry()).meta, layers=[{"op": "linear", "weight": "nope"}])
    np.savez(wrong_layers, __meta__=np.array(json.dumps(meta)))
    with pytest.raises(ValueError, match="missing array"):
        load_weights(wrong_layers)
    other = tmp_path / "model.txt"
    other.write_text("x")
    with pytest.raises(ValueError, match="unknown model file type"):
        load_policy_file(str(other))


class _Exploit:
    def __reduce__(self) -> tuple:
        return (Path.touch, (Path(self.target),))  # type: ignore[attr-defined]


def test_weights_loader_never_unpickles(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    exploit = _Exploit()
    exploit.target = str(marker)  # type: ignore[attr-defined]
    evil = tmp_path / "evil.npz"
    meta = random_weights(Geometry()).meta
    payload = np.empty(1, dtype=object)
    payload[0] = exploit
    with zipfile.ZipFile(evil, "w") as archive:
        archive.writestr("__meta__.npy", _npy_bytes(np.array(json.dumps(meta))))
        archive.writestr("c0.w.npy", _npy_bytes(payload))
    with pytest.raises(ValueError, match="not a connectx-gym weights file"):
        load_weights(evil)
    assert not marker.exists()
    assert pickle.loads(pickle.dumps(exploit)) is None  # it was armed: unpickling runs it
    assert marker.exists()


def _npy_bytes(array: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def test_kaggle_py_agent_file(tmp_path: Path) -> None:
    source = tmp_path / "submission.py"
    source.write_text(
        "def helper(obs, config):\n    return 0\n\n"
        "def my_agent(obs, config):\n"
        "    return max(c for c in range(config.columns) if obs.board[c] == 0)\n"
    )
    policy = make_policy(str(source))
    board = Board.from_moves(Geometry(), [6] * 6)
    assert policy.act(board, np.random.default_rng(0)) == 5  # the last function, not helper
    named = tmp_path / "named.py"
    named.write_text(
        "def agent(obs, config):\n    return 2\n\ndef later(obs, config):\n    return 0\n"
    )
    assert make_policy(str(named)).act(board, np.random.default_rng(0)) == 2
    broken = tmp_path / "broken.py"
    broken.write_text("def agent(obs, config)\n    return 1\n")
    with pytest.raises(ValueError, match="failed"):
        make_policy(str(broken))
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(ValueError, match="no function"):
        make_policy(str(empty))


@pytest.mark.slow
def test_sb3_zip_warns_and_matches_model(tmp_path: Path) -> None:
    pytest.importorskip("sb3_contrib")
    from connectx_gym.env import ConnectXEnv
    from connectx_train.config import TrainConfig
    from connectx_train.model import new_model

    config = TrainConfig(rows=5, columns=6, inarow=4, channels=8, features_dim=16)
    model = new_model(config, ConnectXEnv(5, 6, 4), tmp_path)
    model.save(tmp_path / "model.zip")
    with pytest.warns(UserWarning, match="unpickles"):
        policy = make_policy(str(tmp_path / "model.zip"))
    rng = np.random.default_rng(0)
    for _ in range(40):
        board = random_board(Geometry(5, 6, 4), rng)
        if board.is_terminal():
            continue
        expected, _ = model.predict(
            board.to_planes(), deterministic=True, action_masks=board.legal_mask()
        )
        assert policy.act(board, rng) == int(expected)
    corrupt = tmp_path / "corrupt.zip"
    corrupt.write_bytes(b"PK\x03\x04 nonsense")
    with (
        pytest.warns(UserWarning, match="unpickles"),
        pytest.raises(ValueError, match="not a loadable"),
    ):
        make_policy(str(corrupt))


def test_input_planes_mark_the_landing_cells() -> None:
    geometry = Geometry(5, 6, 4)
    rng = np.random.default_rng(4)
    for _ in range(30):
        board = random_board(geometry, rng)
        planes = board.to_planes()[None].astype(np.float32)
        out = forward_layers([{"op": "input_planes"}], {}, planes)
        assert out.shape == (1, 4, 5, 6)
        np.testing.assert_array_equal(out[0, :2], planes[0])
        assert (out[0, 2] == 1).all()
        expected = np.zeros((5, 6), dtype=bool)
        for column in range(6):
            if board.can_play(column):
                expected |= geometry.unpack(board.move_bit(column))
        np.testing.assert_array_equal(out[0, 3], expected)


@pytest.mark.parametrize("when", ["load", "move"])
def test_an_agent_file_that_calls_sys_exit_raises_an_error_naming_it(
    tmp_path: Path, when: str
) -> None:
    from connectx_gym.policy import AgentExitError

    agent = tmp_path / "quitter.py"
    body = "    sys.exit(3)\n" if when == "move" else "    return 0\nsys.exit(3)\n"
    agent.write_text("import sys\n\ndef agent(obs, config):\n" + body)

    def first_move() -> None:  # the env is made (the file loaded), then the agent moves first
        gym.make("ConnectX-v0", opponent=str(agent), agent_mark=2).reset(seed=0)

    with pytest.raises(AgentExitError, match=r"quitter\.py called sys\.exit\(3\)"):
        first_move()


def test_sys_exit_of_an_agent_is_one_line_in_evaluate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from connectx_gym.cli import main

    agent = tmp_path / "quitter.py"
    agent.write_text("import sys\n\ndef agent(obs, config):\n    sys.exit(3)\n")
    code = main(["evaluate", "random", str(agent), "--games", "2"])
    error = capsys.readouterr().err.strip()
    assert code != 0
    assert len(error.splitlines()) == 1
    assert "quitter.py called sys.exit(3)" in error
