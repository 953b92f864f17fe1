"""Games on a local Ray instance (2 CPUs) equal the local run's; failures are reported cleanly."""

from __future__ import annotations

import json
import os

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")

from connectx_gym.cli import main  # noqa: E402
from connectx_gym.match import play_match  # noqa: E402
from connectx_gym.ray_executor import RayExecutor, RayGameError  # noqa: E402


@pytest.fixture(scope="module")
def executor():
    with RayExecutor(num_cpus=2) as ray_executor:
        yield ray_executor


def test_same_result_and_records_as_local(executor, tmp_path):
    local = play_match("random", "onestep", games=5, seed=7, save_games=tmp_path / "local.jsonl")
    remote = play_match(
        "random", "onestep", games=5, seed=7, save_games=tmp_path / "ray.jsonl", executor=executor
    )
    assert remote.records == local.records
    assert (remote.wins, remote.draws, remote.losses) == (local.wins, local.draws, local.losses)
    assert (tmp_path / "ray.jsonl").read_text() == (tmp_path / "local.jsonl").read_text()


def test_actors_run_at_the_niceness_of_the_command(executor):
    # Ray's own default is nice 15, below every ordinary process on the machine
    @ray.remote
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote()) == os.nice(0)


def test_raising_policy_is_reported_with_its_game(executor):
    def broken(board, rng):
        raise ValueError("boom")

    with pytest.raises(RayGameError, match=r"game 0 .*ValueError: boom") as info:
        play_match("random", broken, games=3, seed=0, openings="none", executor=executor)
    assert info.value.game == 0


def test_bad_address_is_one_line_and_nonzero(capsys):
    status = main(["evaluate", "random", "onestep", "--games", "2", "--ray", "127.0.0.1:1"])
    err = capsys.readouterr().err.strip()
    assert status != 0
    assert len(err.splitlines()) == 1
    assert "no Ray cluster at 127.0.0.1:1" in err


def test_cli_json_equals_local(executor, capsys):
    keys = ("games", "wins", "draws", "losses", "score", "ci95", "illegal_a", "illegal_b")
    outputs = []
    for extra in ([], ["--ray"]):
        assert main(["evaluate", "random", "onestep", "--games", "4", "--json", *extra]) == 0
        data = json.loads(capsys.readouterr().out)
        outputs.append({k: data[k] for k in keys})
    assert outputs[0] == outputs[1]
