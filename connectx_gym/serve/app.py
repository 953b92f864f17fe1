"""The Flask app behind ``connectx serve``: the page, and a JSON API usable on its own.

``POST /api/state``, ``/api/move``, ``/api/analyse`` and ``/api/network`` (a network opponent's
move probabilities, :mod:`connectx_gym.serve.network`) take a position as Kaggle shows it::

    {"board": [0, 0, ..., 1, 2], "rows": 6, "columns": 7, "inarow": 4, "mark": 1}

(``board``: ``rows * columns`` cells, row 0 at the top, 0 empty, 1 and 2 the marks; ``mark``: the
player to move, optional except for ``/api/move``) and answer JSON. The position is checked with
the core's own rules (:meth:`Board.from_kaggle`): a bad request gets a 4xx answer with
``{"error": "one line"}``, never a traceback (:mod:`connectx_gym.serve.validation`). Searches
run one at a time on a worker thread (:mod:`connectx_gym.serve.worker`): a request waits at
most ``move_timeout`` seconds, and its search stops then too (a 503 answer); a few wait at most
behind it (a 503 at once beyond); time budgets, depths and board sizes are capped
(:mod:`connectx_gym.serve.policies`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from flask import Flask, jsonify, request
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import HTTPException

from connectx_gym.bitboard import Board
from connectx_gym.deadline import DeadlineExceededError
from connectx_gym.registry import list_policies
from connectx_gym.serve.access import RequestGuard
from connectx_gym.serve.child import AgentError
from connectx_gym.serve.network import NO_VALUE_HEAD, VALUE_NOTE, network_view
from connectx_gym.serve.policies import (
    LIMITS,
    PolicyCache,
    SpecError,
    checked_spec,
    list_models,
    opponent_choices,
    runs_in_child,
)
from connectx_gym.serve.validation import (
    MAX_PAGE_CELLS,
    MAX_PAGE_SIDE,
    ApiError,
    read_json,
    read_position,
    read_seed,
    read_time_budget,
)
from connectx_gym.serve.worker import MAX_MOVE_TIMEOUT, SearchWorker, WorkerBusyError

__all__ = [
    "MAX_PAGE_CELLS",
    "MAX_PAGE_SIDE",
    "ApiError",
    "close_app",
    "create_app",
    "patient",
    "read_position",
    "winning_line",
]

#: Scores of the ``alphabeta`` fallback at or beyond ``WIN - cells`` are proven wins.
ALPHABETA_WIN = 1e6
STATIC = Path(__file__).with_name("static")


def winning_line(board: Board) -> list[list[int]]:
    """``[row, column]`` cells (row 0 at the top) of the lines that ended the game, if any."""
    g = board.geometry
    stones = board.current ^ board.mask  # the player who just moved
    cells = 0
    for step in (1, g.height - 1, g.height, g.height + 1):
        starts = stones
        for k in range(1, g.inarow):
            starts &= stones >> (k * step) if k * step < g.size else 0
        for k in range(g.inarow):
            cells |= starts << (k * step)
    grid = g.unpack(cells & board.mask)
    return [[int(r), int(c)] for r, c in zip(*np.nonzero(grid), strict=True)]


def describe(board: Board) -> dict[str, Any]:
    """What the page shows of a position: whose turn, legal columns, the winner and its line."""
    winner = board.winner()
    return {
        "board": board.to_kaggle(),
        "to_move": board.mark,
        "moves": board.moves,
        "legal": [] if board.is_terminal() else board.legal_moves(),
        "terminal": board.is_terminal(),
        "winner": 0 if winner is None else int(winner),
        "line": winning_line(board) if winner else [],
    }


def _plain(value: Any) -> Any:
    """``value`` as JSON: numpy numbers as Python numbers, NaN and infinities as null."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


