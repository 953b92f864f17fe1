"""The page for RL users: opponents offered from a list (networks first), and what a network
opponent thinks of a position (``POST /api/network``) beside the solver's scores."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flask", reason='the serve extra is not installed: pip install ".[serve]"')

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.files import SHIPPED_WEIGHTS, save_weights
from connectx_gym.registry import make_policy
from connectx_gym.serve import create_app
from connectx_gym.serve.app import close_app
from connectx_gym.serve.network import NO_VALUE_HEAD, VALUE_NOTE
from connectx_gym.serve.policies import STRONGEST_SEARCH
from tests.baselines.test_mcts_value import square_network

#: the networks the page offers first: the shipped ones, newest first, then a search led by each
SHIPPED_CHOICES = [
    "ppo",
    "ppo-v3",
    "ppo-v2",
    "ppo-v1",
    "mcts:net=ppo",
    "mcts:net=ppo-v3",
    "mcts:net=ppo-v2",
    "mcts:net=ppo-v1",
    "mcts:net=ppo,solver_nodes=20000",
]

AGENT = """
def agent(obs, config):
    return [c for c in range(config.columns) if obs.board[c] == 0][0]
"""


def position(moves: list[int], rows: int = 6, columns: int = 7, inarow: int = 4) -> dict:
    board = Board.from_moves(Geometry(rows, columns, inarow), moves)
    return {"board": board.to_kaggle(), "rows": rows, "columns": columns, "inarow": inarow}


@pytest.fixture
def models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    (folder / "nets").mkdir(parents=True)
    shutil.copy(SHIPPED_WEIGHTS["ppo-v1"], folder / "nets" / "mine.npz")  # no value head
    (folder / "agent.py").write_text(AGENT)
    save_weights(square_network(Geometry(), 5), folder / "nets" / "valued.npz")
    return folder


@pytest.fixture
def client(models: Path):
    app = create_app("minimax:depth=3", models=models, move_timeout=60.0)  # mcts compiles
    yield app.test_client()
    close_app(app)


def test_the_list_offers_the_networks_first_then_the_policies_with_their_parameters(
    client,
) -> None:
    info = client.get("/api/policies").get_json()
    choices = info["choices"]
    specs = [choice["spec"] for choice in choices]
    assert specs[: len(SHIPPED_CHOICES) + 2] == [
        *SHIPPED_CHOICES,
        "nets/mine.npz",
        "nets/valued.npz",
    ]
    assert {choice["kind"] for choice in choices[: len(SHIPPED_CHOICES) + 2]} == {"network"}
    assert specs[-1] == "agent.py"
    assert choices[-1]["kind"] == "agent"
    assert "file" not in specs
    assert "model.zip" not in specs
    assert set(info["policies"]) <= set(specs)  # every registered policy is offered
    by_spec = {choice["spec"]: choice for choice in choices}
    assert by_spec["minimax"]["parameters"] == [
        {"name": "depth", "default": 3, "max": 7},
        {"name": "weights", "default": None},
    ]
    mcts = {p["name"]: p for p in by_spec["mcts"]["parameters"]}
    assert mcts["simulations"]["max"] == 100_000
    assert mcts["time_budget"]["max"] == 5
    assert "net" not in {p["name"] for p in by_spec["mcts:net=ppo"]["parameters"]}  # given
    assert by_spec["kaggle:random"]["kind"] == "agent"
    assert "parameters" not in by_spec["nets/mine.npz"]  # a file: nothing the registry knows


def test_every_choice_is_an_opponent_the_server_plays(client) -> None:
    for choice in client.get("/api/policies").get_json()["choices"]:
        if choice["spec"].startswith("kaggle:") or "mcts" in choice["spec"]:
            continue  # slow or covered below
        answer = client.post(
            "/api/move", json={**position([3]), "mark": 2, "opponent": choice["spec"]}
        )
        assert answer.status_code == 200, (choice, answer.get_json())


def test_the_strongest_search_offered_plays_and_shows_its_networks_view(client) -> None:
    # 16 stones, the solver's threshold: the search's leaves are proven where it reaches
    moves = [4, 5, 0, 5, 3, 3, 4, 2, 6, 0, 1, 2, 3, 2, 0, 0]
    body = {**position(moves), "opponent": STRONGEST_SEARCH}
    answer = client.post("/api/move", json={**body, "mark": 1})
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json()["column"] in Board.from_moves(Geometry(), moves).legal_moves()
    view = client.post("/api/network", json=body).get_json()
    assert view["network"] is not None
    expected = make_policy("ppo").probabilities(Board.from_moves(Geometry(), moves))
    np.testing.assert_allclose(np.array(view["probabilities"], float), expected, atol=1e-4)


@pytest.mark.parametrize("opponent", ["ppo-v1", "nets/mine.npz", "ppo-v1~0.5", "mcts:net=ppo-v1"])
def test_a_network_shows_its_move_probabilities(client, opponent: str) -> None:
    moves = [3, 3, 3, 3, 3, 3, 2]  # the centre column full: no probability there
    answer = client.post("/api/network", json={**position(moves), "opponent": opponent})
    assert answer.status_code == 200, answer.get_json()
    view = answer.get_json()
    probabilities = view["probabilities"]
    assert len(probabilities) == 7
    assert probabilities[3] is None
    assert sum(p for p in probabilities if p is not None) == pytest.approx(1, abs=1e-3)
    ppo = make_policy("ppo-v1")
    board = Board.from_moves(Geometry(), moves)
    expected = ppo.probabilities(board)
    legal = board.legal_mask()
    shown = np.array(probabilities)[legal].astype(float)
    np.testing.assert_allclose(shown, expected[legal], atol=1e-4)
    assert view["top"] == [ppo.act(board, np.random.default_rng(0))]
    assert view["note"] == NO_VALUE_HEAD  # the weights-only format has no value head
    assert "value" not in view
    assert view["to_move"] == 2


@pytest.mark.parametrize(("moves", "value"), [([5], -1.0), ([5, 0], 1.0), ([3], 0.0)])
def test_a_network_with_a_value_head_shows_its_value(client, moves, value) -> None:
    # its value: +1 for the player to move holding the bottom square of column 5, -1 against
    body = {**position(moves), "opponent": "nets/valued.npz"}
    view = client.post("/api/network", json=body).get_json()
    assert view["value"] == value
    assert view["note"] == VALUE_NOTE
    assert view["to_move"] == 1 + len(moves) % 2


@pytest.mark.parametrize("opponent", ["minimax:depth=2", "agent.py", "random~0.1"])
def test_an_opponent_without_a_network_has_no_view(client, opponent: str) -> None:
    answer = client.post("/api/network", json={**position([3]), "opponent": opponent})
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json() == {
        "opponent": opponent,
        "network": None,
        "note": f"{opponent} is not a network",
    }


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({**position([], rows=8, columns=8), "opponent": "ppo"}, 400, "ppo was trained on"),
        ({**position([3, 3, 2, 2, 4, 4, 5]), "opponent": "ppo"}, 400, "game is over"),
        ({**position([3]), "opponent": "nosuch"}, 400, "unknown policy"),
        ({**position([3]), "opponent": "../outside.npz"}, 403, "not inside"),
        ({**position([3]), "opponent": "mcts:net=ppo,simulations=10**9"}, 400, "simulations"),
    ],
)
def test_bad_network_requests_are_one_line_4xx(client, body, status, message) -> None:
    answer = client.post("/api/network", json=body)
    assert answer.status_code == status, answer.get_json()
    error = answer.get_json()["error"]
    assert message in error
    assert "\n" not in error
