"""Matches between two policies: seats alternating, scores with 95% confidence intervals.

No torch needed: any policy spec (``"minimax:depth=3"``), saved agent file or :class:`Policy` works.

**Protocol.** By default every game starts from an opening of :mod:`connectx_gym.openings`: all
two-ply openings (49 on 6x7), each played once from each seat, so a default match is 98 games.
Deterministic players that start on the empty board replay a handful of lines; varied openings
measure play, not memory. ``openings="none"`` restores the old protocol (empty board), and any
named set or list of move sequences may be given. Games ``2k`` and ``2k + 1`` play the same
opening with the seats swapped (A has mark 1 in even games). Named sets are played in an order
shuffled by the seed, so a match shorter than the full set still draws openings from all columns;
a custom list is played in its order. Game ``i`` draws its randomness from child ``i`` of
``numpy.random.SeedSequence(seed)``, so a match is reproduced by its seed.

**Saved games** (``play_match(..., save_games=PATH)``, ``connectx evaluate/tournament
--save-games FILE.jsonl``): one JSON object per line and game::

    {"rows": 6, "columns": 7, "inarow": 4,
     "players": ["minimax:depth=3", "random"],   # specs of mark 1 and mark 2
     "moves": [3, 2, 3, 3, ...],                 # 0-based columns, the opening included
     "opening_plies": 2,                         # how many of the moves are the opening
     "winner": 1,                                # 0 draw, else the winner's mark (1 or 2)
     "illegal": null,                            # mark whose illegal answer ended the game
     "game": 0, "seed": 0}                       # game index in its match, the match's seed

Replaying ``moves`` from the empty board gives the recorded winner (a game ended by an illegal
answer stops before it: ``winner`` is then the other mark and ``illegal`` says who).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.openings import Openings, resolve_openings
from connectx_gym.outputs import open_atomically
from connectx_gym.policy import IllegalMoveError, Policy, validate_answer
from connectx_gym.registry import make_policy

__all__ = [
    "GameExecutor",
    "GameJob",
    "GameRecord",
    "MatchResult",
    "game_to_json",
    "play_game",
    "play_indexed_game",
    "play_match",
    "read_games",
    "wilson_interval",
]

#: Spawn key of the generator that orders a named opening set (game generators use 0, 1, ...).
_ORDER_KEY = 1 << 32

PolicyLike = str | Policy | Callable[..., Any]


def wilson_interval(score: float, games: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion ``score`` over ``games`` trials (draws count half)."""
    if games == 0:
        return (0.0, 1.0)
    denominator = 1 + z * z / games
    centre = (score + z * z / (2 * games)) / denominator
    spread = z * math.sqrt(score * (1 - score) / games + z * z / (4 * games * games)) / denominator
    # The interval always contains the observed score (rounding can leave it a hair outside).
    return (max(0.0, min(centre - spread, score)), min(1.0, max(centre + spread, score)))


@dataclass
class GameRecord:
    """One game: the columns played, who moved first and how it ended."""

    moves: list[int]
    first: int  # 0: player A had mark 1; 1: player B had mark 1
    winner: int  # 0 draw, 1 player A, 2 player B
    illegal: int | None = None  # the player (1 A, 2 B) whose illegal answer ended the game
    illegal_answer: str | None = None
    opening_plies: int = 0  # how many of ``moves`` were the opening


@dataclass
class MatchResult:
    """Outcome of a match, from player A's point of view."""

    player_a: str
    player_b: str
    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    illegal_a: int = 0
    illegal_b: int = 0
    moves_a: int = 0
    moves_b: int = 0
    seconds_a: float = 0.0
    seconds_b: float = 0.0
    records: list[GameRecord] = field(default_factory=list, repr=False)
    openings: str = "none"  # the opening set's name, or "custom" for a list of move sequences

    @property
    def score(self) -> float:
        """(wins + draws / 2) / games for player A."""
        return (self.wins + 0.5 * self.draws) / self.games if self.games else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        """95% Wilson interval of :attr:`score`."""
        return wilson_interval(self.score, self.games)

    @property
    def ms_per_move_a(self) -> float:
        """Player A's mean thinking time per move, in milliseconds."""
        return 1000 * self.seconds_a / max(self.moves_a, 1)

    @property
    def ms_per_move_b(self) -> float:
        """Player B's mean thinking time per move, in milliseconds."""
        return 1000 * self.seconds_b / max(self.moves_b, 1)

    def to_dict(self, with_games: bool = False) -> dict[str, Any]:
        """A JSON-ready summary (with every game's moves if ``with_games``)."""
        low, high = self.interval
        summary = {
            "player_a": self.player_a,
            "player_b": self.player_b,
            "games": self.games,
            "wins": self.wins,
            "draws": self.draws,
            "losses": self.losses,
            "score": self.score,
            "ci95": [low, high],
            "illegal_a": self.illegal_a,
            "illegal_b": self.illegal_b,
            "ms_per_move_a": self.ms_per_move_a,
            "ms_per_move_b": self.ms_per_move_b,
            "openings": self.openings,
        }
        if with_games:
            summary["records"] = [asdict(record) for record in self.records]
        return summary

    def summary(self) -> str:
        """One line: W/D/L, score and interval, illegal moves, time per move."""
        low, high = self.interval
        return (
            f"{self.player_a} vs {self.player_b}: {self.wins}W {self.draws}D {self.losses}L "
            f"in {self.games} games, score {self.score:.3f} [95% CI {low:.3f}-{high:.3f}], "
            f"illegal {self.illegal_a}/{self.illegal_b}, "
            f"ms/move {self.ms_per_move_a:.2f}/{self.ms_per_move_b:.2f}"
        )


