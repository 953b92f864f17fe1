"""Agents that run in a child process of their own for ``connectx serve``: killed at deadlines.

``.py`` agent files and kaggle-environments' agents are plain Python: nothing inside them can be
interrupted, and an agent may loop, call ``sys.exit`` or ``os._exit``. :class:`ChildPolicy` runs
one in ``python -m connectx_gym.serve.child SPEC`` and asks it one position at a time (a JSON
line each way); the answer is awaited until the caller's
:func:`~connectx_gym.deadline.search_deadline` at most, and the child is killed when it passes.
A child that died (an agent calling ``os._exit``, a kill) is started again by the next request.

A child dies with the server: it asks Linux to kill it when its parent ends
(``PR_SET_PDEATHSIG``), and everywhere it ends when its request pipe closes or its parent
process changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import numpy as np

import connectx_gym
from connectx_gym.bitboard import Board
from connectx_gym.deadline import DeadlineExceededError, time_left
from connectx_gym.policy import AgentExitError, IllegalMoveError, Policy, validate_answer
from connectx_gym.worker_pool import die_with_parent

__all__ = ["AgentError", "ChildPolicy", "main"]

#: Seconds a child may take to start or to answer when the caller sets no deadline.
DEFAULT_WAIT = 60.0


class AgentError(RuntimeError):
    """The agent failed: raised, exited or ended its process (a one-line message naming it)."""


class ChildPolicy(Policy):
    """The policy of ``spec`` played by a child process (``label`` names it in messages)."""

    def __init__(self, spec: str, label: str | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.name = label or spec
        self._process: subprocess.Popen[bytes] | None = None
        self._answers: queue.Queue[dict[str, Any] | None] = queue.Queue()

    # -- the parent's side ------------------------------------------------------------------------
    def act(self, board: Board, rng: np.random.Generator) -> int:
        if self._process is None or self._process.poll() is not None:
            self._start()
        request = {
            "board": board.to_kaggle(),
            "rows": board.geometry.rows,
            "columns": board.geometry.columns,
            "inarow": board.geometry.inarow,
            "mark": board.mark,
            "seed": int(rng.integers(2**63)),
        }
        process = self._process
        assert process is not None
        assert process.stdin is not None
        with contextlib.suppress(OSError):  # it died meanwhile: the answer below says so
            process.stdin.write(json.dumps(request).encode() + b"\n")
            process.stdin.flush()
        answer = self._receive()
        self.last_info = dict(answer.get("info") or {})
        return validate_answer(answer.get("column"), board, self.name)

    def _start(self) -> None:
        self.close()
        package_root = str(Path(connectx_gym.__file__).resolve().parents[1])
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, path]))}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "connectx_gym.serve.child", self.spec, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self._answers = queue.Queue()
        threading.Thread(
            target=_read_lines, args=(self._process.stdout, self._answers), daemon=True
        ).start()
        self._receive()  # {"ready": true}, or the error of loading the agent

    def _receive(self) -> dict[str, Any]:
        left = time_left()
        try:
            answer = self._answers.get(timeout=DEFAULT_WAIT if left is None else max(left, 0))
        except queue.Empty:
            self.close()
            raise DeadlineExceededError(f"{self.name} gave no answer in time (stopped)") from None
        if answer is None:
            code = self.close()
            raise AgentError(f"{self.name} ended its process (exit code {code}) without answering")
        if "error" in answer:
            if answer.get("fatal"):
                self.close()
            if answer.get("missing"):  # e.g. kaggle-environments is not installed
                raise ImportError(answer["error"])
            if answer.get("illegal"):
                raise IllegalMoveError(f"{self.name}: {answer['error']}")
            raise AgentError(f"{self.name}: {answer['error']}")
        return answer

    def close(self) -> int | None:
        """Kill the child (if any); its exit code."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.kill()
        code = process.wait()
        if process.stdin is not None:  # stdout is closed by its reader at the end of the stream
            with contextlib.suppress(OSError):
                process.stdin.close()
        return code

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def __repr__(self) -> str:
        return f"ChildPolicy({self.spec!r})"


def _read_lines(stream: IO[bytes], answers: queue.Queue[dict[str, Any] | None]) -> None:
    try:
        with stream:
            for line in stream:
                with contextlib.suppress(ValueError):  # not one of ours
                    answers.put(json.loads(line))
    except OSError:
        pass
    finally:
        answers.put(None)  # the child ended


# -- the child's side ---------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """What ``json`` cannot write itself: numpy values as lists and numbers, the rest as text."""
    return value.tolist() if isinstance(value, np.ndarray | np.generic) else str(value)


def _one_line(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"the agent called sys.exit({error.code!r})"
    if isinstance(error, AgentExitError):  # the loader's own line: it names the file
        return " ".join(str(error).split())[:500]
    return f"{type(error).__name__}: {' '.join(str(error).split())}"[:500]


def main(argv: list[str]) -> int:
    """The child: load ``argv[0]``'s policy, then answer positions read from stdin."""
    spec, parent = argv[0], int(argv[1])
    # killed with the server however it ends; Ctrl-C is the server's (it ends this child)
    die_with_parent(parent)
    # The protocol keeps the original stdin and stdout; the agent's prints go to stderr.
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)

    def send(message: dict[str, Any]) -> None:
        answers.write(json.dumps(message, default=_plain).encode() + b"\n")
        answers.flush()

    from connectx_gym.policy import Struct
    from connectx_gym.registry import make_policy

    try:
        policy = make_policy(spec)
    except ImportError as error:
        send({"error": str(error), "fatal": True, "missing": True})
        return 1
    except BaseException as error:  # SystemExit from the file's code too
        send({"error": _one_line(error), "fatal": True})
        return 1
    send({"ready": True})
    for line in requests:
        try:
            request = json.loads(line)
            config = Struct(
                rows=request["rows"], columns=request["columns"], inarow=request["inarow"]
            )
            board = Board.from_kaggle(request["board"], config, request["mark"])
            column = policy.act(board, np.random.default_rng(request["seed"]))
        except IllegalMoveError as error:
            send({"error": str(error), "illegal": True})
            continue
        except BaseException as error:  # an agent's sys.exit is answered too
            exited = isinstance(error, SystemExit | AgentExitError)
            send({"error": _one_line(error), "fatal": exited})
            if exited or isinstance(error, KeyboardInterrupt):
                return 1
            continue
        send({"column": int(column), "info": policy.last_info})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
