"""The position sets a policy is judged on against perfect play
(:mod:`connectx_baselines.perfect_play`).

* :func:`load_positions`: the shipped labelled positions, ``baselines/data/positions.npz`` (see
  the README next to it), each with the exact score of every legal move, in a ``dev`` and a
  ``test`` split;
* :func:`load_pons`: Pascal Pons' benchmark files (6x7 positions with their exact score);
* :func:`positions_from_games`: the positions a policy meets in games.
"""

from __future__ import annotations

import json
import math
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from connectx_baselines.game_positions import canonical_keys
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.policy import Policy
from connectx_gym.registry import make_policy

__all__ = [
    "DEFAULT_POSITIONS",
    "ILLEGAL",
    "MAX_ARRAY_BYTES",
    "MAX_POSITIONS",
    "PONS_SETS",
    "POSITION_SETS",
    "RANDOM_POSITIONS",
    "SPLITS",
    "LabelledPositions",
    "PonsPosition",
    "load_pons",
    "load_positions",
    "pons_files",
    "positions_from_games",
]

#: The game split: positions from games between search players of mixed strength.
DEFAULT_POSITIONS = Path(__file__).parent / "data" / "positions.npz"
#: The random split: positions of uniformly random legal play, held out from the game split and
#: from the teacher data (``tools/make_positions.py --random``).
RANDOM_POSITIONS = Path(__file__).parent / "data" / "positions_random.npz"
#: The shipped labelled sets by name: positions of games and positions of random legal play.
POSITION_SETS: dict[str, Path] = {"games": DEFAULT_POSITIONS, "random": RANDOM_POSITIONS}
#: Pascal Pons' benchmark files by name, in the order of his benchmark (``Test_L{1,2,3}`` begin,
#: middle and end of game, ``_R{1,2,3}`` easy, medium, hard).
PONS_SETS: dict[str, str] = {
    "Test_L3_R1": "End-Easy",
    "Test_L2_R1": "Middle-Easy",
    "Test_L2_R2": "Middle-Medium",
    "Test_L1_R1": "Begin-Easy",
    "Test_L1_R2": "Begin-Medium",
    "Test_L1_R3": "Begin-Hard",
}
#: Split names in the file's order (``split`` array values 0 and 1), and "all".
SPLITS = ("dev", "test", "all")
#: Score stored for a full column.
ILLEGAL = -128


@dataclass(frozen=True)
class LabelledPositions:
    """Positions with the exact score of every column (NaN for full columns).

    ``moves[i]`` are the 0-based columns that reach position ``i``; ``phase[i]`` indexes
    ``phases``; ``split[i]`` is 0 for dev, 1 for test.
    """

    geometry: Geometry
    moves: tuple[tuple[int, ...], ...]
    scores: np.ndarray
    phase: np.ndarray
    split: np.ndarray
    phases: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def __len__(self) -> int:
        return len(self.moves)

    def boards(self) -> list[Board]:
        """The positions as boards."""
        return [Board.from_moves(self.geometry, moves) for moves in self.moves]

    def subset(self, keep: np.ndarray) -> LabelledPositions:
        """The positions where the boolean array ``keep`` is true."""
        keep = np.asarray(keep, dtype=bool)
        return LabelledPositions(
            self.geometry,
            tuple(m for m, k in zip(self.moves, keep, strict=True) if k),
            self.scores[keep],
            self.phase[keep],
            self.split[keep],
            self.phases,
            self.meta,
        )


