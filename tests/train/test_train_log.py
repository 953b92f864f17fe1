"""``connectx train``'s output: progress lines on stderr and in the run's ``train.log`` (appended
by ``--resume``), the final panel's results on stdout, ``--quiet`` and ``--verbose``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")

from connectx_gym.cli import main
from connectx_train.trainer import train
from tests.train.test_train_resume import quiet, tiny

#: a line of train.log: date, time, level, message
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR) (.*)$")
#: a line of the final panel on stdout
PANEL_LINE = re.compile(r"^  (\S+) +score (\d\.\d{3}) \[95% CI (\d\.\d{3})-(\d\.\d{3})\]$")


def logged(path: Path) -> list[tuple[str, str]]:
    """(level, message) of each line of a log file; every line has the file's format."""
    lines = path.read_text().splitlines()
    found = [LOG_LINE.match(line) for line in lines]
    assert all(found), [line for line, match in zip(lines, found, strict=True) if not match]
    return [(match[1], match[2]) for match in found if match]


def panel(stdout: str) -> dict[str, float]:
    """The final panel's scores, parsed from stdout (which holds nothing else)."""
    found = [PANEL_LINE.match(line) for line in stdout.splitlines()]
    assert found, stdout
    assert all(found), stdout
    return {match[1]: float(match[2]) for match in found if match}


def test_train_logs_to_stderr_and_train_log_and_resume_appends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, settings = tmp_path / "run", tmp_path / "tiny.json"
    tiny(out).save(settings)
    assert main(["train", "--config", str(settings), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    printed = captured.err.splitlines()
    assert printed[0].startswith("device: ")
    assert f"report: {out / 'report.md'}" in printed
    first = logged(out / "train.log")
    assert [message for _, message in first] == printed  # the same lines, in the same order
    assert {level for level, _ in first} <= {"INFO", "WARNING"}
    assert set(panel(captured.out)) == {"random"}

    # a quiet session shows only its results, and its lines are added to the same file
    code = main(["train", "-q", "--resume", "--timesteps", "512", "--out", str(out)])
    assert code == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert set(panel(captured.out)) == {"random"}
    both = logged(out / "train.log")
    assert both[: len(first)] == first
    again = [message for _, message in both[len(first) :]]
    assert again[0].startswith("device: ")
    assert any(line.startswith(f"resuming {out} at step 384") for line in again)
    assert again[-1] == f"report: {out / 'report.md'}"


def test_verbose_adds_a_debug_line_per_rollout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, settings = tmp_path / "run", tmp_path / "tiny.json"
    tiny(out, timesteps=256, eval_every=0).save(settings)
    assert main(["train", "--verbose", "--config", str(settings), "--out", str(out)]) == 0
    printed = capsys.readouterr().err.splitlines()
    rollouts = [line for line in printed if line.startswith("debug: rollout ")]
    assert rollouts[0].startswith("debug: rollout 1: step 128, stage ")
    assert len(rollouts) == 2  # 256 steps, rollouts of 2 envs x 64 steps
    debug = [message for level, message in logged(out / "train.log") if level == "DEBUG"]
    assert [f"debug: {message}" for message in debug] == rollouts


def test_quiet_shows_the_warnings_of_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    train(tiny(out), log=quiet)
    pool = sorted((out / "snapshots").glob("step_*.npz"))
    pool[0].unlink()  # a snapshot of the self-play pool lost
    capsys.readouterr()
    assert main(["train", "-q", "--resume", "--out", str(out)]) == 0
    printed = capsys.readouterr().err.splitlines()
    assert len(printed) == 1, printed  # the warning alone, no progress line
    assert printed[0].startswith(f"warning: self-play pool: 1 of its {len(pool)} snapshots")
    assert pool[0].name in printed[0]
    assert ("WARNING", printed[0].removeprefix("warning: ")) in logged(out / "train.log")
