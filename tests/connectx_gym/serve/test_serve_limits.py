"""``connectx serve`` cannot be held: deadlines the searches obey, a bounded queue, agents in child
processes, and 4xx answers for every bad body (Flask's test client)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("flask", reason='the serve extra is not installed: pip install ".[serve]"')

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.registry import make_policy
from connectx_gym.serve import create_app
from connectx_gym.serve.app import close_app, patient
from connectx_gym.serve.validation import nesting_depth
from connectx_gym.serve.worker import SearchWorker, _Job

# Busy for 8 s, then legal: long enough to hold the old search thread, short enough not to hang.
BUSY_AGENT = """
import time

def agent(obs, config):
    end = time.monotonic() + 8
    while time.monotonic() < end:
        pass
    return [c for c in range(config.columns) if obs.board[c] == 0][0]
"""
EXIT_AGENT = """
import sys

def agent(obs, config):
    sys.exit(3)
"""
EXIT_AT_IMPORT = """
import sys

sys.exit("not today")

def agent(obs, config):
    return 0
"""
HARD_EXIT_AGENT = """
import os

def agent(obs, config):
    os._exit(7)
"""
FIRST_LEGAL_AGENT = """
def agent(obs, config):
    print("agents may print")  # to the server's stderr, not into the answers
    return [c for c in range(config.columns) if obs.board[c] == 0][0]
"""
# A stand-in for kaggle-environments: its negamax is slow in plain Python (here: busy for 8 s).
FAKE_KAGGLE = """
import time

def _random(obs, config):
    return [c for c in range(config.columns) if obs.board[c] == 0][0]

def _negamax(obs, config):
    end = time.monotonic() + 8
    while time.monotonic() < end:
        pass
    return _random(obs, config)

agents = {"random": _random, "negamax": _negamax}
"""


AGENT_TIMEOUT = 6.0


def position(moves: list[int], rows: int = 6, columns: int = 7, inarow: int = 4) -> dict:
    board = Board.from_moves(Geometry(rows, columns, inarow), moves)
    return {"board": board.to_kaggle(), "rows": rows, "columns": columns, "inarow": inarow}


def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    """Whether ``condition()`` holds within ``seconds`` (polled every 50 ms)."""
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def agent_children(folder: Path) -> list[int]:
    """Pids of this process's living agent processes for agents in ``folder`` (Linux /proc)."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs Linux /proc to list child processes")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        state = stat.rsplit(")", 1)[1].split()[0]
        ours = b"connectx_gym.serve.child" in command and str(folder).encode() in command
        if parent == os.getpid() and ours and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.fixture
def models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    for name, text in [
        ("busy.py", BUSY_AGENT),
        ("exit.py", EXIT_AGENT),
        ("exit_at_import.py", EXIT_AT_IMPORT),
        ("hard_exit.py", HARD_EXIT_AGENT),
        ("first.py", FIRST_LEGAL_AGENT),
    ]:
        (folder / name).write_text(text)
    return folder


@pytest.fixture
def app(models: Path):
    # Load the kernels before the tests' clocks: the first solver and alphabeta of a process
    # compile or load them.
    make_policy("solver:time_budget=0.2").scores(Board.from_moves(Geometry(), [3]))
    make_policy("mcts:net=ppo,simulations=2")  # compiles or loads its kernels
    app = create_app("random", models=models, move_timeout=1.5, max_waiting=2)
    client = app.test_client()
    for _ in range(5):  # a request may time out while the policy is made (and kept)
        warm = client.post("/api/analyse", json={**position([3]), "time_budget": 0.2})
        if warm.status_code == 200:
            break
    assert warm.status_code == 200, warm.get_json()
    yield app
    close_app(app)


@pytest.fixture
def agent_app(models: Path):
    """An app whose deadline leaves time to start an agent's process (a second or two)."""
    app = create_app("random", models=models, move_timeout=AGENT_TIMEOUT)
    yield app
    close_app(app)


