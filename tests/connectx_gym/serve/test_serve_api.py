"""The JSON API of ``connectx serve`` through Flask's test client: answers, refusals, limits."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flask", reason='the serve extra is not installed: pip install ".[serve]"')

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.registry import make_policy
from connectx_gym.serve import create_app
from connectx_gym.serve.app import close_app, winning_line

FIRST_LEGAL_AGENT = """
def agent(obs, config):
    return [c for c in range(config.columns) if obs.board[c] == 0][0]
"""
CRASHING_AGENT = """
def agent(obs, config):
    raise RuntimeError("boom")
"""
ILLEGAL_AGENT = """
def agent(obs, config):
    return 0
"""
SLOW_AGENT = """
import time

def agent(obs, config):
    time.sleep(3)
    return 0
"""


def position(moves: list[int], rows: int = 6, columns: int = 7, inarow: int = 4) -> dict:
    board = Board.from_moves(Geometry(rows, columns, inarow), moves)
    return {"board": board.to_kaggle(), "rows": rows, "columns": columns, "inarow": inarow}


@pytest.fixture
def models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "first.py").write_text(FIRST_LEGAL_AGENT)
    (folder / "slow.py").write_text(SLOW_AGENT)
    (folder / "crash.py").write_text(CRASHING_AGENT)
    (folder / "column0.py").write_text(ILLEGAL_AGENT)
    (folder / "model.zip").write_bytes(b"PK")
    (tmp_path / "outside.py").write_text(FIRST_LEGAL_AGENT)
    return folder


@pytest.fixture
def client(models: Path):
    app = create_app("onestep", models=models, move_timeout=60.0)  # the first move compiles
    yield app.test_client()
    close_app(app)  # the agents' child processes end with the test


def test_page_and_policies(client) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert b'id="board"' in page.data
    assert client.get("/static/app.js").status_code == 200
    info = client.get("/api/policies").get_json()
    assert info["default"] == "onestep"
    assert "minimax" in info["policies"]
    assert "file" not in info["policies"]
    assert info["models"] == ["column0.py", "crash.py", "slow.py", "sub/first.py"]  # never the .zip


def test_move_answers_a_legal_column_and_the_next_state(client) -> None:
    answer = client.post("/api/move", json={**position([3, 3, 2, 2]), "mark": 1})
    assert answer.status_code == 200, answer.get_json()
    data = answer.get_json()
    assert data["column"] in (1, 4)  # onestep takes or blocks the open three
    assert data["state"]["to_move"] == 2
    assert data["state"]["moves"] == 5


def test_move_takes_the_win_and_the_state_shows_the_line(client) -> None:
    data = client.post(
        "/api/move", json={**position([0, 6, 1, 6, 2, 5]), "mark": 1, "opponent": "minimax:depth=2"}
    ).get_json()
    assert data["column"] == 3
    state = data["state"]
    assert state["terminal"]
    assert state["winner"] == 1
    assert state["legal"] == []
    assert state["line"] == [[5, 0], [5, 1], [5, 2], [5, 3]]


@pytest.mark.parametrize(
    ("moves", "rows", "columns", "inarow", "line"),
    [
        ([0, 1, 0, 1, 0, 1, 0], 6, 7, 4, [[2, 0], [3, 0], [4, 0], [5, 0]]),
        ([0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3], 6, 7, 4, [[2, 3], [3, 2], [4, 1], [5, 0]]),
        ([3], 1, 5, 1, [[0, 3]]),
        ([0, 0, 1, 1, 2], 2, 3, 3, [[1, 0], [1, 1], [1, 2]]),
    ],
)
def test_winning_line(moves, rows, columns, inarow, line) -> None:
    board = Board.from_moves(Geometry(rows, columns, inarow), moves)
    assert board.winner() == 1
    assert winning_line(board) == line


def test_move_with_a_saved_agent_from_the_models_directory(client) -> None:
    for spec in ("sub/first.py", "file:path='sub/first.py'", "sub/first.py~0"):
        answer = client.post("/api/move", json={**position([]), "mark": 1, "opponent": spec})
        assert answer.status_code == 200, answer.get_json()
        assert answer.get_json()["column"] == 0


def test_a_failing_agent_gets_a_one_line_json_answer(client) -> None:
    full_first_column = position([0, 0, 0, 0, 0, 0])
    answer = client.post(
        "/api/move", json={**full_first_column, "mark": 1, "opponent": "column0.py"}
    )
    assert answer.status_code in (400, 422)
    assert "illegal" in answer.get_json()["error"]
    answer = client.post("/api/move", json={**position([]), "mark": 1, "opponent": "crash.py"})
    assert answer.is_json
    assert "boom" in answer.get_json()["error"]
    assert "Traceback" not in answer.get_json()["error"]


def test_analyse_gives_the_solvers_exact_scores(client) -> None:
    moves = [3, 5, 3, 0, 2, 5, 4, 1, 1, 5, 5, 4, 0, 2]
    answer = client.post("/api/analyse", json={**position(moves), "time_budget": 2})
    data = answer.get_json()
    assert answer.status_code == 200, data
    assert data["proven"] is True
    assert data["method"] == "solver"
    solver = make_policy("solver:time_budget=2")
    expected = solver.scores(Board.from_moves(Geometry(), moves))
    assert solver.last_info["proven"]
    assert data["scores"] == [None if np.isnan(v) else int(v) for v in expected]
    best = max(v for v in data["scores"] if v is not None)
    assert data["best"] == [c for c, v in enumerate(data["scores"]) if v == best]


def test_analyse_falls_back_with_a_note_when_not_proven(client) -> None:
    answer = client.post("/api/analyse", json={**position([3]), "time_budget": 0.05})
    data = answer.get_json()
    assert answer.status_code == 200, data
    assert data["proven"] is False
    assert data["method"] == "alphabeta"
    assert "not proven" in data["note"]
    assert all(v is None for v in data["scores"])  # nothing is decided one move in
    assert all(isinstance(v, float) for v in data["estimates"])
    assert len(data["best"]) >= 1


@pytest.mark.slow
def test_analyse_caps_the_time_budget(client) -> None:
    data = client.post("/api/analyse", json={**position([3]), "time_budget": 1e9}).get_json()
    assert data["time_budget"] == 5.0


def test_an_unproven_immediate_win_is_still_exact(client) -> None:
    data = client.post(
        "/api/analyse", json={**position([0, 6, 1, 6, 2, 5]), "time_budget": 0.02}
    ).get_json()
    assert data["scores"][3] == (42 + 1 - 6) // 2  # the solver's score of winning right now
    assert data["best"] == [3]


BAD_REQUESTS = [
    ("not json", "must be JSON"),
    ([1, 2, 3], "JSON object"),
    ({"board": [0] * 41}, "42 cells"),
    ({"board": "0" * 42}, "list of whole numbers"),
    ({"board": [0] * 41 + [3]}, "0, 1 or 2"),
    ({"board": [0] * 41 + [True]}, "list of whole numbers"),
    ({"board": [1] + [0] * 41}, "floats"),
    ({"board": [0] * 40 + [1, 1]}, "not a legal position"),
    ({"board": [0] * 40 + [2, 0]}, "not a legal position"),
    ({"board": [0] * 42, "mark": 3}, "mark must be 1 or 2"),
    ({"board": [0] * 42, "mark": "1"}, "mark must be 1 or 2"),
    ({"board": [0] * 42, "mark": True}, "mark must be 1 or 2"),
    ({"board": [0] * 42, "mark": 2.0}, "mark must be 1 or 2"),
    ({"board": [0] * 42, "mark": 2}, "not the player to move"),
    ({"board": [0] * 42, "rows": 100}, "between 1 and 24"),
    ({"board": [0] * 42, "rows": "6"}, "whole number"),
    ({"board": [0] * 42, "rows": 6.0}, "whole number"),
    ({"board": [0] * 42, "inarow": 0}, "between 1 and 24"),
    ({"board": [0] * 400, "rows": 20, "columns": 20}, None),  # the largest board is fine
    ({"board": [0] * 441, "rows": 21, "columns": 21}, "at most 400 cells"),
]


@pytest.mark.parametrize("endpoint", ["/api/state", "/api/move", "/api/analyse"])
@pytest.mark.parametrize(("body", "message"), BAD_REQUESTS)
def test_bad_positions_get_a_400_with_a_message(client, endpoint, body, message) -> None:
    if message is None:
        if endpoint == "/api/state":
            assert client.post(endpoint, json=body).status_code == 200
        return
    if isinstance(body, str):
        answer = client.post(endpoint, data=body, content_type="application/json")
    else:
        answer = client.post(endpoint, json=body)
    assert answer.status_code == 400
    assert message in answer.get_json()["error"]


def test_move_needs_the_mark(client) -> None:
    answer = client.post("/api/move", json=position([]))
    assert answer.status_code == 400
    assert "mark" in answer.get_json()["error"]


@pytest.mark.parametrize("endpoint", ["/api/move", "/api/analyse"])
def test_finished_games_are_refused(client, endpoint) -> None:
    body = {**position([0, 1, 0, 1, 0, 1, 0]), "mark": 2}
    answer = client.post(endpoint, json=body)
    assert answer.status_code == 400
    assert "game is over" in answer.get_json()["error"]
    full = position([c for _ in range(2) for c in (0, 1, 2)], rows=2, columns=3, inarow=3)
    answer = client.post(endpoint, json={**full, "mark": 1})
    assert answer.status_code == 400


@pytest.mark.parametrize(
    ("opponent", "status", "message"),
    [
        ("nosuch", 400, "unknown policy"),
        ("minimax:depth=50", 400, "depth must be <= 7"),
        ("alphabeta:time_budget=100", 400, "time_budget must be <= 5"),
        ("solver:table_bits=40", 400, "table_bits must be <= 22"),
        ("solver:table_bits=30", 400, "table_bits must be <= 22"),
        ("mcts:simulations=1000000", 400, "simulations must be <= 100000"),
        ("mcts:time_budget=60", 400, "time_budget must be <= 5"),
        ("mcts:rollouts=1000", 400, "rollouts must be <= 64"),
        ("mcts:net=ppo,batch=100000", 400, "batch must be <= 256"),
        ("mcts:net=ppo,solver_nodes=10**9", 400, "solver_nodes"),
        ("mcts:net=ppo,solver_nodes=2000000", 400, "solver_nodes must be <= 1000000"),
        ("minimax:bogus=1", 400, "does not take"),
        ("minimax:depth='x'", 400, "depth"),
        ("minimax~2", 400, "noise"),
        ("random~x", 400, "noise"),
        (42, 400, "policy spec"),
        ("x" * 400, 400, "longer than"),
        ("../outside.py", 403, "not inside the models directory"),
        ("sub/../../outside.py", 403, "not inside the models directory"),
        ("file:path='../outside.py'", 403, "not inside"),
        ("/etc/passwd.py", 403, "not inside"),
        ("model.zip", 403, "never loaded over HTTP"),
        ("file:path='model.zip'", 403, "never loaded over HTTP"),
        ("solver:fallback='sub/first.py'", 403, "cannot name files"),
        ("solver:fallback='nosuch'", 400, "unknown policy"),
        ("missing.py", 404, "no saved agent"),
        ("notes.txt", 400, "unknown policy"),
        ("a\x00b.npz", 400, "not a file name"),
        ("x" * 256 + ".npz", 400, "not a file name"),
        ("sub/" + "x" * 253 + ".py", 400, "not a file name"),
        ("alphabeta:weights=random", 400, "weights of policy 'alphabeta' takes WindowWeights"),
        ("minimax:weights=1", 400, "weights of policy 'minimax' takes WindowWeights"),
        ("kaggle:random:x=1", 400, "'kaggle:random' does not take parameter(s) x"),
    ],
)
def test_opponent_specs_are_checked(
    client, opponent, status, message, caplog: pytest.LogCaptureFixture
) -> None:
    answer = client.post("/api/move", json={**position([]), "mark": 1, "opponent": opponent})
    assert answer.status_code == status, answer.get_json()
    error = answer.get_json()["error"]
    assert message in error
    assert "\n" not in error
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert agent_processes() == []  # refused before any child process starts


def agent_processes() -> list[int]:
    """Pids of this process's agent processes (Linux /proc; empty elsewhere)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ours = int(fields[1]) == os.getpid() and fields[0] != "Z"
        if ours and b"connectx_gym.serve.child" in command:
            found.append(int(entry.name))
    return found