def play_game(
    players: Sequence[Policy],
    geometry: Geometry,
    rng: np.random.Generator,
    opening: Sequence[int] = (),
    clock: list[float] | None = None,
    move_counts: list[int] | None = None,
) -> tuple[list[int], int, int | None, str | None]:
    """Play one game; ``players[0]`` has mark 1. ``opening`` columns are played first.

    Returns ``(moves, winner_mark, illegal_mark, illegal_answer)``: winner 0 is a draw; a player
    whose answer is illegal loses at once (``illegal_mark`` says who). ``clock`` and
    ``move_counts``, if given, accumulate each player's thinking seconds and moves.
    """
    board = Board.from_moves(geometry, opening)
    moves = [int(c) for c in opening]
    for player in players:
        player.reset()
    while True:
        winner = board.winner()
        if winner is not None:
            return moves, winner, None, None
        if board.is_full():
            return moves, 0, None, None
        seat = board.moves & 1
        started = time.perf_counter()
        answer = players[seat].act(board, rng)
        if clock is not None:
            clock[seat] += time.perf_counter() - started
        if move_counts is not None:
            move_counts[seat] += 1
        try:
            column = validate_answer(answer, board, getattr(players[seat], "name", "player"))
        except IllegalMoveError:
            return moves, 2 - seat, seat + 1, repr(answer)
        board = board.play(column)
        moves.append(column)


@dataclass(frozen=True)
class GameJob:
    """Game ``index`` of a match: its opening and its own child of the match's SeedSequence."""

    index: int
    opening: tuple[int, ...]
    seed: np.random.SeedSequence


#: One played game: its record, A's and B's thinking seconds, A's and B's move counts.
GameOutcome = tuple["GameRecord", list[float], list[int]]


class GameExecutor(Protocol):
    """Plays a match's games somewhere (e.g. on Ray) and yields their outcomes in job order."""

    def map_games(
        self, player_a: PolicyLike, player_b: PolicyLike, geometry: Geometry, jobs: list[GameJob]
    ) -> Iterator[GameOutcome]: ...


def play_indexed_game(a: Policy, b: Policy, geometry: Geometry, job: GameJob) -> GameOutcome:
    """Play game ``job.index`` of a match between A and B: the one implementation that the local
    loop and remote workers share. A has mark 1 in even games; clocks and move counts are A's, B's.
    """
    a_first = job.index % 2 == 0
    seats = [a, b] if a_first else [b, a]
    game_clock, game_moves = [0.0, 0.0], [0, 0]
    rng = np.random.default_rng(job.seed)
    moves, winner, illegal, answer = play_game(
        seats, geometry, rng, job.opening, game_clock, game_moves
    )
    a_seat = 0 if a_first else 1
    winner_player = 0 if winner == 0 else (1 if (winner == 1) == a_first else 2)
    illegal_player = None if illegal is None else (1 if (illegal == 1) == a_first else 2)
    record = GameRecord(moves, a_seat, winner_player, illegal_player, answer, len(job.opening))
    clock = [game_clock[a_seat], game_clock[1 - a_seat]]
    counts = [game_moves[a_seat], game_moves[1 - a_seat]]
    return record, clock, counts