def timed_post(client, path: str, body: dict) -> tuple[int, dict, float]:
    start = time.perf_counter()
    answer = client.post(path, json=body)
    return answer.status_code, answer.get_json(), time.perf_counter() - start


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/analyse", {"time_budget": 5}),  # the solver, then its alpha-beta fallback
        ("/api/move", {"mark": 2, "opponent": "alphabeta:time_budget=5"}),
        # The most simulations allowed: minutes with the network, or with the most rollouts.
        ("/api/move", {"mark": 2, "opponent": "mcts:net=ppo,simulations=100000"}),
        ("/api/move", {"mark": 2, "opponent": "mcts:simulations=100000,rollouts=64"}),
    ],
)
@pytest.mark.slow
def test_a_search_answered_503_stops_at_once(app, path: str, body: dict) -> None:
    client = app.test_client()
    status, data, seconds = timed_post(client, path, {**position([3]), **body})
    # Alpha-beta and MCTS may answer in time with what they searched before the deadline.
    assert status == 503 or (path == "/api/move" and status == 200), data
    if status == 200 and data["opponent"].startswith("mcts"):
        assert data["info"]["stopped"] == "time", data["info"]
    assert status == 200 or "no answer within 1.5 s" in data["error"]
    assert seconds < 2.5
    # The search stopped with its request: the next one is answered at once, not after 5 s.
    status, data, seconds = timed_post(
        client, "/api/move", {**position([3]), "mark": 2, "opponent": "random"}
    )
    assert status == 200, data
    assert seconds < 0.5


@pytest.mark.slow
def test_a_patient_block_lets_searches_run_past_the_move_timeout(app) -> None:
    # The command's warm-up (a fresh install compiles numba's kernels there) waits longer than a
    # request may; afterwards the app's own timeout holds again.
    client = app.test_client()
    long_analysis = {**position([3]), "time_budget": 5}  # the app waits 1.5 s (as above)
    with patient(app, 10.0):
        status, data, seconds = timed_post(client, "/api/analyse", long_analysis)
    assert status == 200, data
    assert seconds > 1.5
    status, data, _ = timed_post(client, "/api/analyse", long_analysis)
    assert status == 503, data
    assert "no answer within 1.5 s" in data["error"]


def test_a_job_reached_after_its_deadline_answers_a_timeout_not_none() -> None:
    # A request computes its job's deadline, then waits as long again from a moment later: the
    # search thread can reach the job between the two. It answered None then, and the endpoint
    # failed with a traceback (500) instead of "no answer within ...".
    worker = SearchWorker()
    started = threading.Event()
    release = threading.Event()

    def occupy() -> None:
        started.set()
        release.wait(5)

    first = threading.Thread(target=worker.run, args=(occupy, 5))
    first.start()
    started.wait(5)
    late = _Job(lambda: "answer", deadline=time.perf_counter() - 1)
    with worker._changed:
        worker._waiting.append(late)
    release.set()
    first.join(5)
    assert late.done.wait(5)
    assert isinstance(late.error, TimeoutError)
    assert late.result is None
    worker.close()