def test_a_link_is_loaded_as_the_file_it_leads_to(client, models: Path) -> None:
    """``agent.npz`` linking to the ``.zip`` beside it would unpickle it: refused by the file
    it leads to; answers name files as the request did, never the server's own paths."""
    (models / "agent.npz").symlink_to(models / "model.zip")
    (models / "broken.npz").write_bytes(b"PK\x05\x06" + bytes(18))
    for opponent, status, message in [
        ("agent.npz", 403, "'agent.npz' leads to a .zip file, not a .npz one"),
        ("file:path='agent.npz'", 403, "leads to a .zip file"),
        ("broken.npz", 400, "broken.npz is not a connectx-gym weights file"),
    ]:
        answer = client.post("/api/move", json={**position([]), "mark": 1, "opponent": opponent})
        assert answer.status_code == status, answer.get_json()
        assert message in answer.get_json()["error"]
        assert str(models.resolve()) not in answer.get_json()["error"]


def test_full_width_searches_are_capped_by_the_board_width(client) -> None:
    # 6x20 takes 140 bits: the plain-Python search, capped lower than the compiled one.
    wide = {**position([], rows=6, columns=20), "mark": 1}
    answer = client.post("/api/move", json={**wide, "opponent": "minimax:depth=5"})
    assert answer.status_code == 400
    assert (
        "depth 5 on 20 columns is too deep for this server (at most 4 on a 6x20 board)"
        in answer.get_json()["error"]
    )
    assert client.post("/api/move", json={**wide, "opponent": "minimax:depth=4"}).status_code == 200
    compiled = {**position([], rows=3, columns=16), "mark": 1}  # 64 bits: compiled
    answer = client.post("/api/move", json={**compiled, "opponent": "minimax:depth=6"})
    assert "(at most 5 on a 3x16 board)" in answer.get_json()["error"]
    narrow = {**position([]), "mark": 1, "opponent": "minimax:depth=7"}
    assert client.post("/api/move", json=narrow).status_code == 200


