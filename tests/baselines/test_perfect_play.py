"""Mistake rates against perfect play: the labelled set, the judge, the generator, the command."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from connectx_baselines.game_positions import canonical_key, canonical_keys, phase_bounds
from connectx_baselines.perfect_play import (
    LabelledPositions,
    evaluate_policy,
    judge_moves,
    load_positions,
)
from connectx_baselines.position_sets import (
    ILLEGAL,
    RANDOM_POSITIONS,
    load_pons,
)
from connectx_baselines.solver import Solver
from connectx_baselines.teacher_book import BOOKS
from connectx_baselines.teacher_cache import pad_moves, shipped_store
from connectx_baselines.teacher_labels import TeacherSet
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.match import wilson_interval
from tests.support.scripted_policies import Column, Illegal
from tools.make_positions import label_position, sample_random_positions
from tools.make_positions import main as make_positions
from tools.positions_readme import RANDOM_TITLE

nan = np.nan


# -- a brute-force reference on tiny boards ---------------------------------------------------
def brute_scores(board: Board) -> list[float]:
    """Pons scores of every column by plain negamax over the whole tree (tiny boards only)."""
    return [
        _brute_move(board.geometry, board.current, board.mask, board.moves, c)
        if board.can_play(c)
        else nan
        for c in range(board.geometry.columns)
    ]


@cache
def _brute_move(geometry: Geometry, current: int, mask: int, moves: int, column: int) -> int:
    board = Board(geometry, current, mask, moves)
    if board.is_winning_move(column):
        return (geometry.cells + 1 - moves) // 2
    child = board.play(column)
    if child.is_full():
        return 0
    legal = child.legal_moves()
    return -max(_brute_move(geometry, *child[1:], c) for c in legal)


def tiny_set(geometry: Geometry, games: int, seed: int) -> LabelledPositions:
    """Every non-terminal position of some random games, labelled by brute force."""
    rng = np.random.default_rng(seed)
    moves_list, scores = [], []
    for _ in range(games):
        board, moves = Board(geometry, 0, 0, 0), []
        while not board.is_terminal():
            moves_list.append(tuple(moves))
            scores.append(brute_scores(board))
            column = int(rng.choice(board.legal_moves()))
            board, moves = board.play(column), [*moves, column]
    n = len(moves_list)
    phase = np.array([len(m) * 2 // geometry.cells for m in moves_list])
    return LabelledPositions(
        geometry, tuple(moves_list), np.array(scores), phase, np.ones(n, dtype=int),
        ("first half", "second half"),
    )  # fmt: skip


def _value(score: float) -> int:
    """1 won, 0 drawn, -1 lost."""
    return 1 if score > 0 else (-1 if score < 0 else 0)


# -- the judge ----------------------------------------------------------------------------------
def test_judge_hand_checked_cases() -> None:
    scores = np.array(
        [
            [1, 0, -1, nan],  # win, draw, loss, full
            [1, 0, -1, nan],
            [1, 0, -1, nan],
            [3, 1, nan, -2],  # a fast win and a slow one
            [0, -1, -1, -1],
            [-1, -3, -2, -2],  # lost whatever: the slowest loss is perfect
            [1, 0, -1, nan],
            [1, 0, -1, nan],
        ]
    )
    columns = [0, 1, 2, 1, 1, 1, 3, 9]
    mistake, perfect = judge_moves(scores, columns)
    assert mistake.tolist() == [False, True, True, False, True, False, True, True]
    assert perfect.tolist() == [True, False, False, False, False, False, False, False]


@pytest.mark.parametrize(("rows", "columns", "inarow"), [(3, 3, 3), (4, 4, 3)])
def test_solver_agrees_with_brute_force_on_tiny_boards(
    rows: int, columns: int, inarow: int
) -> None:
    positions = tiny_set(Geometry(rows, columns, inarow), games=6, seed=rows)
    solver = Solver(positions.geometry)
    for moves, expected in zip(positions.moves, positions.scores, strict=True):
        labelled = label_position(solver, moves, None).astype(float)
        labelled[labelled == ILLEGAL] = nan
        np.testing.assert_array_equal(labelled, expected)


def test_mistake_rates_match_a_plain_count_on_4x4x3() -> None:
    positions = tiny_set(Geometry(4, 4, 3), games=8, seed=1)
    for policy in (Column(0), Column(2)):
        result = evaluate_policy(policy, positions)
        mistakes = perfect = 0
        for moves, scores in zip(positions.moves, positions.scores, strict=True):
            board = Board.from_moves(positions.geometry, moves)
            column = policy.act(board, np.random.default_rng(0))
            best = np.nanmax(scores)
            mistakes += _value(float(scores[column])) < _value(float(best))
            perfect += scores[column] == best
        assert result.overall.positions == len(positions)
        assert (result.overall.mistakes, result.overall.perfect) == (mistakes, perfect)
        assert result.overall.mistake_ci95 == wilson_interval(
            mistakes / len(positions), len(positions)
        )
        assert sum(p.positions for p in result.phases.values()) == len(positions)
        assert sum(p.mistakes for p in result.phases.values()) == mistakes


def test_perfect_player_makes_no_mistakes_and_illegal_answers_do() -> None:
    positions = tiny_set(Geometry(4, 4, 3), games=4, seed=2)
    assert evaluate_policy("solver", positions).overall.perfect_rate == 1.0
    assert evaluate_policy("solver", positions).overall.mistakes == 0
    illegal = evaluate_policy(Illegal(), positions).overall
    assert illegal.mistakes == illegal.illegal == len(positions)


# -- the shipped set ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shipped() -> LabelledPositions:
    return load_positions(split="all")


def test_shipped_set_is_documented_and_split(shipped: LabelledPositions) -> None:
    meta = shipped.meta
    assert meta["complete"]
    assert (shipped.geometry.rows, shipped.geometry.columns, shipped.geometry.inarow) == (6, 7, 4)
    assert (
        Path(__file__).parents[2].joinpath("baselines", "data", "positions.npz").stat().st_size
        < 1e6
    )
    assert len(shipped) == meta["total"]
    for number, name in enumerate(shipped.phases):
        in_phase = shipped.phase == number
        assert (shipped.split[in_phase] == 1).sum() == meta["counts"][name]["test"] > 0
        assert (shipped.split[in_phase] == 0).sum() == meta["counts"][name]["dev"] > 0
        first, last = meta["phases"][name]
        plies = [len(m) for m, keep in zip(shipped.moves, in_phase, strict=True) if keep]
        assert first <= min(plies) <= max(plies) <= last
    test, dev = load_positions(split="test"), load_positions(split="dev")
    assert len(test) + len(dev) == len(shipped)
    # Distinct up to the mirror, across both splits.
    keys = {canonical_key(shipped.geometry, moves) for moves in shipped.moves}
    assert len(keys) == len(shipped)


@pytest.mark.slow
def test_shipped_scores_agree_with_the_solver(shipped: LabelledPositions) -> None:
    rng = np.random.default_rng(0)
    solver = Solver(shipped.geometry)
    late = np.flatnonzero(shipped.phase >= 1)  # cheap to re-solve
    opening = np.flatnonzero(shipped.phase == 0)
    for index in [*rng.choice(late, 25, replace=False), *rng.choice(opening, 1)]:
        board = Board.from_moves(shipped.geometry, shipped.moves[index])
        np.testing.assert_array_equal(solver.move_scores(board), shipped.scores[index])


# -- the random split ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def random_split() -> LabelledPositions:
    return load_positions(RANDOM_POSITIONS, split="all")


def test_random_split_is_documented_and_split(random_split: LabelledPositions) -> None:
    meta = random_split.meta
    assert meta["complete"]
    assert meta["source"] == "random"
    assert random_split.geometry == Geometry(6, 7, 4)
    assert RANDOM_POSITIONS.stat().st_size < 1e6
    assert len(random_split) == meta["total"]
    assert meta["phases"] == load_positions(split="all").meta["phases"]  # the game split's
    for number, name in enumerate(random_split.phases):
        in_phase = random_split.phase == number
        assert (random_split.split[in_phase] == 1).sum() == meta["counts"][name]["test"] >= 100
        assert (random_split.split[in_phase] == 0).sum() == meta["counts"][name]["dev"] >= 100
        first, last = meta["phases"][name]
        plies = [len(m) for m, keep in zip(random_split.moves, in_phase, strict=True) if keep]
        assert first <= min(plies) <= max(plies) <= last
    keys = {canonical_key(random_split.geometry, moves) for moves in random_split.moves}
    assert len(keys) == len(random_split)  # distinct up to the mirror, across both splits
    readme = RANDOM_POSITIONS.with_name("README.md").read_text()
    assert f"`positions_random.npz`: {meta['total']} positions" in readme
    assert f"seed {meta['seed']}" in readme


def test_random_split_positions_are_open_games(random_split: LabelledPositions) -> None:
    for board in random_split.boards():
        assert not board.is_terminal()
        assert board.winner() is None


def test_random_split_is_held_out_from_the_game_split_and_the_teacher_data(
    random_split: LabelledPositions,
) -> None:
    geometry = random_split.geometry
    keys = set(canonical_keys(geometry, pad_moves(random_split.moves, geometry.cells)))
    games = load_positions(split="all")
    held_out = {"positions.npz": pad_moves(games.moves, geometry.cells)}
    for book in BOOKS.values():
        held_out[book.file.name] = TeacherSet.load(book.file).moves
    store = shipped_store()
    assert store is not None
    held_out["teacher_chunks.npz"] = store.moves
    for name, moves in held_out.items():
        assert not keys & set(canonical_keys(geometry, moves)), name
    # held out while the split was drawn: the teacher data of its day; the random books, made
    # later, hold the split out themselves (checked above)
    later = {"teacher_book_random.npz", "teacher_book_random_opening.npz"}
    assert set(random_split.meta["held_out"]) == set(held_out) - later


def test_random_split_labels_equal_the_solver(random_split: LabelledPositions) -> None:
    rng = np.random.default_rng(5)
    solver = Solver(random_split.geometry)
    later = np.flatnonzero(random_split.phase >= 1)  # cheap to solve
    for index in rng.choice(later, 12, replace=False):
        board = Board.from_moves(random_split.geometry, random_split.moves[index])
        np.testing.assert_array_equal(solver.move_scores(board), random_split.scores[index])


@pytest.mark.slow
def test_random_split_opening_labels_equal_the_solver(random_split: LabelledPositions) -> None:
    rng = np.random.default_rng(6)
    solver = Solver(random_split.geometry)
    for index in rng.choice(np.flatnonzero(random_split.phase == 0), 2, replace=False):
        board = Board.from_moves(random_split.geometry, random_split.moves[index])
        np.testing.assert_array_equal(solver.move_scores(board), random_split.scores[index])


def test_labelling_agrees_with_pons(pons_dir: Path) -> None:
    solver = Solver(Geometry(6, 7, 4))
    for name in ("Test_L3_R1", "Test_L2_R1"):
        for position in load_pons(pons_dir / name, limit=15):
            moves = [int(c) - 1 for c in position.moves]
            scores = label_position(solver, moves, None)
            assert scores[scores != ILLEGAL].max() == position.score


def test_evaluation_is_deterministic_for_a_seed(shipped: LabelledPositions) -> None:
    first = evaluate_policy("random", split="dev", seed=3).to_dict()
    assert first == evaluate_policy("random", split="dev", seed=3).to_dict()
    assert first != evaluate_policy("random", split="dev", seed=4).to_dict()
    assert first["split"] == "dev"
    assert set(first["phases"]) == set(shipped.phases)


def test_stronger_policies_make_fewer_mistakes() -> None:
    weak = evaluate_policy("random").overall
    strong = evaluate_policy("minimax:depth=4").overall
    assert strong.mistake_rate < weak.mistake_rate
    assert strong.perfect_rate > weak.perfect_rate


def test_load_refuses_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="split"):
        load_positions(split="train")
    with pytest.raises(FileNotFoundError):
        load_positions(tmp_path / "missing.npz")
    bad = tmp_path / "bad.npz"
    np.savez(bad, moves=np.zeros((1, 42)))
    with pytest.raises(ValueError, match="not a labelled-positions file"):
        load_positions(bad)


# -- the generator --------------------------------------------------------------------------------
@pytest.mark.slow
def test_generator_on_a_small_board(tmp_path: Path) -> None:
    out = tmp_path / "positions.npz"
    assert make_positions(["--rows", "4", "--columns", "5", "--inarow", "3", "--per-phase", "4",
                           "--opening", "3", "--seed", "1", "-o", str(out)]) == 0  # fmt: skip
    positions = load_positions(out, split="all")
    meta = positions.meta
    assert meta["complete"]
    assert meta["seed"] == 1
    assert "--per-phase 4" in meta["command"]
    assert meta["phases"] == {k: list(v) for k, v in phase_bounds(positions.geometry).items()}
    assert sum(meta["skipped"].values()) == 0
    assert len(positions) == 2 * (3 + 4 * 3)
    for moves, scores in zip(positions.moves, positions.scores, strict=True):
        np.testing.assert_array_equal(
            scores, brute_scores(Board.from_moves(positions.geometry, moves))
        )
    readme = (tmp_path / "README.md").read_text()
    assert "Tune on `dev` only" in readme
    assert "| opening |" in readme
    again = tmp_path / "again.npz"
    make_positions(["--rows", "4", "--columns", "5", "--inarow", "3", "--per-phase", "4",
                    "--opening", "3", "--seed", "1", "-o", str(again), "--no-readme"])  # fmt: skip
    assert load_positions(again, split="all").moves == positions.moves


def test_random_play_draws_open_games_and_leaves_out_what_it_is_told() -> None:
    geometry = Geometry(4, 5, 3)
    wanted = {"opening": 6, "early": 6, "middle": 6, "late": 6}
    first, stats = sample_random_positions(geometry, wanted, seed=3)
    assert stats["draws"] == stats["ended"] + stats["repeats"] + 24
    bounds = phase_bounds(geometry)
    for name, found in first.items():
        assert len(found) == 6
        for moves in found:
            assert bounds[name][0] <= len(moves) <= bounds[name][1]
            assert not Board.from_moves(geometry, moves).is_terminal()
    excluded = frozenset(canonical_key(geometry, moves) for moves in first["middle"][:3])
    second, stats = sample_random_positions(geometry, wanted, seed=3, exclude=excluded)
    assert stats["excluded"] >= 3
    keys = {canonical_key(geometry, moves) for found in second.values() for moves in found}
    assert not keys & excluded
    assert first["opening"] == second["opening"]  # drawn before the excluded ones


@pytest.mark.slow
def test_random_generator_on_a_small_board(tmp_path: Path) -> None:
    out = tmp_path / "positions_random.npz"
    game_section = "# Labelled positions for measuring play against the exact solver\n"
    (tmp_path / "README.md").write_text(f"{game_section}\nthe game split\n\n# Other\n\nkept\n")
    small = ["--random", "--rows", "4", "--columns", "5", "--inarow", "3", "--per-phase", "3",
             "--opening", "2", "--seed", "1", "-o", str(out)]  # fmt: skip
    assert make_positions(small) == 0
    positions = load_positions(out, split="all")
    assert positions.meta["source"] == "random"
    assert len(positions) == 2 * (2 + 3 * 3)
    for moves, scores in zip(positions.moves, positions.scores, strict=True):
        board = Board.from_moves(positions.geometry, moves)
        assert not board.is_terminal()
        np.testing.assert_array_equal(scores, brute_scores(board))
    readme = (tmp_path / "README.md").read_text()
    # its own section, after the game split's; the others kept
    titles = [line for line in readme.splitlines() if line.startswith("# ")]
    assert titles[1] == RANDOM_TITLE
    assert len(titles) == 3
    assert "the game split" in readme
    assert "kept" in readme
    assert "Tune on `dev` only" in readme
    assert make_positions([*small, "--readme-only"]) == 0
    assert (tmp_path / "README.md").read_text() == readme  # rewritten in place
    # a resumed run must draw the same candidates: other settings are refused
    with pytest.raises(RuntimeError, match="another candidates"):
        make_positions([*small[:-2], "--spare", "0.9", "-o", str(out), "--resume"])


def test_accuracy_command_reports_phases(capsys: pytest.CaptureFixture[str]) -> None:
    from connectx_gym.cli import main

    assert main(["accuracy", "onestep", "--split", "dev", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["sets"]["games"]
    assert result["split"] == "dev"
    assert result["overall"]["positions"] == len(load_positions(split="dev"))
    assert main(["accuracy", "onestep"]) == 0
    assert "| all |" in capsys.readouterr().out


def test_each_position_draws_from_its_own_seed() -> None:
    # An answer depends on its position's own seed only, so answering in any order is the same.
    positions = tiny_set(Geometry(4, 4, 3), games=6, seed=3)

    class Reversed:
        def map_positions(self, policy, geometry, jobs, who):
            from connectx_gym.policy import answer_position
            from connectx_gym.registry import make_policy

            player = make_policy(policy)
            answers = {job.index: answer_position(player, geometry, job, who) for job in jobs[::-1]}
            return (answers[job.index] for job in jobs)

    local = evaluate_policy("random", positions, seed=9).to_dict()
    assert evaluate_policy("random", positions, seed=9, executor=Reversed()).to_dict() == local


def test_accuracy_ray_without_ray_says_how_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from connectx_gym.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    assert main(["accuracy", "random", "--ray"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err]
    assert 'pip install -e ".[ray]"' in err
