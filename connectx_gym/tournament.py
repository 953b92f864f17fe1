"""Round-robin tournaments with Elo ratings and 95% intervals.

Every pair of players meets in :func:`connectx_gym.match.play_match` (seats alternating, from the
match's opening set: by default all two-ply openings from both seats, 98 games on 6x7). Ratings
are the maximum-likelihood Bradley-Terry model on the scores (a draw counts half a win), put on the
Elo scale (400 log10) with the mean rating at 1500. To keep the estimate finite when a player wins
or loses every game, each pair also gets one virtual draw (a weak prior towards equal strength,
worth one game out of the ``games`` played). Intervals come from a parametric bootstrap of the
fitted model: each pairing's score is redrawn as half-points, ``Binomial(2 * games, p) / 2`` with
``p`` the fitted expected score, and the ratings refitted (so a pairing won 20-0 still carries
some uncertainty); the interval is the 2.5-97.5 percentile spread of the refits around their mean,
placed around the estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from connectx_gym.match import GameExecutor, MatchResult, PolicyLike, play_match
from connectx_gym.openings import Openings
from connectx_gym.outputs import atomic_output, open_atomically

__all__ = ["TournamentResult", "bradley_terry_elo", "run_tournament", "short_label"]

ELO_MEAN = 1500.0


def bradley_terry_elo(
    scores: np.ndarray, games: np.ndarray, prior_draws: float = 1.0, iterations: int = 10_000
) -> np.ndarray:
    """Elo ratings (mean 1500) maximising the Bradley-Terry likelihood.

    ``scores[i, j]`` is what player i scored against j (wins + draws / 2) in ``games[i, j]``
    games; ``prior_draws`` virtual draws are added to every pair. Solved with Hunter's (2004) MM
    iteration.
    """
    scores = np.asarray(scores, dtype=np.float64)
    games = np.asarray(games, dtype=np.float64)
    n = scores.shape[0]
    off_diagonal = ~np.eye(n, dtype=bool)
    scores = scores + off_diagonal * prior_draws / 2
    games = games + off_diagonal * prior_draws
    total_scores = scores.sum(axis=1)
    strength = np.ones(n)
    for _ in range(iterations):
        denominator = (games / (strength[:, None] + strength[None, :])).sum(axis=1)
        updated = total_scores / denominator
        updated /= math.exp(np.log(updated).mean())
        if np.max(np.abs(np.log(updated) - np.log(strength))) < 1e-10:
            strength = updated
            break
        strength = updated
    ratings = 400 * np.log10(strength)
    centred: np.ndarray = ratings - ratings.mean() + ELO_MEAN
    return centred


@dataclass
class TournamentResult:
    """A round robin's matches, score matrices and ratings with 95% intervals."""

    players: list[str]
    matches: list[MatchResult]
    scores: np.ndarray  # scores[i, j]: what i scored against j
    games: np.ndarray
    elo: np.ndarray
    elo_low: np.ndarray
    elo_high: np.ndarray

    def ranking(self) -> list[int]:
        """Player indices, best rating first."""
        return [int(i) for i in np.argsort(-self.elo, kind="stable")]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "players": [
                {
                    "player": self.players[i],
                    "elo": float(self.elo[i]),
                    "elo_ci95": [float(self.elo_low[i]), float(self.elo_high[i])],
                    "score": float(self.scores[i].sum() / max(self.games[i].sum(), 1)),
                    "games": int(self.games[i].sum()),
                }
                for i in self.ranking()
            ],
            "matches": [match.to_dict() for match in self.matches],
        }

    def table(self) -> str:
        """Markdown: ratings table, then the pairwise score matrix (row player's score)."""
        lines = [
            "| rank | player | Elo | 95% CI | score | games |",
            "|---:|---|---:|---|---:|---:|",
        ]
        for rank, i in enumerate(self.ranking(), 1):
            score = self.scores[i].sum() / max(self.games[i].sum(), 1)
            lines.append(
                f"| {rank} | {self.players[i]} | {self.elo[i]:.0f} "
                f"| {self.elo_low[i]:.0f} to {self.elo_high[i]:.0f} | {score:.3f} "
                f"| {int(self.games[i].sum())} |"
            )
        order = self.ranking()
        lines += [
            "",
            "| score of row vs column | " + " | ".join(self.players[j] for j in order) + " |",
            "|---|" + "---:|" * len(order),
        ]
        for i in order:
            cells = [
                "-" if i == j else f"{self.scores[i, j] / self.games[i, j]:.2f}" for j in order
            ]
            lines.append(f"| {self.players[i]} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def plot(self, path: str | Path) -> Path:
        """Ratings with intervals and the score matrix as a PNG (needs matplotlib).

        Readable for any names and any number of players: players are numbered by rank, the
        axes show the number and a short label, and a key under the plots gives every full name;
        the figure grows with the number of players.
        """
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ranked = self.ranking()
        size = len(ranked)
        number = {player: rank for rank, player in enumerate(ranked, 1)}
        order = ranked[::-1]  # best at the top of the rating plot
        labels = [f"{number[i]}. {short_label(self.players[i])}" for i in order]
        cell = 0.45
        key_lines = [f"{number[i]}. {short_label(self.players[i], 90)}" for i in ranked]
        key_columns = 1 if size <= 8 else 2
        key_height = 0.3 + 0.2 * math.ceil(size / key_columns)
        plots_height = max(3.0, 1.6 + cell * size)
        width = max(10.0, 5.5 + 2 * cell * size)
        figure = plt.figure(figsize=(width, plots_height + key_height + 0.4))
        grid = figure.add_gridspec(
            2, 2, height_ratios=[plots_height, key_height], width_ratios=[1, 1]
        )
        left, right = figure.add_subplot(grid[0, 0]), figure.add_subplot(grid[0, 1])
        errors = [self.elo[order] - self.elo_low[order], self.elo_high[order] - self.elo[order]]
        left.errorbar(self.elo[order], range(size), xerr=errors, fmt="o", capsize=3)
        left.set_yticks(range(size), labels)
        left.set_xlabel("Elo (mean 1500), 95% interval")
        left.set_title("ratings")
        left.grid(alpha=0.3)
        matrix = np.full((size, size), np.nan)
        for a, i in enumerate(ranked):  # rank order: best first, top left
            for b, j in enumerate(ranked):
                if i != j:
                    matrix[a, b] = self.scores[i, j] / self.games[i, j]
        image = right.imshow(matrix, vmin=0, vmax=1, cmap="RdYlGn")
        numbers = [str(rank) for rank in range(1, size + 1)]
        right.set_xticks(range(size), numbers)
        right.set_yticks(range(size), numbers)
        right.set_xlabel("column player (number in the key)")
        right.set_ylabel("row player")
        right.set_title("score of row vs column")
        if size <= 12:
            for a in range(size):
                for b in range(size):
                    if a != b:
                        shade = "white" if abs(matrix[a, b] - 0.5) > 0.35 else "black"
                        right.text(
                            b, a, f"{matrix[a, b]:.2f}", ha="center", va="center", size=8, c=shade
                        )
        figure.colorbar(image, ax=right, fraction=0.046)
        key = figure.add_subplot(grid[1, :])
        key.axis("off")
        per_column = math.ceil(size / key_columns)
        for column in range(key_columns):
            text = "\n".join(key_lines[column * per_column : (column + 1) * per_column])
            key.text(
                column / key_columns, 1.0, text, va="top", ha="left", size=9, family="monospace"
            )
        key.set_title("key", loc="left", size=10)
        figure.tight_layout()
        path = Path(path)
        try:
            with atomic_output(path) as temporary:
                figure.savefig(temporary, dpi=100, format=path.suffix.lstrip(".").lower() or "png")
        finally:
            plt.close(figure)
        return path


def short_label(name: str, width: int = 18) -> str:
    """``name`` in at most ``width`` characters: a path's file name, a long name cut in the middle
    (``minimax:dep…=0.25``)."""
    name = " ".join(str(name).split())
    if len(name) > width and ("/" in name or "\\" in name):
        name = name.replace("\\", "/").rstrip("/").rpartition("/")[2] or name
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return name[:head] + "\u2026" + name[len(name) - (width - 1 - head) :]


def run_tournament(
    players: Sequence[PolicyLike],
    games: int | None = None,
    seed: int | None = 0,
    rows: int = 6,
    columns: int = 7,
    inarow: int = 4,
    bootstrap: int = 1000,
    progress: Callable[[int, int, MatchResult], None] | None = None,
    openings: Openings = None,
    save_games: str | Path | IO[str] | None = None,
    executor: GameExecutor | None = None,
) -> TournamentResult:
    """Every pair of ``players`` plays ``games`` games (seats alternating); Elo with 95% intervals.

    ``openings`` and ``games`` are as in :func:`connectx_gym.match.play_match` (default: every
    two-ply opening from both seats). ``save_games`` collects every game of every pairing in one
    JSON-lines file. ``progress(done, total, match)`` is called after each pairing. ``executor``
    plays the games elsewhere (see :func:`connectx_gym.match.play_match`).
    """
    if len(players) < 2:
        raise ValueError("a tournament needs at least two players")
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0, got {bootstrap}")
    labels = [p if isinstance(p, str) else getattr(p, "name", repr(p)) for p in players]
    if len(set(labels)) != len(labels):
        raise ValueError(f"players must be distinct, got {labels}")
    n = len(players)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    seeds = np.random.SeedSequence(seed).spawn(len(pairs) + 1)
    scores = np.zeros((n, n))
    played = np.zeros((n, n))
    matches = []
    with ExitStack() as stack:
        out = save_games
        if save_games is not None and not hasattr(save_games, "write"):
            out = stack.enter_context(open_atomically(save_games))
        for index, (i, j) in enumerate(pairs):
            match_seed = int(seeds[index].generate_state(1)[0])
            match = play_match(
                players[i], players[j], games, match_seed, rows, columns, inarow,
                openings=openings, save_games=out, executor=executor,
            )  # fmt: skip
            match.player_a, match.player_b = labels[i], labels[j]
            matches.append(match)
            scores[i, j] = match.wins + match.draws / 2
            scores[j, i] = match.games - scores[i, j]
            played[i, j] = played[j, i] = match.games
            if progress is not None:
                progress(index + 1, len(pairs), match)
    elo = bradley_terry_elo(scores, played)
    low, high = elo.copy(), elo.copy()
    if bootstrap:
        rng = np.random.default_rng(seeds[-1])
        samples = np.empty((bootstrap, n))
        for b in range(bootstrap):
            resampled = np.zeros((n, n))
            for i, j in pairs:
                expected = 1 / (1 + 10 ** ((elo[j] - elo[i]) / 400))
                pair_games = int(played[i, j])
                resampled[i, j] = rng.binomial(2 * pair_games, expected) / 2
                resampled[j, i] = pair_games - resampled[i, j]
            samples[b] = bradley_terry_elo(resampled, played, iterations=2000)
        # Refitting shrinks towards 1500 once more (the prior): centre the spread on the estimate.
        spread = samples - samples.mean(axis=0)
        low, high = elo + np.percentile(spread, [2.5, 97.5], axis=0)
        low, high = np.minimum(low, elo), np.maximum(high, elo)
    return TournamentResult(labels, matches, scores, played, elo, low, high)