def test_saved_agents_are_off_without_a_models_directory() -> None:
    client = create_app("random").test_client()
    answer = client.post("/api/move", json={**position([]), "mark": 1, "opponent": "a.npz"})
    assert answer.status_code == 403
    assert "--models" in answer.get_json()["error"]
    assert client.get("/api/policies").get_json()["models"] == []


def test_symlinks_out_of_the_models_directory_are_refused(client, models: Path) -> None:
    (models / "link.py").symlink_to(models.parent / "outside.py")
    answer = client.post("/api/move", json={**position([]), "mark": 1, "opponent": "link.py"})
    assert answer.status_code == 403
    listed = client.get("/api/policies").get_json()
    assert "link.py" not in json.dumps(listed)  # not offered either


@pytest.mark.slow
def test_a_slow_policy_is_cut_off_and_the_server_recovers(models: Path) -> None:
    client = create_app("random", models=models, move_timeout=1.0).test_client()
    start = time.perf_counter()
    answer = client.post("/api/move", json={**position([]), "mark": 1, "opponent": "slow.py"})
    assert time.perf_counter() - start < 2.5
    assert answer.status_code == 503
    assert "no answer within 1 s" in answer.get_json()["error"]
    time.sleep(2.5)  # the search thread finishes its move; later requests are served again
    answer = client.post("/api/move", json={**position([]), "mark": 1, "opponent": "random"})
    assert answer.status_code == 200