def load_positions(path: str | Path | None = None, split: str = "test") -> LabelledPositions:
    """The labelled positions of ``path`` (default: the shipped game split), of one ``split``
    (``"test"``, ``"dev"`` or ``"all"``).

    A malformed file is a one-line ``ValueError`` that names it and what is wrong; its arrays'
    sizes are checked against their headers, :data:`MAX_POSITIONS` and :data:`MAX_ARRAY_BYTES`
    before any is read.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    path = Path(path) if path is not None else DEFAULT_POSITIONS
    if not path.is_file():
        raise FileNotFoundError(f"no labelled positions at {path}")
    try:
        positions = _read_positions(path)
    except _MALFORMED as error:
        what = " ".join(str(error).split()) or type(error).__name__
        raise ValueError(f"{path} is not a labelled-positions file: {what}") from None
    if split == "all":
        return positions
    return positions.subset(positions.split == SPLITS.index(split))


#: The most positions a labelled-positions file may hold.
MAX_POSITIONS = 200_000
#: The most bytes its arrays may take in memory, together, read as 64-bit numbers (checked on
#: their headers before any is read).
MAX_ARRAY_BYTES = 256 * 2**20
#: The longest ``meta`` string, in characters.
MAX_META_CHARACTERS = 2**20
_ARRAYS = ("meta", "moves", "plies", "scores", "phase", "split")
_MALFORMED = (
    ValueError, KeyError, TypeError, OSError, EOFError, zipfile.BadZipFile, zlib.error,
)  # fmt: skip


def _read_positions(path: Path) -> LabelledPositions:
    headers = _array_headers(path)
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        geometry, phases = _geometry_and_phases(meta)
        if headers["moves"][0][1] != geometry.cells or headers["scores"][0][1] != geometry.columns:
            raise ValueError(
                f"moves must be [n, {geometry.cells}] and scores [n, {geometry.columns}] for "
                f"the {geometry.rows}x{geometry.columns} board of its meta"
            )
        arrays = {name: data[name].astype(np.int64) for name in _ARRAYS[1:]}
    moves, plies, raw_scores = arrays["moves"], arrays["plies"], arrays["scores"]
    _check_moves(geometry, moves, plies)
    _check_scores(geometry, moves, raw_scores)
    if ((arrays["phase"] < 0) | (arrays["phase"] >= len(phases))).any():
        raise ValueError(f"a phase index is not one of the {len(phases)} phases of its meta")
    if not np.isin(arrays["split"], (0, 1)).all():
        raise ValueError("a split index is neither 0 (dev) nor 1 (test)")
    scores = np.where(raw_scores == ILLEGAL, np.nan, raw_scores.astype(np.float64))
    move_rows = tuple(tuple(row[:n]) for row, n in zip(moves.tolist(), plies.tolist(), strict=True))
    return LabelledPositions(
        geometry, move_rows, scores, arrays["phase"], arrays["split"], phases, meta
    )


def _array_headers(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The shape and dtype of each array the file must hold, read from the ``.npy`` headers in
    the archive, and checked: kinds, shapes that agree, sizes the stored data can fill and that
    stay within the limits."""
    headers: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    stored: dict[str, int] = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name = info.filename.removesuffix(".npy")
            if name not in _ARRAYS:
                continue
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(member)
                elif version == (2, 0):
                    shape, _, dtype = np.lib.format.read_array_header_2_0(member)
                else:
                    raise ValueError(f"array {name} has .npy format version {version}")
                headers[name], stored[name] = (shape, dtype), info.file_size - member.tell()
    missing = [name for name in _ARRAYS if name not in headers]
    if missing:
        raise ValueError(f"no {', '.join(missing)} array")
    total = 0
    for name, (shape, dtype) in headers.items():
        if name == "meta":
            if shape != () or dtype.kind != "U" or dtype.itemsize > 4 * MAX_META_CHARACTERS:
                raise ValueError(
                    f"meta must be one string of at most {MAX_META_CHARACTERS} characters"
                )
        elif dtype.kind not in "iu":
            raise ValueError(f"array {name} holds {dtype}, not integers")
        size = math.prod(shape) * dtype.itemsize
        if size > stored[name]:
            raise ValueError(f"array {name} of shape {shape} needs {size:,} bytes, holds fewer")
        total += size if name == "meta" else 8 * math.prod(shape)
    count = headers["moves"][0][0] if len(headers["moves"][0]) == 2 else -1
    expected = {"moves": 2, "scores": 2, "plies": 1, "phase": 1, "split": 1}
    for name, dimensions in expected.items():
        shape = headers[name][0]
        if len(shape) != dimensions or shape[0] != count:
            raise ValueError(
                f"array {name} has shape {shape}; moves and scores must be [n, width], "
                "plies, phase and split [n], with the same n"
            )
    if count > MAX_POSITIONS:
        raise ValueError(f"{count:,} positions, more than the {MAX_POSITIONS:,} allowed")
    if total > MAX_ARRAY_BYTES:
        raise ValueError(
            f"arrays of {total:,} bytes in memory, more than the {MAX_ARRAY_BYTES:,} allowed"
        )
    return headers


def _geometry_and_phases(meta: Any) -> tuple[Geometry, tuple[str, ...]]:
    if not isinstance(meta, dict):
        raise ValueError("meta is not a JSON object")
    board = meta.get("geometry")
    if not isinstance(board, dict) or not {"rows", "columns", "inarow"} <= set(board):
        raise ValueError("meta has no geometry with rows, columns and inarow")
    geometry = Geometry(board["rows"], board["columns"], board["inarow"])
    phases = meta.get("phases")
    if not isinstance(phases, dict | list) or not all(isinstance(p, str) for p in phases):
        raise ValueError("meta has no phases (a list or an object of phase names)")
    return geometry, tuple(phases)