@pytest.mark.slow
def test_the_queue_is_bounded_and_abandoned_searches_never_start(app) -> None:
    client = app.test_client()
    answers: list[tuple[int, dict, float]] = []
    # all eight ask at once: started one by one on a loaded machine, a late one could arrive
    # after the first search's 1.5 s deadline had freed its place
    together = threading.Barrier(8)

    def analyse() -> None:
        body, own_client = {**position([3]), "time_budget": 5}, app.test_client()
        together.wait()
        answers.append(timed_post(own_client, "/api/analyse", body))

    threads = [threading.Thread(target=analyse) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    busy = [a for a in answers if a[0] == 503 and "busy" in a[1]["error"]]
    assert len(busy) >= 8 - 1 - 2  # one runs, two wait, the rest are refused at once
    # Refused without waiting for the 1.5 s deadline (the running search's compiled kernels
    # release the GIL; a loaded machine may still delay a refusal by a few tenths of a second).
    assert all(seconds < 1.2 for _, _, seconds in busy)
    assert all(status == 503 for status, _, _ in answers)  # 5 s each, 1.5 s allowed
    status, data, seconds = timed_post(
        client, "/api/move", {**position([3]), "mark": 2, "opponent": "random"}
    )
    assert status == 200, data
    assert seconds < 0.5  # no abandoned analysis ran after the burst


@pytest.mark.slow
def test_a_looping_agent_file_is_killed_at_the_deadline(agent_app, models: Path) -> None:
    client = agent_app.test_client()
    for _ in range(2):  # and again: a new child each time, the server is never held
        status, data, seconds = timed_post(
            client, "/api/move", {**position([]), "mark": 1, "opponent": "busy.py"}
        )
        assert status == 503, data
        assert seconds < AGENT_TIMEOUT + 1
        # killed, not left computing: the search thread kills it at the same deadline as the
        # 503, and under load a moment after it
        assert wait_for(lambda: agent_children(models) == [], 10), agent_children(models)
    status, data, _ = timed_post(
        client, "/api/move", {**position([]), "mark": 1, "opponent": "first.py"}
    )
    assert status == 200, data
    assert data["column"] == 0


@pytest.mark.slow
def test_kaggle_agents_run_in_a_child_killed_at_the_deadline(
    agent_app, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "fake" / "kaggle_environments" / "envs" / "connectx"
    package.mkdir(parents=True)
    for folder in (package.parents[1], package.parent, package):
        (folder / "__init__.py").write_text("")
    (package / "connectx.py").write_text(FAKE_KAGGLE)
    # The child processes import it; this process never does.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "fake"), *sys.path]))
    client = agent_app.test_client()
    status, data, seconds = timed_post(
        client, "/api/move", {**position([]), "mark": 1, "opponent": "kaggle:negamax"}
    )
    assert status == 503, data
    assert seconds < AGENT_TIMEOUT + 1
    fake = str(tmp_path / "fake")  # the real package may have been imported by other tests
    assert not any(fake in str(getattr(m, "__file__", None)) for m in list(sys.modules.values()))
    status, data, _ = timed_post(
        client, "/api/move", {**position([]), "mark": 1, "opponent": "kaggle:random"}
    )
    assert status == 200, data
    assert data["column"] == 0


def test_kaggle_negamax_is_capped_by_the_board_size(app) -> None:
    client = app.test_client()
    large = {**position([], rows=16, columns=24), "mark": 1, "opponent": "kaggle:negamax"}
    status, data, _ = timed_post(client, "/api/move", large)
    assert status == 400
    assert "kaggle:negamax is too slow on a 16x24 board" in data["error"]
    nested = {**position([]), "mark": 1, "opponent": "solver:fallback='kaggle:negamax'"}
    assert client.post("/api/move", json=nested).status_code == 400


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ("exit.py", "exit.py called sys.exit(3)"),
        ("exit_at_import.py", "exit_at_import.py called sys.exit('not today')"),
        ("hard_exit.py", "hard_exit.py ended its process (exit code 7)"),
    ],
)
@pytest.mark.slow
def test_an_agent_that_exits_gets_a_json_error_naming_the_file(agent_app, agent, message) -> None:
    client = agent_app.test_client()
    for _ in range(2):  # the child is started again for the next request
        status, data, _ = timed_post(
            client, "/api/move", {**position([]), "mark": 1, "opponent": agent}
        )
        assert status == 500
        assert message in data["error"]
    status, data, _ = timed_post(
        client, "/api/move", {**position([]), "mark": 1, "opponent": "first.py"}
    )
    assert status == 200, data


def test_agent_processes_end_with_the_app(agent_app, models: Path) -> None:
    client = agent_app.test_client()
    for _ in range(2):
        answer = client.post("/api/move", json={**position([]), "mark": 1, "opponent": "first.py"})
        assert answer.status_code == 200, answer.get_json()
    assert len(agent_children(models)) == 1  # one process, kept between requests
    close_app(agent_app)
    assert agent_children(models) == []


