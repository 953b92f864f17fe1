"""``python -m connectx_train.rllib.selfplay``: its flags read the opponent and curriculum specs as
``connectx train`` reads them, and a tiny run on a local Ray instance (one remote env runner)
moves through its curriculum and writes ``final.npz``, which loads as a policy, and the report of
``connectx train`` (``report.md``, ``report.json``, ``learning_curves.png``). Runs in the RLlib
environment (``.ci/rllib_tests``); skipped without ``pip install -e ".[rllib]"``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

rllib = pytest.importorskip(
    "connectx_train.rllib.selfplay",
    reason='RLlib is not installed (pip install -e ".[rllib]")',
    exc_type=ImportError,
)

from connectx_gym import make_policy  # noqa: E402
from connectx_gym.bitboard import Board, Geometry  # noqa: E402
from connectx_train.finish import DIGEST_KEY, weights_digest  # noqa: E402
from connectx_train.state import Curriculum  # noqa: E402
from tests.ray.conftest import train_config  # noqa: E402

SPECS = [
    *["--curriculum", "random", "onestep~0.5@2+minimax:depth=2", "alphabeta:max_depth=4~0.25"],
    *["--review-weight", "0.2", "--selfplay-weight", "0.1", "--selfplay-from-stage", "2"],
    *["--advance-threshold", "0.7", "--advance-window", "50", "--opening-plies", "2"],
]
TINY = [
    *["--timesteps", "768", "--n-envs", "8", "--n-steps", "32", "--batch-size", "64"],
    *["--n-epochs", "1", "--channels", "8", "--blocks", "1", "--features-dim", "16"],
    *["--vf-layers", "16", "--panel", "random", "onestep", "--final-games", "4"],
    *["--eval-every", "512", "--eval-games", "2", "--curriculum", "random", "onestep"],
    *["--advance-threshold", "0", "--advance-window", "4", "--max-minutes", "0"],
]


def rllib_config(argv):
    return rllib.config_from_args(rllib.make_parser().parse_args(argv))


@pytest.mark.parametrize(
    "argv",
    [SPECS, ["--opponent", "minimax:depth=3@3+onestep", "--opponent", "random~0.1"], []],
    ids=["curriculum", "opponent", "defaults"],
)
def test_specs_parse_as_connectx_train_parses_them(argv):
    mine, theirs = rllib_config(argv), train_config(*argv)
    for name in rllib.RLLIB_SETTINGS:
        assert getattr(mine, name) == getattr(theirs, name), name
    assert Curriculum.from_config(mine) == Curriculum.from_config(theirs)
    assert mine.teacher_positions == 0


def test_the_first_stage_is_what_the_envs_play():
    config = rllib_config(SPECS)
    env_config = rllib.build_config(config).env_config
    assert env_config["mixture"] == Curriculum.from_config(config).mixture(0, True)
    assert env_config["mixture"] == [("random", 1.0)]
    assert env_config["opening_plies"] == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--opponent", "onestep@-1"], "weight must be a finite number > 0"),
        (["--curriculum", "random", "+onestep"], "empty opponent"),
        (["--n-envs", "0"], "n_envs must be >= 1"),
        (["--n-envs", "6", "--env-runners", "4"], "does not divide over --env-runners 4"),
    ],
)
def test_bad_settings_are_one_line_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        rllib.main(argv)
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in error
    assert "Traceback" not in capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rllib") / "run"
    assert rllib.main([*TINY, "--out", str(out), "--num-cpus", "2", "--env-runners", "1"]) == 0
    return out


@pytest.mark.slow
def test_tiny_run_writes_the_report_and_weights(tiny_run: Path):
    for name in ("final.npz", "report.md", "report.json", "learning_curves.png", "config.json"):
        assert (tiny_run / name).is_file(), name
    report = json.loads((tiny_run / "report.json").read_text())
    assert report[DIGEST_KEY] == weights_digest(tiny_run / "final.npz")
    assert report["timesteps"] >= 768
    assert [stage["opponents"] for stage in report["curriculum"]] == [["random"], ["onestep"]]
    assert report["final_stage"] == 1
    assert set(report["timing"]["opponents"]) == {"random", "onestep"}
    assert report["panel"]["random"]["games"] == 4
    assert report["panel"]["onestep"]["illegal_a"] == 0
    assert report["perfect_play"]["overall"]["positions"] > 0
    assert next(entry["timestep"] for entry in report["evaluations"]) >= 512
    text = (tiny_run / "report.md").read_text()
    assert "Ray RLlib" in text
    assert "| onestep | " in text
    assert "curriculum reached stage 1: random @ 0 -> onestep @ " in text


@pytest.mark.slow
def test_tiny_run_weights_load_as_a_policy_and_play_legal_moves(tiny_run: Path):
    policy = make_policy(str(tiny_run / "final.npz"))
    geometry = Geometry(6, 7, 4)
    rng = np.random.default_rng(0)
    board = Board.empty(*geometry.key)
    while not board.is_terminal():
        board = board.play(policy.act(board, rng))  # Board.play raises on an illegal column
    assert policy.act(Board.from_moves(geometry, [3] * 6), rng) != 3