def _check_moves(geometry: Geometry, moves: np.ndarray, plies: np.ndarray) -> None:
    """Each row: ``plies`` columns of the board, then -1 padding, a game still open."""
    if ((plies < 0) | (plies >= geometry.cells)).any():
        raise ValueError(f"a position's plies are not 0 to {geometry.cells - 1}")
    played = np.arange(geometry.cells) < plies[:, None]
    if ((moves < 0) & played).any() or ((moves >= geometry.columns) & played).any():
        raise ValueError(f"a move is not a column of the board (0 to {geometry.columns - 1})")
    if (moves[~played] != -1).any():
        raise ValueError("a row of moves is not padded with -1 after its plies")
    canonical_keys(geometry, moves)  # a full column or a move after the game ended: ValueError


def _check_scores(geometry: Geometry, moves: np.ndarray, scores: np.ndarray) -> None:
    """:data:`ILLEGAL` exactly for the full columns, scores in Pons' range elsewhere."""
    played = moves >= 0
    rows = np.repeat(np.arange(len(moves)), played.sum(axis=1))
    heights = np.zeros(scores.shape, dtype=np.int64)
    np.add.at(heights, (rows, moves[played]), 1)
    full = heights == geometry.rows
    if ((scores == ILLEGAL) != full).any():
        raise ValueError(f"a score is {ILLEGAL} for a column that is not full, or the reverse")
    bound = (geometry.cells + 1) // 2
    if (np.abs(scores[~full]) > bound).any():
        raise ValueError(f"a score is outside -{bound} to {bound}")


@dataclass(frozen=True)
class PonsPosition:
    """A line of Pascal Pons' benchmark files: moves (1-indexed columns), the board, its score."""

    moves: str
    board: Board
    score: int


def load_pons(path: str | Path, limit: int | None = None) -> list[PonsPosition]:
    """Positions of a Pons benchmark file (lines ``"<1-indexed columns> <score>"``, 6x7 board)."""
    geometry = Geometry(6, 7, 4)
    positions: list[PonsPosition] = []
    with open(path, encoding="ascii") as lines:
        for number, line in enumerate(lines, 1):
            if limit is not None and len(positions) >= limit:
                break
            if not line.strip():
                continue
            try:
                moves, score = line.split()
                board = Board.from_moves(geometry, [int(c) - 1 for c in moves])
                positions.append(PonsPosition(moves, board, int(score)))
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not a Pons position: {line!r}") from error
    return positions


def pons_files(directory: str | Path) -> dict[str, Path]:
    """The Pons benchmark files (``Test_L*_R*``) of ``directory`` by set name
    (:data:`PONS_SETS`; in its order, then any others by file name)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no such directory of Pons files: {directory}")
    found = {path.name: path for path in directory.glob("Test_L*_R*") if path.is_file()}
    if not found:
        raise ValueError(f"{directory} holds no Pons benchmark file (Test_L*_R*)")
    ordered = [name for name in PONS_SETS if name in found]
    ordered += sorted(name for name in found if name not in PONS_SETS)
    return {PONS_SETS.get(name, name): found[name] for name in ordered}


def positions_from_games(
    policy: str | Policy,
    games: int,
    *,
    geometry: Geometry | None = None,
    opponent: str | Policy = "random",
    seed: int | None = 0,
    openings: Sequence[Sequence[int]] = (),
) -> list[Board]:
    """The positions where ``policy`` was to move in ``games`` games against ``opponent``.

    Seats alternate (the policy moves first in even-numbered games). ``openings``, if given, are
    move sequences played before the policies take over, cycled over the games.
    """
    geometry = geometry or Geometry()
    policy, opponent = make_policy(policy), make_policy(opponent)
    rng = np.random.default_rng(seed)
    positions: list[Board] = []
    for game in range(games):
        board = Board.from_moves(geometry, openings[game % len(openings)] if openings else ())
        policy.reset()
        opponent.reset()
        ours = (board.moves + game) % 2
        while not board.is_terminal():
            if board.moves % 2 == ours:
                positions.append(board)
                board = board.play(int(policy.act(board, rng)))
            else:
                board = board.play(int(opponent.act(board, rng)))
    return positions
