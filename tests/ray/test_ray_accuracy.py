"""Accuracy runs on a local Ray instance (2 CPUs) equal the local run's; failures are clean."""

from __future__ import annotations

import json

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")

from connectx_baselines.perfect_play import evaluate_policy, load_positions  # noqa: E402
from connectx_gym.cli import main  # noqa: E402
from connectx_gym.policy import Policy  # noqa: E402
from connectx_gym.ray_executor import RayExecutor, RayPositionError  # noqa: E402


@pytest.fixture(scope="module")
def executor():
    with RayExecutor(num_cpus=2) as ray_executor:
        yield ray_executor


@pytest.fixture(scope="module")
def subset():
    dev = load_positions(split="dev")
    return dev.subset(np.arange(len(dev)) % 12 == 0)  # 60 positions, every phase


@pytest.mark.parametrize("policy", ["random", "onestep", "minimax:depth=2~0.3"])
def test_same_result_as_local(executor, subset, policy):
    local = evaluate_policy(policy, subset, seed=11)
    remote = evaluate_policy(policy, subset, seed=11, executor=executor)
    assert remote.to_dict() == local.to_dict()
    assert remote.overall.positions == len(subset)


def test_chunks_do_not_change_answers(executor, subset):
    local = evaluate_policy("random", subset, seed=3).to_dict()

    class OneByOne:
        def map_positions(self, policy, geometry, jobs, who):
            return executor.map_positions(policy, geometry, jobs, who, chunk=1)

    assert evaluate_policy("random", subset, seed=3, executor=OneByOne()).to_dict() == local


def test_raising_policy_is_reported_with_its_position(executor, subset):
    class Broken(Policy):
        name = "broken"

        def act(self, board, rng):
            if board.moves >= 30:
                raise ValueError("boom")
            return board.legal_moves()[0]

    first = next(i for i, moves in enumerate(subset.moves) if len(moves) >= 30)
    with pytest.raises(RayPositionError, match=rf"position {first} .*ValueError: boom") as info:
        evaluate_policy(Broken(), subset, executor=executor)
    assert info.value.position == first


def test_cli_json_equals_local(executor, capsys):
    outputs = []
    for extra in ([], ["--ray"]):
        assert main(["accuracy", "random", "--split", "dev", "--seed", "5", "--json", *extra]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1]


def test_bad_address_and_pons_are_one_line_errors(capsys):
    status = main(["accuracy", "random", "--ray", "127.0.0.1:1"])
    err = capsys.readouterr().err.strip()
    assert status != 0
    assert err.splitlines() == [err]
    assert "no Ray cluster at 127.0.0.1:1" in err
    status = main(["accuracy", "random", "--pons", "x", "--ray"])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert err == "connectx accuracy: error: --ray works on the labelled positions, not with --pons"
