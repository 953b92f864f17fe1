"""``connectx serve`` as a process: Ctrl-C stops it at once, its agents' processes die with it
(SIGKILL included), and a chunked body over the limit gets 413 from the real server."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("flask", reason='the serve extra is not installed: pip install ".[serve]"')
if not Path("/proc/self/stat").exists():
    pytest.skip("needs Linux /proc to follow child processes", allow_module_level=True)

LOOPING_AGENT = """
def agent(obs, config):
    while True:
        pass
"""
REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(condition, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def post(port: int, path: str, body: dict, timeout: float = 60) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(
            "POST", path, json.dumps(body), headers={"Content-Type": "application/json"}
        )
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, int]]:
    models = tmp_path / "models"
    models.mkdir()
    (models / "loop.py").write_text(LOOPING_AGENT)
    port = free_port()
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    process = subprocess.Popen(
        [sys.executable, "-m", "connectx_gym.cli", "serve", "--port", str(port), "--models",
         str(models), "--opponent", "random", "--move-timeout", "120"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in a terminal
    )  # fmt: skip
    assert process.stdout is not None
    for line in process.stdout:  # the warm-up first, then the address
        if "http://" in line:
            break
    else:
        pytest.fail(f"the server did not start: {process.stderr.read() if process.stderr else ''}")
    assert wait_until(lambda: _listening(port), 30)
    yield process, port
    if process.poll() is None:
        process.kill()
    process.wait()


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def hold_the_worker(port: int) -> None:
    """Send a move for the looping agent, in the background (it never gets an answer: the
    server is stopped or killed under it, which can cut the reply anywhere, so a reset, a broken
    status line or a partial body are all expected here)."""

    def send() -> None:
        with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
            post(port, "/api/move", {"board": [0] * 42, "mark": 1, "opponent": "loop.py"})

    threading.Thread(target=send, daemon=True).start()


def agent_process(server_pid: int) -> int:
    found: list[int] = []

    def started() -> bool:
        found[:] = [
            pid
            for pid in children_of(server_pid)
            if b"connectx_gym.serve.child" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        return bool(found)

    assert wait_until(started, 30), "the agent's process did not start"
    return found[0]


@pytest.mark.slow
def test_ctrl_c_stops_a_held_server_at_once(server) -> None:
    process, port = server
    hold_the_worker(port)
    child = agent_process(process.pid)
    time.sleep(0.5)  # the agent is looping, the request waiting
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    process.wait(timeout=10)
    assert time.monotonic() - sent < 3
    assert "Traceback" not in (process.stderr.read() if process.stderr else "")
    assert wait_until(lambda: not alive(child), 5), "the agent's process outlived the server"


@pytest.mark.slow
def test_agent_processes_die_with_a_killed_server(server) -> None:
    process, port = server
    hold_the_worker(port)
    child = agent_process(process.pid)
    process.kill()  # SIGKILL: no clean-up code runs in the server
    process.wait(timeout=10)
    assert wait_until(lambda: not alive(child), 5), "the agent's process outlived the server"


@pytest.mark.slow
def test_a_chunked_body_over_the_limit_gets_413(server) -> None:
    _, port = server

    def chunks() -> Iterator[bytes]:
        yield b'{"board": ['
        for _ in range(300):
            yield b"0, " * 400  # 1200 bytes each: 360 KB in all, no Content-Length
        yield b"0]}"

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(
            "POST",
            "/api/state",
            body=chunks(),
            headers={"Content-Type": "application/json"},
            encode_chunked=True,
        )
        answer = connection.getresponse()
        status, data = answer.status, json.loads(answer.read())
    finally:
        connection.close()
    assert status == 413
    assert "over 256 KiB" in data["error"]
    # A small chunked body is read as usual.
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        body = json.dumps({"board": [0] * 42}).encode()
        connection.request(
            "POST",
            "/api/state",
            body=iter([body[:10], body[10:]]),
            headers={"Content-Type": "application/json"},
            encode_chunked=True,
        )
        answer = connection.getresponse()
        assert answer.status == 200
        assert json.loads(answer.read())["to_move"] == 1
    finally:
        connection.close()