def play_match(
    player_a: PolicyLike,
    player_b: PolicyLike,
    games: int | None = None,
    seed: int | None = 0,
    rows: int = 6,
    columns: int = 7,
    inarow: int = 4,
    openings: Openings = None,
    progress: Callable[[int, int], None] | None = None,
    save_games: str | Path | IO[str] | None = None,
    executor: GameExecutor | None = None,
) -> MatchResult:
    """Play ``games`` games between A and B, A taking mark 1 in even games and mark 2 in odd ones.

    ``openings`` is a set of :mod:`connectx_gym.openings` (``None``: all two-ply openings;
    ``"none"``: the empty board) or a list of move sequences; games ``2k`` and ``2k + 1`` play
    the same opening from both seats. ``games=None`` plays each opening from both seats once (98
    games on 6x7), or 100 games with ``openings="none"``. ``save_games`` (a path, or an open text
    file) receives one JSON line per game (format in the module docstring). ``progress(done,
    games)`` is called after every game. ``executor`` (e.g. ``connectx_gym.ray_executor.
    RayExecutor()``) plays the games elsewhere; the result is the same as the local run's, since
    every game is :func:`play_indexed_game` of its own :class:`GameJob`. See the module docstring
    for the protocol.
    """
    geometry = Geometry(rows, columns, inarow)
    opening_list = resolve_openings(openings, geometry)
    if games is None:
        games = 100 if opening_list == [()] else 2 * len(opening_list)
    if isinstance(games, bool) or not isinstance(games, (int, np.integer)) or games < 1:
        raise ValueError(f"games must be a whole number >= 1, got {games!r}")
    a, b = make_policy(player_a), make_policy(player_b)
    result = MatchResult(_label(player_a, a), _label(player_b, b))
    result.openings = _openings_label(openings, opening_list)
    sequence = np.random.SeedSequence(seed)
    if isinstance(openings, str) or openings is None:
        order_seed = np.random.SeedSequence(sequence.entropy, spawn_key=(_ORDER_KEY,))
        permutation = np.random.default_rng(order_seed).permutation(len(opening_list))
        opening_list = [opening_list[i] for i in permutation]
    jobs = [
        GameJob(index, opening_list[(index // 2) % len(opening_list)], child)
        for index, child in enumerate(sequence.spawn(games))
    ]
    clock, move_counts = [0.0, 0.0], [0, 0]
    outcomes: Iterator[GameOutcome]
    if executor is None:
        outcomes = (play_indexed_game(a, b, geometry, job) for job in jobs)
    else:
        outcomes = executor.map_games(player_a, player_b, geometry, jobs)
    with ExitStack() as stack:
        out: IO[str] | None = None
        if isinstance(save_games, (str, os.PathLike)):
            out = stack.enter_context(open_atomically(save_games))
        elif save_games is not None:
            out = save_games
        for index, (record, game_clock, game_moves) in enumerate(outcomes):
            clock[0] += game_clock[0]
            clock[1] += game_clock[1]
            move_counts[0] += game_moves[0]
            move_counts[1] += game_moves[1]
            result.games += 1
            result.wins += record.winner == 1
            result.losses += record.winner == 2
            result.draws += record.winner == 0
            result.illegal_a += record.illegal == 1
            result.illegal_b += record.illegal == 2
            result.records.append(record)
            if out is not None:
                labels = [result.player_a, result.player_b]
                players = labels if record.first == 0 else labels[::-1]
                out.write(json.dumps(game_to_json(record, geometry, players, index, seed)) + "\n")
                out.flush()
            if progress is not None:
                progress(index + 1, games)
    result.seconds_a, result.seconds_b = clock
    result.moves_a, result.moves_b = move_counts
    return result


def game_to_json(
    record: GameRecord, geometry: Geometry, players: Sequence[str], game: int, seed: int | None
) -> dict[str, Any]:
    """One saved game (the format of the module docstring); ``players`` by mark."""

    # The record's winner and illegal are players (1 A, 2 B); the file speaks of marks.
    def mark(player: int | None) -> int | None:
        if player is None or player == 0:
            return player
        return 1 if (player == 1) == (record.first == 0) else 2

    return {
        "rows": geometry.rows,
        "columns": geometry.columns,
        "inarow": geometry.inarow,
        "players": list(players),
        "moves": [int(c) for c in record.moves],
        "opening_plies": record.opening_plies,
        "winner": mark(record.winner),
        "illegal": mark(record.illegal),
        "game": game,
        "seed": seed,
    }


def read_games(path: str | Path) -> list[dict[str, Any]]:
    """The games of a saved-games file, each checked by replaying its moves.

    Raises ``ValueError`` naming the line when a game is malformed, its moves are illegal, or
    they do not lead to the recorded winner.
    """
    games = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                game = json.loads(line)
                geometry = Geometry(game["rows"], game["columns"], game["inarow"])
                board = Board.from_moves(geometry, game["moves"])
                winner = board.winner() or 0
                if game.get("illegal") is None and winner != game["winner"]:
                    raise ValueError(f"moves end with winner {winner}, not {game['winner']}")
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a saved game: {error}") from None
            games.append(game)
    return games


def _openings_label(openings: Openings, resolved: list[tuple[int, ...]]) -> str:
    if isinstance(openings, str):
        return openings
    if openings is None:  # the default set, or the longest that exists on a tiny board
        return {0: "none", 1: "one-ply", 2: "two-ply"}[len(resolved[0])]
    return "custom"


def _label(spec: PolicyLike, policy: Policy) -> str:
    return spec if isinstance(spec, str) else getattr(policy, "name", repr(policy))