def fallback_scores(
    board: Board, scores: np.ndarray
) -> tuple[list[int | None], list[float | None]]:
    """The ``alphabeta`` fallback's scores as ``(exact, estimates)`` per column.

    A win or loss alpha-beta proves (``1e6 - s`` for a win made with ``s`` stones on the board)
    is exact: on the solver's scale it is ``(cells + 2 - s) // 2``. Other columns get ``None`` in
    ``exact`` and their heuristic value (comparable only with each other) in ``estimates``.
    """
    cells = board.geometry.cells
    exact: list[int | None] = []
    estimates: list[float | None] = []
    for value in scores.tolist():
        if math.isnan(value):
            exact.append(None)
            estimates.append(None)
        elif abs(value) >= ALPHABETA_WIN - cells:
            stones = round(ALPHABETA_WIN - abs(value))
            exact.append(int(math.copysign((cells + 2 - stones) // 2, value)))
            estimates.append(None)
        else:
            exact.append(None)
            estimates.append(round(float(value), 3))
    return exact, estimates


def create_app(
    opponent: str = "minimax:depth=3",
    models: str | Path | None = None,
    move_timeout: float = 15.0,
    analysis_budget: float = 1.0,
    max_waiting: int = 4,
    host: str | None = None,
    allow_origins: Iterable[str] = (),
) -> Flask:
    """The app: the page at ``/`` and the JSON API under ``/api``.

    ``opponent`` is the page's default opponent; ``models`` the only directory saved agents are
    loaded from (None: none are); ``move_timeout`` bounds each request's wait for a search, and
    the search itself (at most :data:`~connectx_gym.serve.worker.MAX_MOVE_TIMEOUT`);
    ``analysis_budget`` is the solver's default time budget in seconds; ``max_waiting`` searches
    may wait behind the running one. Requests must address this machine or ``host`` (the
    address it listens on) and come from its own page or a page of ``allow_origins``
    (:mod:`connectx_gym.serve.access`). :func:`close_app` ends the agents' child processes.
    """
    if (
        isinstance(move_timeout, bool)
        or not isinstance(move_timeout, int | float)
        or not 0 < move_timeout <= MAX_MOVE_TIMEOUT
    ):
        raise ValueError(
            f"move_timeout must be a number of seconds in (0, {MAX_MOVE_TIMEOUT:g}], "
            f"got {move_timeout!r}"
        )
    guard = RequestGuard.serving(host, allow_origins)
    models_dir = None if models is None else Path(models).resolve()
    checked_spec(opponent, models_dir)  # refuse a bad default at start-up, not on first use
    app = Flask(__name__, static_folder=str(STATIC), static_url_path="/static")
    if isinstance(app.json, DefaultJSONProvider):  # Flask's own: answers keep their order
        app.json.sort_keys = False
    worker = SearchWorker(max_waiting)
    cache = PolicyCache(models=models_dir)
    timeouts = {"move": move_timeout}  # :func:`patient` lengthens it for a while
    app.extensions["connectx"] = {"worker": worker, "cache": cache, "timeouts": timeouts}

    def run_bounded(job: Any) -> Any:
        timeout = timeouts["move"]
        try:
            return worker.run(job, timeout)
        except WorkerBusyError as error:
            raise ApiError(f"the server is busy: {error}", 503) from None
        except (TimeoutError, DeadlineExceededError):
            raise ApiError(
                f"no answer within {timeout:g} s; try a smaller depth or time budget", 503
            ) from None

    def checked(spec: Any, board: Board) -> tuple[str, float]:
        try:
            return checked_spec(spec, models_dir, board.geometry)
        except SpecError as error:
            raise ApiError(str(error), error.status) from None

    def make(spec: Any, board: Board) -> Any:
        name, noise = checked(spec, board)
        return lambda: cache.get(name, noise, board.geometry)

    def body() -> Any:
        return read_json(request.stream, request.content_length)

    def run_search(job: Any) -> Any:
        return run_with_errors(lambda: run_bounded(job), models_dir)

    @app.before_request
    def check_access() -> None:
        has_body = request.method not in ("GET", "HEAD", "OPTIONS")
        content_type = request.mimetype if has_body else None
        guard.check(request.scheme, request.host, request.headers.get("Origin"), content_type)

    @app.errorhandler(ApiError)
    def api_error(error: ApiError) -> Any:
        return jsonify(error=str(error)), error.status

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Any:
        return jsonify(error=f"{error.name}: {error.description}"), error.code

    @app.get("/")
    def page() -> Any:
        return app.send_static_file("index.html")

    @app.get("/api/policies")
    def policies() -> Any:
        return jsonify(
            default=opponent,
            choices=opponent_choices(models_dir),
            policies=[name for name in list_policies() if name != "file"],
            models=list_models(models_dir),
            limits={**LIMITS, "side": MAX_PAGE_SIDE, "cells": MAX_PAGE_CELLS},
            analysis_budget=analysis_budget,
        )

    @app.post("/api/state")
    def state() -> Any:
        return jsonify(describe(read_position(body())))

    @app.post("/api/move")
    def move() -> Any:
        data = body()
        board = read_position(data, need_mark=True)
        if board.is_terminal():
            raise ApiError("the game is over: no move to make")
        spec = data.get("opponent", opponent)
        build = make(spec, board)
        seed = read_seed(data)

        def job() -> tuple[int, dict[str, Any], float]:
            policy = build()
            start = time.perf_counter()
            column = int(policy.act(board, np.random.default_rng(seed)))
            return column, dict(policy.last_info), time.perf_counter() - start

        column, info, seconds = run_search(job)
        if not board.can_play(column):
            raise ApiError(f"{spec} answered illegal column {column}", 422)
        after = board.play(column)
        return jsonify(
            column=column,
            opponent=spec,
            seconds=round(seconds, 4),
            info=_plain(info),
            state=describe(after),
        )

    @app.post("/api/network")
    def network() -> Any:
        data = body()
        board = read_position(data)
        if board.is_terminal():
            raise ApiError("the game is over: nothing to analyse")
        spec = data.get("opponent", opponent)
        name, noise = checked(spec, board)
        view, seconds = None, 0.0
        if not runs_in_child(name):  # an agent's code holds no network the server can read

            def job() -> tuple[dict[str, Any] | None, float]:
                start = time.perf_counter()
                policy = cache.get(name, noise, board.geometry)
                return network_view(policy, board), time.perf_counter() - start

            view, seconds = run_search(job)
        if view is None:
            return jsonify(opponent=spec, network=None, note=f"{spec} is not a network")
        return jsonify(
            opponent=spec,
            **view,
            note=VALUE_NOTE if "value" in view else NO_VALUE_HEAD,
            seconds=round(seconds, 4),
            to_move=board.mark,
        )

    @app.post("/api/analyse")
    def analyse() -> Any:
        data = body()
        board = read_position(data)
        if board.is_terminal():
            raise ApiError("the game is over: nothing to analyse")
        budget = read_time_budget(data, analysis_budget, LIMITS["time_budget"])
        build = make(f"solver:time_budget={budget}", board)

        def job() -> tuple[np.ndarray, dict[str, Any], float]:
            solver = build()
            start = time.perf_counter()
            scores = solver.scores(board)
            return scores, dict(solver.last_info), time.perf_counter() - start

        scores, info, seconds = run_search(job)
        proven = bool(info.get("proven"))
        if proven:
            values = [None if math.isnan(v) else int(v) for v in scores.tolist()]
            estimates: list[float | None] = [None] * len(values)
            note = "exact scores from the solver"
        else:
            values, estimates = fallback_scores(board, scores)
            note = (
                f"not proven within {budget:g} s: alpha-beta estimates (only the wins and "
                "losses it proves are exact)"
            )
        ranked = np.nan_to_num(scores, nan=-np.inf)
        best = (
            [int(c) for c in np.flatnonzero(ranked == ranked.max())]
            if board.moves < board.geometry.cells
            else []
        )
        return jsonify(
            scores=values,
            proven=proven,
            estimates=estimates,
            best=best,
            method="solver" if proven else "alphabeta",
            note=note,
            time_budget=budget,
            seconds=round(seconds, 4),
            to_move=board.mark,
        )

    return app


@contextlib.contextmanager
def patient(app: Flask, seconds: float) -> Iterator[None]:
    """Within the block, the app's searches may take up to ``seconds`` (at least its own
    ``move_timeout``): for the warm-up before it listens, which on a fresh install compiles
    numba's kernels (longer than a move may take)."""
    timeouts = app.extensions["connectx"]["timeouts"]
    kept = timeouts["move"]
    timeouts["move"] = max(kept, seconds)
    try:
        yield
    finally:
        timeouts["move"] = kept


def close_app(app: Flask) -> None:
    """Stop the app's search thread after its current job and kill its agents' processes."""
    parts = app.extensions["connectx"]
    parts["worker"].close()
    parts["cache"].close()


def run_with_errors(call: Any, models: Path | None = None) -> Any:
    """Run a search; its errors become one-line JSON answers (400 for bad input, else 5xx) that
    name saved agents relative to ``models``, never by the server's own paths."""

    def line(error: BaseException) -> str:
        text = " ".join(str(error).split())
        return text.replace(f"{models}/", "") if models is not None else text

    try:
        return call()
    except ApiError:
        raise
    except AgentError as error:  # the agent raised, exited or died: its message names it
        raise ApiError(f"the agent failed: {line(error)}", 500) from None
    except (ValueError, TypeError, LookupError) as error:
        raise ApiError(line(error) or type(error).__name__) from None
    except ImportError as error:
        raise ApiError(f"a package is missing: {line(error)}", 501) from None
    except (Exception, SystemExit) as error:  # a bug: one line, not a traceback page
        raise ApiError(f"the search failed: {type(error).__name__}: {line(error)}", 500) from None