@pytest.mark.parametrize(
    ("argv_agent", "message"),
    [("exit.py", "exit.py called sys.exit(3)"), ("hard_exit.py", "exit code 7")],
)
def test_serve_refuses_an_opponent_that_exits_in_one_line(
    models: Path, capsys: pytest.CaptureFixture[str], argv_agent: str, message: str
) -> None:
    from connectx_gym.cli import main

    code = main(["serve", "--models", str(models), "--opponent", argv_agent])
    assert code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1  # one line; the progress lines before it are logged to stderr too
    assert message in errors[0]
    assert "Traceback" not in err


DEEP = "[" * 20_000 + "]" * 20_000


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"board": [0] * 41 + [10**30]}, "board cells must be 0, 1 or 2"),
        ({"board": [0] * 41 + [-(10**30)]}, "board cells must be 0, 1 or 2"),
        ({"board": [0] * 42, "mark": 10**30}, "mark must be 1 or 2"),
        ({"board": [0] * 42, "rows": 10**30}, "rows must be between 1 and 24"),
        ({"board": [0] * 42, "mark": 1, "seed": 10**30}, "seed must be a whole number"),
        ({"board": [0] * 42, "mark": 1, "seed": -1}, "seed must be a whole number"),
        ({"board": [0] * 42, "rows": "x" * 100_000}, "rows must be a whole number"),
    ],
)
@pytest.mark.parametrize("endpoint", ["/api/state", "/api/move", "/api/analyse"])
def test_out_of_range_numbers_get_a_400(app, endpoint: str, body: dict, message: str) -> None:
    answer = app.test_client().post(endpoint, json=body)
    if endpoint != "/api/move" and "seed" in body:
        return  # only moves take a seed
    assert answer.status_code == 400, answer.get_json()
    error = answer.get_json()["error"]
    assert message in error
    assert len(error) < 300  # a one-line message, not the value echoed


@pytest.mark.slow
def test_a_huge_time_budget_is_capped_not_an_overflow(agent_app) -> None:
    body = f'{{"board": {[0] * 42}, "time_budget": 1{"0" * 400}}}'
    answer = agent_app.test_client().post(
        "/api/analyse", data=body, content_type="application/json"
    )
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json()["time_budget"] == 5.0


@pytest.mark.parametrize(
    "text",
    [
        DEEP,
        '{"board": ' + DEEP + "}",
        '{"board": [0], "rows": ' + "[" * 17 + "]" * 17 + "}",
        "[" * 20_000,  # not even closed
    ],
)
@pytest.mark.parametrize("endpoint", ["/api/state", "/api/move", "/api/analyse"])
def test_deep_nesting_gets_a_400(app, endpoint: str, text: str) -> None:
    answer = app.test_client().post(endpoint, data=text, content_type="application/json")
    assert answer.status_code == 400
    assert "nests deeper than 16 levels" in answer.get_json()["error"]


def test_nesting_depth_ignores_brackets_in_strings() -> None:
    assert nesting_depth(b'{"a": "[[[[", "b": [1, [2]]}') == 3
    assert nesting_depth(b'["\\"[[[", ["]]]"]]') == 2
    assert nesting_depth(b"42") == 0


def test_a_large_body_with_a_length_gets_413(app) -> None:
    body = b'{"board": [' + b"0, " * 100_000 + b"0]}"
    answer = app.test_client().post("/api/state", data=body, content_type="application/json")
    assert answer.status_code == 413
    assert "over 256 KiB" in answer.get_json()["error"]


def test_the_policy_cache_is_bounded_whatever_the_boards(agent_app) -> None:
    """One policy per spec and geometry, at most ``size`` of them: their per-geometry tables
    cannot pile up over the boards that requests name."""
    client = agent_app.test_client()
    cache = agent_app.extensions["connectx"]["cache"]
    for columns in range(4, 4 + cache.size + 4):
        body = {**position([], rows=4, columns=columns, inarow=3), "mark": 1, "opponent": "onestep"}
        answer = client.post("/api/move", json=body)
        assert answer.status_code == 200, answer.get_json()
    policies = list(cache._policies.values())
    assert len(policies) == cache.size
    assert all(len(policy._cache._entries) == 1 for policy in policies)  # one geometry each