def test_http_errors_are_json(client) -> None:
    assert client.get("/api/nothing").status_code == 404
    answer = client.get("/api/move")
    assert answer.status_code == 405
    assert "error" in answer.get_json()
    answer = client.post("/api/state", data=b"[" * 300_000, content_type="application/json")
    assert answer.status_code == 413


def test_a_bad_default_opponent_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        create_app("nosuch")


def test_serve_command_listens_on_localhost_by_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], models: Path
) -> None:
    from connectx_gym.cli import main

    calls = []
    monkeypatch.setattr(
        "werkzeug.serving.run_simple", lambda host, port, app, **kw: calls.append((host, port))
    )
    assert main(["serve", "--models", str(models), "--opponent", "sub/first.py"]) == 0
    assert calls == [("127.0.0.1", 8000)]
    assert "http://127.0.0.1:8000/" in capsys.readouterr().out


def test_serve_command_guards_the_address_and_the_connections(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from connectx_gym.cli import main
    from connectx_gym.serve.server import READ_TIMEOUT

    served = {}
    monkeypatch.setattr(
        "werkzeug.serving.run_simple", lambda host, port, app, **kw: served.update(app=app, **kw)
    )
    argv = ["serve", "--opponent", "random", "--allow-origin", "http://pc.lan:8000"]
    assert main(argv) == 0
    assert served["request_handler"].timeout == READ_TIMEOUT
    client = served["app"].test_client()
    body = {"board": [0] * 42}
    for host, origin, status in [
        ("127.0.0.1:8000", "http://127.0.0.1:8000", 200),
        ("pc.lan:8000", "http://pc.lan:8000", 200),
        ("127.0.0.1:8000", "http://pc.lan:8000", 200),
        ("evil.example:8000", None, 403),
        ("127.0.0.1:8000", "http://evil.example", 403),
    ]:
        headers = {"Host": host, **({"Origin": origin} if origin else {})}
        answer = client.post("/api/state", json=body, headers=headers)
        assert answer.status_code == status, (host, origin, answer.get_json())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--move-timeout", "1e10"], "argument --move-timeout: must be <= 3600"),
        (["serve", "--move-timeout", "inf"], "argument --move-timeout"),
        (["serve", "--allow-origin", "pc.lan"], "--allow-origin: origin 'pc.lan': expected"),
    ],
)
def test_serve_command_refuses_bad_flags_in_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    from connectx_gym.cli import main

    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "--opponent" not in err
    assert "Traceback" not in err


@pytest.mark.parametrize("timeout", [0, -1, 1e10, float("inf"), float("nan"), True, "15"])
def test_create_app_bounds_the_move_timeout(timeout: object) -> None:
    with pytest.raises(
        ValueError, match=r"move_timeout must be a number of seconds in \(0, 3600\]"
    ):
        create_app("random", move_timeout=timeout)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--models", "/no/such/dir"], "not a directory"),
        (["serve", "--opponent", "nosuch"], "unknown policy"),
        (["serve", "--opponent", "/etc/passwd.py"], "--models"),
    ],
)
def test_serve_command_refuses_bad_input_in_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    from connectx_gym.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert "CommandError" not in err  # the message alone, as for every other one-line error
