"""Reading the requests of ``connectx serve``: every bad body becomes an :class:`ApiError` (4xx).

The body is read up to :data:`MAX_BODY_BYTES` whether or not it says its length (413 beyond),
its nesting is measured before it is parsed (:data:`MAX_NESTING`), and every number is checked
for its type and range before numpy or the core see it: a cell of ``10**30`` or a
20,000-deep array is a 400 answer, never an ``OverflowError`` or ``RecursionError``.
"""

from __future__ import annotations

import json
import reprlib
from typing import IO, Any

import numpy as np
from werkzeug.exceptions import ClientDisconnected

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.policy import Struct

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_NESTING",
    "MAX_PAGE_CELLS",
    "MAX_PAGE_SIDE",
    "MAX_SEED",
    "ApiError",
    "nesting_depth",
    "read_json",
    "read_position",
    "read_seed",
    "read_time_budget",
    "shown",
]

#: The largest board the page and the API take (the env takes larger ones).
MAX_PAGE_SIDE = 24
MAX_PAGE_CELLS = 400
#: The largest request body, with or without a Content-Length.
MAX_BODY_BYTES = 256 * 1024
#: The deepest nesting of arrays and objects a body may have (the API's own bodies have 2).
MAX_NESTING = 16
MAX_SEED = 2**64 - 1
_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxlevel = 40, 40, 6, 4, 2


class ApiError(Exception):
    """A request the API refuses: its HTTP status and a one-line message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def shown(value: Any) -> str:
    """``repr(value)`` cut short enough for a one-line message."""
    return _SHORT.repr(value)


def nesting_depth(data: bytes) -> int:
    """How deep arrays and objects nest in the JSON text ``data`` (brackets inside strings do
    not count), without parsing it: one pass of vectorised steps, linear in ``len(data)``."""
    codes = np.frombuffer(data, dtype=np.uint8)
    if not codes.size:
        return 0
    index = np.arange(codes.size)
    backslash = codes == ord("\\")
    last_plain = np.maximum.accumulate(np.where(backslash, -1, index))  # last non-backslash so far
    escaped = np.zeros(codes.size, dtype=bool)  # after an odd run of backslashes
    escaped[1:] = (index[:-1] - last_plain[:-1]) % 2 == 1
    quotes = (codes == ord('"')) & ~escaped
    outside = np.cumsum(quotes) % 2 == 0  # of strings (an opening quote counts as inside)
    opens = ((codes == ord("[")) | (codes == ord("{"))) & outside
    closes = ((codes == ord("]")) | (codes == ord("}"))) & outside
    steps = opens.astype(np.int32) - closes.astype(np.int32)
    return int(np.cumsum(steps).max(initial=0))


def read_json(stream: IO[bytes], content_length: int | None) -> Any:
    """The JSON value of a request body read from ``stream`` (413 beyond the limit)."""
    too_large = ApiError(f"the request body is over {MAX_BODY_BYTES // 1024} KiB", 413)
    if content_length is not None and content_length > MAX_BODY_BYTES:
        raise too_large
    parts, size = [], 0
    try:
        while part := stream.read(64 * 1024):
            size += len(part)
            if size > MAX_BODY_BYTES:
                raise too_large
            parts.append(part)
    except (OSError, ClientDisconnected):  # the connection timed out or dropped mid-body
        raise ApiError("the request body did not arrive in time", 408) from None
    data = b"".join(parts)
    if nesting_depth(data) > MAX_NESTING:
        raise ApiError(f"the request body nests deeper than {MAX_NESTING} levels")
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise ApiError("the request body must be JSON (Content-Type: application/json)") from None


def _whole(body: dict[str, Any], key: str, default: int) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(f"{key} must be a whole number, got {shown(value)}")
    if not 1 <= value <= MAX_PAGE_SIDE:
        raise ApiError(f"{key} must be between 1 and {MAX_PAGE_SIDE}, got {shown(value)}")
    return value


def read_position(body: Any, need_mark: bool = False) -> Board:
    """The board a request describes, checked by the core's rules; raises :class:`ApiError`."""
    if not isinstance(body, dict):
        raise ApiError("the request body must be a JSON object")
    rows, columns = _whole(body, "rows", 6), _whole(body, "columns", 7)
    inarow = _whole(body, "inarow", 4)
    if rows * columns > MAX_PAGE_CELLS:
        raise ApiError(f"at most {MAX_PAGE_CELLS} cells on this server, got {rows}x{columns}")
    try:
        geometry = Geometry(rows, columns, inarow)
    except ValueError as error:
        raise ApiError(str(error)) from None
    cells = body.get("board")
    if not isinstance(cells, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in cells
    ):
        raise ApiError("board must be a list of whole numbers (0 empty, 1 and 2 the marks)")
    if len(cells) != geometry.cells:
        raise ApiError(f"board must have rows * columns = {geometry.cells} cells, got {len(cells)}")
    wrong = next((v for v in cells if v not in (0, 1, 2)), None)
    if wrong is not None:  # before numpy: 10**30 does not fit its integers
        raise ApiError(f"board cells must be 0, 1 or 2, got {shown(wrong)}")
    mark = body.get("mark")
    if mark is not None and (type(mark) is not int or mark not in (1, 2)):  # 2.0 and True too
        raise ApiError(f"mark must be 1 or 2, got {shown(mark)}")
    config = Struct(rows=rows, columns=columns, inarow=inarow)
    try:
        board = Board.from_kaggle(cells, config, mark)
    except ValueError as error:
        raise ApiError(f"impossible board: {error}") from None
    if mark is None and need_mark:
        raise ApiError("mark (1 or 2, the player to move) is required")
    return board


def read_seed(body: dict[str, Any]) -> int | None:
    """The request's ``seed``: None or a whole number in [0, 2**64)."""
    seed = body.get("seed")
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED
    ):
        raise ApiError(f"seed must be a whole number in [0, 2**64), got {shown(seed)}")
    return seed


def read_time_budget(body: dict[str, Any], default: float, cap: float) -> float:
    """The request's ``time_budget`` in seconds, > 0, capped at ``cap``."""
    budget = body.get("time_budget", default)
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not budget > 0:
        raise ApiError(f"time_budget must be a number of seconds > 0, got {shown(budget)}")
    return float(min(budget, cap))  # compared before float(): 10**400 does not overflow
