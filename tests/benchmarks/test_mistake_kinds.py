"""``benchmarks/mistake_kinds.py``: each kind on a position built for it, and its counts equal
``connectx accuracy``'s mistakes on the same positions and seed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from connectx_baselines.perfect_play import POSITION_SETS, evaluate_policy, load_positions
from connectx_gym.bitboard import Board, Geometry

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "mistake_kinds", ROOT / "benchmarks" / "mistake_kinds.py"
)
assert _spec is not None
assert _spec.loader is not None
mistake_kinds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mistake_kinds)

GEOMETRY = Geometry(6, 7, 4)


def test_each_kind_on_a_position_built_for_it() -> None:
    # mark 1 has three in column 0 and is to move: anything but column 0 misses the win
    three_up = Board.from_moves(GEOMETRY, [0, 1, 0, 1, 0, 2])
    assert mistake_kinds.mistake_kind(three_up, 3) == "missed a win in one"
    # mark 2 to move with mark 1's open three in column 0: not blocking leaves a win in one
    threat = Board.from_moves(GEOMETRY, [0, 1, 0, 1, 0])
    assert not any(threat.is_winning_move(c) for c in threat.open_columns())
    assert mistake_kinds.mistake_kind(threat, 4) == "left a win in one"
    assert mistake_kinds.mistake_kind(threat, -1) == "deeper"  # an illegal answer
    # nothing in one either way: a losing move there is deeper
    quiet = Board.from_moves(GEOMETRY, [3])
    assert mistake_kinds.mistake_kind(quiet, 0) == "deeper"


def test_the_counts_are_connectx_accuracys_mistakes() -> None:
    for name in POSITION_SETS:
        rows = mistake_kinds.sort_mistakes("onestep", name, "dev", seed=3, limit=None)
        result = evaluate_policy("onestep", load_positions(POSITION_SETS[name], "dev"), seed=3)
        assert rows["overall"]["positions"] == result.overall.positions
        assert rows["overall"]["mistakes"] == result.overall.mistakes
        for phase, counts in result.phases.items():
            assert rows[phase]["mistakes"] == counts.mistakes
        for row in rows.values():
            assert row["mistakes"] == sum(row[kind] for kind in mistake_kinds.KINDS)
        # onestep takes every win in one (it may drop a stone under the opponent's winning cell)
        assert rows["overall"]["missed a win in one"] == 0
        assert rows["overall"]["deeper"] > 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [("nosuch", "unknown policy 'nosuch'"), ("runs/none.npz", "no such model or agent file")],
)
def test_a_bad_policy_is_one_line_before_any_work(
    spec: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        mistake_kinds.main([spec])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert message in error
    assert "Traceback" not in error
