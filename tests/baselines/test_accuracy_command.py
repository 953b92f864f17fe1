"""``connectx accuracy``: the two labelled splits side by side, one file, Pons' sets per set."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import pytest

import connectx_baselines.solver as solver_module
from connectx_baselines.perfect_play import evaluate_policy, evaluate_sets
from connectx_baselines.position_sets import (
    DEFAULT_POSITIONS,
    PONS_SETS,
    RANDOM_POSITIONS,
    load_positions,
)
from connectx_baselines.solver import solve
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.cli import main


def accuracy(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["accuracy", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


def test_the_default_reports_both_splits_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = accuracy(capsys, "onestep", "--split", "dev", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert list(result["sets"]) == ["games", "random"]
    for name, path in (("games", DEFAULT_POSITIONS), ("random", RANDOM_POSITIONS)):
        alone = evaluate_policy("onestep", split="dev", path=path).to_dict()
        assert result["sets"][name] == alone  # the same numbers as the one-file measure
        assert alone["overall"]["positions"] == len(load_positions(path, split="dev"))
        assert alone["split"] == "dev"
    code, out, err = accuracy(capsys, "onestep", "--split", "dev")
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("| phase"))
    assert "games: positions" in header
    assert "random: positions" in header
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    games, random = result["sets"]["games"]["overall"], result["sets"]["random"]["overall"]
    # the "all" row: both sets' counts and rates, each with its interval
    cells = [cell.strip() for cell in rows["all"].split("|")[2:-1]]
    assert cells[0] == str(games["positions"])
    assert cells[1].startswith(f"{games['mistake_rate']:.1%} (")
    assert cells[3] == str(random["positions"])
    assert cells[5].startswith(f"{random['perfect_rate']:.1%} (")
    assert set(rows) >= {"opening", "early", "middle", "late", "all"}


def test_a_set_results_table_lines_up_the_phases() -> None:
    result = evaluate_sets("onestep", split="test")
    lines = result.table().splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert len({line.count("|") for line in table}) == 1  # every row has all the cells
    assert len(table) == 2 + 5  # header, rule, four phases and all


def test_one_positions_file_keeps_its_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = accuracy(capsys, "onestep", "--positions", str(RANDOM_POSITIONS), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["split"] == "test"
    assert result["overall"]["positions"] == len(load_positions(RANDOM_POSITIONS))


def write_pons(path: Path, lines: list[str]) -> None:
    """Pons' format: 1-indexed columns, then the side to move's score (our solver's)."""
    scored = []
    for moves in lines:
        board = Board.from_moves(Geometry(), [int(c) - 1 for c in moves])
        scored.append(f"{moves} {solve(board)}")
    path.write_text("\n".join(scored) + "\n")


def test_a_pons_directory_is_reported_per_set_in_pons_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_pons(tmp_path / "Test_L2_R1", ["44455554221", "3333444"])
    write_pons(tmp_path / "Test_L3_R1", ["1234567712345", "44455554221", "3333444"])
    (tmp_path / "notes.txt").write_text("not a set\n")
    code, out, err = accuracy(capsys, "solver", "--pons", str(tmp_path), "--limit", "2", "--json")
    assert code == 0, err
    sets = json.loads(out)["sets"]
    assert list(sets) == ["End-Easy", "Middle-Easy"]  # L3_R1 first, as Pons orders them
    assert [s["positions"] for s in (sets["End-Easy"]["overall"], sets["Middle-Easy"]["overall"])] \
        == [2, 2]  # fmt: skip
    assert sets["End-Easy"]["overall"]["mistakes"] == 0
    code, out, err = accuracy(capsys, "random", "--pons", str(tmp_path), "--limit", "2")
    assert code == 0, err
    assert "| set | positions | mistakes (95% CI) | perfect moves (95% CI) | unsolved |" in out
    assert [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")][
        1:
    ] == ["End-Easy", "Middle-Easy"]


def test_pons_and_positions_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cases = [
        (["--pons", str(tmp_path / "missing")], "no such Pons file or directory"),
        (["--pons", str(tmp_path)], "holds no Pons benchmark file"),
        (["--pons", str(tmp_path), "--positions", str(DEFAULT_POSITIONS)], "give one"),
        (["--node-limit", "1000"], "judging of --pons"),
        (["--time-limit", "1"], "judging of --pons"),
    ]
    for args, message in cases:
        code, _, err = accuracy(capsys, "random", *args)
        assert code != 0
        assert err.splitlines() == [err]
        assert message in err


def test_pons_sets_of_the_shared_folder(capsys: pytest.CaptureFixture[str], pons_dir: Path) -> None:
    code, out, err = accuracy(
        capsys, "onestep", "--pons", str(pons_dir), "--limit", "2", "--time-limit", "2", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert list(result["sets"]) == list(PONS_SETS.values())
    for name in PONS_SETS.values():
        overall = result["sets"][name]["overall"]
        assert overall["positions"] + overall["unsolved"] == 2  # solved within 2 s, or counted
        assert 0 <= overall["mistakes"] <= overall["positions"]
    assert result["sets"]["End-Easy"]["overall"]["positions"] == 2  # end positions solve at once
    code, out, err = accuracy(capsys, "onestep", "--pons", str(pons_dir / "Test_L3_R1"),
                              "--limit", "2")  # fmt: skip
    assert code == 0, err
    assert "| all | 2 |" in out  # one file: its own report, as before


def test_a_node_limit_settles_the_same_positions_on_any_machine(
    capsys: pytest.CaptureFixture[str], pons_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def judged(name: str, limit: str, nodes: str) -> dict[str, int]:
        # each command starts with an empty transposition table, as a new process does (a warm
        # table, like the one earlier tests in this process filled, proves more in as many nodes)
        monkeypatch.setattr(solver_module, "_solvers", OrderedDict())
        code, out, err = accuracy(capsys, "onestep", "--pons", str(pons_dir / name),
                                  "--limit", limit, "--node-limit", nodes, "--json")  # fmt: skip
        assert code == 0, err
        overall: dict[str, int] = json.loads(out)["overall"]
        return overall

    assert judged("Test_L1_R3", "3", "1")["unsolved"] == 3  # one node proves no opening position
    first = judged("Test_L3_R1", "4", "30000000")
    assert (first["positions"], first["unsolved"]) == (4, 0)
    assert judged("Test_L3_R1", "4", "30000000") == first
