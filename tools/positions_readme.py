"""The sections of ``baselines/data/README.md`` that ``tools/make_positions.py`` writes: one per
labelled-positions file, made from the file's metadata, each replacing its own section only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from connectx_baselines.position_sets import ILLEGAL
from connectx_gym.outputs import write_text_atomically

__all__ = ["GAME_TITLE", "RANDOM_TITLE", "section", "write_section"]

GAME_TITLE = "# Labelled positions for measuring play against the exact solver"
RANDOM_TITLE = "# The random split: labelled positions of random legal play"


def section(meta: dict[str, Any]) -> str:
    """The README section of a labelled-positions file, from its ``meta``."""
    g = meta["geometry"]
    board = f"{g['rows']}x{g['columns']} (connect {g['inarow']})"
    intro = _random_intro if meta.get("source") == "random" else _game_intro
    lines = intro(meta, board)
    lines += [
        "",
        "| phase | plies | test | dev | skipped (not proven within the node cap) |",
        "|---|---|---:|---:|---:|",
    ]
    for name, (first, last) in meta["phases"].items():
        counts = meta["counts"][name]
        lines.append(
            f"| {name} | {first}-{last} | {counts['test']} | {counts['dev']} "
            f"| {meta['skipped'][name]} |"
        )
    lines += [
        "",
        f"Node cap per position: {meta['node_limit']:,} solver nodes (deterministic: the same "
        "positions on any machine; about 5 s on one core). A candidate not proven within the cap "
        "was skipped and replaced by the next candidate of its phase, so the hardest positions of "
        f"a phase are under-represented: {_skipped_text(meta)}.",
        "",
        "Arrays: `moves` int8 [n, cells] (0-based columns, padded with -1), `plies` int8 [n], "
        f"`scores` int8 [n, columns] ({ILLEGAL} for a full column), `phase` int8 [n] (index "
        "into the phase names in `meta`), `split` int8 [n] (0 dev, 1 test), `meta` (JSON).",
        "",
    ]
    return "\n".join(lines)


def _game_intro(meta: dict[str, Any], board: str) -> list[str]:
    return [
        GAME_TITLE,
        "",
        f"`positions.npz`: {meta['total']} positions on {board}, each with the exact score of "
        "every legal move (Pascal Pons' scores, `connectx_baselines.solver.Solver.move_scores`). "
        "Read it with `connectx_baselines.perfect_play.load_positions()`; measure a policy with "
        "`connectx accuracy SPEC` or `connectx_baselines.perfect_play.evaluate_policy(SPEC)`.",
        "",
        f"Made by `{meta['command']}` (seed {meta['seed']}) in {meta['seconds'] / 60:.0f} "
        "minutes of wall time (one process, on a 2-core machine shared with other work), "
        f"from {meta['games']} games between these players, drawn at random for each "
        f"seat: {', '.join(f'`{p}`' for p in meta['players'])}.",
        "",
        "One position per phase per game (a random ply of the phase), deduplicated up to the "
        "horizontal mirror across both splits, dealt alternately to `test` and `dev`. "
        "**Tune on `dev` only; report on `test`.** Positions with fewer than "
        f"{min(first for first, _ in meta['phases'].values())} stones are not included "
        "(their exact scores cost 10+ s each); matches cover the first plies with the two-ply "
        "openings.",
    ]


def _random_intro(meta: dict[str, Any], board: str) -> list[str]:
    drawn = meta["drawn"]
    held_out = ", ".join(f"`{name}` {count}" for name, count in meta["held_out"].items())
    machine = meta.get("machine", "")
    return [
        RANDOM_TITLE,
        "",
        f"`positions_random.npz`: {meta['total']} positions on {board} of uniformly random "
        "legal play, labelled like `positions.npz` (the exact score of every legal move, by the "
        "same function) and in the same arrays. `connectx accuracy SPEC` reports it beside the "
        "game split; read it with `connectx_baselines.perfect_play.load_positions("
        "connectx_baselines.position_sets.RANDOM_POSITIONS)`. No training reads it.",
        "",
        "A position of `p` stones is the board after `p` uniformly random legal moves from the "
        "empty board, drawn again from the start when one of those moves ended the game (a four "
        "in a row); `p` is drawn uniformly from the plies of its phase, as in the game split, "
        f"and positions with fewer than {min(first for first, _ in meta['phases'].values())} "
        "stones are not included. Nothing else is asked of a position: random play leaves wins "
        "unplayed and threats unblocked, so the player to move can win at once in "
        f"{meta['wins_at_once']} of the {meta['total']} positions. The game split's positions "
        "are those of players that mostly play the obvious moves; these measure play in the "
        "positions such players rarely reach.",
        "",
        f"Made by `{meta['command']}` (seed {meta['seed']}) in {meta['seconds'] / 60:.0f} "
        "minutes of wall time (one process, on a 2-core machine shared with other work"
        f"{'; `lscpu`: ' + machine if machine else ''}), from {drawn['draws']:,} random move "
        f"sequences: {drawn['ended']:,} ended before their position, {drawn['repeats']} drew a "
        f"position already drawn (up to the mirror) and {drawn['excluded']} one of the held-out "
        "data, and were dropped.",
        "",
        "Deduplicated up to the horizontal mirror across both splits, dealt alternately to `test` "
        "and `dev`. **Tune on `dev` only; report on `test`.** Disjoint, up to the mirror, from "
        "the game split and from the teacher data a run reads (the books and the shipped chunks "
        f"of seed 0), all held out while drawing (positions held out: {held_out}); a test checks "
        "that none of them is in the file. (A run of another seed or setting labels its own "
        "chunks, which leave out the game split only.)",
    ]


def _skipped_text(meta: dict[str, Any]) -> str:
    text = ", ".join(
        f"{name} {meta['skipped'][name]} of "
        f"{meta['skipped'][name] + sum(meta['counts'][name].values())} candidates"
        for name in meta["phases"]
    )
    if meta.get("exhausted"):
        text += (
            f"; {', '.join(meta['exhausted'])}: every candidate was used, so the phase has fewer "
            "positions than asked (raise --spare)"
        )
    if not meta.get("complete", True):
        text += " (generation stopped before the end: counts are what was labelled)"
    return text


def write_section(readme: Path, text: str) -> None:
    """Replace the section of ``readme`` that has ``text``'s title (its first line) by ``text``;
    a new random-split section goes after the game split's, any other new one first."""
    title = text.splitlines()[0]
    sections = _sections(readme.read_text(encoding="utf-8")) if readme.is_file() else []
    titles = [part.splitlines()[0] for part in sections]
    if title in titles:
        sections[titles.index(title)] = text
    elif title == RANDOM_TITLE and GAME_TITLE in titles:
        sections.insert(titles.index(GAME_TITLE) + 1, text)
    else:
        sections.insert(0, text)
    body = "\n".join(part.rstrip("\n") + "\n" for part in sections)
    write_text_atomically(readme, body)


def _sections(text: str) -> list[str]:
    """``text`` cut before each line that starts a top-level heading (``# ``)."""
    parts: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("# ") or not parts:
            parts.append([])
        parts[-1].append(line)
    return ["".join(part) for part in parts]
