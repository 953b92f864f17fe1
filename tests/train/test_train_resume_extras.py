"""connectx_train.resume_extras: a checkpoint keeps the global random streams and the teacher
replay's optimizer and generator, so ``--resume`` goes on with them; an extras file from other
steps, a damaged one or none is left aside, saying so, and the run resumes as before."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("sb3_contrib")


from connectx_baselines.teacher_labels import make_teacher_set
from connectx_gym.bitboard import Geometry
from connectx_train.model import EXTRAS_FILE, env_seed, restore_extras, save_extras
from connectx_train.teacher import teacher_tensors
from connectx_train.teaching import TeacherReplay
from connectx_train.trainer import train
from tests.train.test_teacher import small_model
from tests.train.test_train_resume import arrays, tiny

SMALL = Geometry(4, 5, 3)


class ReplayOn:
    """A teacher replay on one model's policy."""

    def __init__(self, model: object, data: object) -> None:
        self.model, self.replay = model, TeacherReplay(data, batches=3, seed=11)

    def on_rollout_end(self) -> None:
        self.replay.replay(self.model.policy)


def replay_on(model: object, data: object) -> ReplayOn:
    return ReplayOn(model, data)


def parameters(model: object) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.policy.parameters()]


def test_a_replay_loaded_from_its_state_makes_the_same_updates(tmp_path: Path) -> None:
    data = teacher_tensors(make_teacher_set(SMALL, 60, seed=3, min_ply=1, exclude=()))
    first, second = small_model(tmp_path / "a"), small_model(tmp_path / "b")
    replay = replay_on(first, data)
    replay.on_rollout_end()
    replay.on_rollout_end()
    second.policy.load_state_dict(first.policy.state_dict())
    resumed = replay_on(second, data)
    resumed.replay.load_state_dict(replay.replay.state_dict())
    fresh = TeacherReplay(data, batches=3, seed=11)  # what a resume used to make
    assert fresh.state_dict()["optimizer"] is None
    replay.on_rollout_end()
    resumed.on_rollout_end()
    for mine, theirs in zip(parameters(first), parameters(second), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
    # three replays of 3 batches
    assert resumed.replay.optimizer.state_dict()["state"][0]["step"] == 9


def test_extras_restore_the_streams_saved_with_their_checkpoint(tmp_path: Path) -> None:
    path, lines = tmp_path / EXTRAS_FILE, []
    torch.manual_seed(1)
    np.random.seed(1)  # noqa: NPY002 - the legacy generator SB3 draws from
    save_extras(path, 640, None)
    expected = torch.rand(3), np.random.random(3)  # noqa: NPY002
    torch.manual_seed(2)
    np.random.seed(2)  # noqa: NPY002
    assert restore_extras(path, 640, None, lines.append)
    torch.testing.assert_close(torch.rand(3), expected[0])
    assert np.array_equal(np.random.random(3), expected[1])  # noqa: NPY002
    assert lines == []
    assert env_seed(5, 640) == env_seed(5, 640) != env_seed(5, 768)
    assert 0 <= env_seed(5, 640) < 2**31


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing", "no checkpoint_extras.pt in the run (saved before it existed)"),
        ("other steps", "saved at step 512, the checkpoint is at 640"),
        ("garbage", "left aside"),
        ("wrong content", "left aside"),
        ("not weights only", "UnpicklingError"),
    ],
)
def test_extras_that_do_not_belong_are_left_aside(
    tmp_path: Path, damage: str, message: str
) -> None:
    path, lines = tmp_path / EXTRAS_FILE, []
    if damage == "other steps":
        save_extras(path, 512, None)
    elif damage == "garbage":
        path.write_bytes(b"not a torch file")
    elif damage == "wrong content":  # a readable file whose generator state is not one
        save_extras(path, 640, None)
        torch.save({**torch.load(path, weights_only=True), "torch_rng": torch.zeros(3)}, path)
    elif damage == "not weights only":  # torch explains over many lines; the log keeps one
        torch.save({"timesteps": 640, "path": Path("elsewhere")}, path)
    state = torch.get_rng_state()
    assert not restore_extras(path, 640, None, lines.append)
    assert len(lines) == 1
    assert message in lines[0]
    assert lines[0].endswith("random streams seeded afresh")
    assert "\n" not in lines[0]
    assert torch.equal(torch.get_rng_state(), state)  # untouched


def test_a_damaged_replay_state_leaves_the_streams_as_they_were(tmp_path: Path) -> None:
    data = teacher_tensors(make_teacher_set(SMALL, 30, seed=3, min_ply=1, exclude=()))
    path, lines, replay = tmp_path / EXTRAS_FILE, [], TeacherReplay(data, 2, seed=11)
    save_extras(path, 640, None)
    torch.save({**torch.load(path, weights_only=True), "replay": {"generator": 0}}, path)
    torch.rand(3), np.random.random(3)  # noqa: NPY002 - move both streams past the saved ones
    states = torch.get_rng_state(), np.random.get_state(), replay.generator.get_state()  # noqa: NPY002
    assert not restore_extras(path, 640, replay, lines.append)
    assert len(lines) == 1
    assert "left aside" in lines[0]
    assert torch.equal(torch.get_rng_state(), states[0])  # the streams set before it, undone
    assert np.array_equal(np.random.get_state()[1], states[1][1])  # noqa: NPY002
    assert torch.equal(replay.generator.get_state(), states[2])
    assert replay.state_dict()["optimizer"] is None


def test_one_checkpoint_resumes_to_the_same_weights_and_uses_its_extras(tmp_path: Path) -> None:
    teacher = {"teacher_positions": 40, "teacher_epochs": 1, "teacher_replay": 2}
    teacher |= {"teacher_book": "none"}
    board = {"rows": 4, "columns": 5, "inarow": 3, "panel": ("random",), "curriculum": ("random",)}
    config = tiny(tmp_path / "run", teacher_workers=1, timesteps=128, **teacher, **board)
    train(config, log=lambda _: None)
    saved = torch.load(tmp_path / "run" / EXTRAS_FILE, weights_only=True)
    assert saved["timesteps"] == 128
    assert saved["replay"]["optimizer"]["state"][0]["step"] == 2  # one rollout's 2 batches
    copies = {}
    for name in ("one", "two", "without"):
        shutil.copytree(tmp_path / "run", tmp_path / name)
    (tmp_path / "without" / EXTRAS_FILE).unlink()
    for name in ("one", "two", "without"):
        lines: list[str] = []
        more = dataclasses.replace(config, out=str(tmp_path / name), resume=True, timesteps=256)
        train(more, log=lines.append)
        copies[name] = (arrays(tmp_path / name / "final.npz"), lines)
    assert copies["one"][0] == copies["two"][0]
    assert not any(EXTRAS_FILE in line for line in copies["one"][1])
    assert any(f"no {EXTRAS_FILE}" in line for line in copies["without"][1])
    assert copies["without"][0] != copies["one"][0]  # re-seeded streams and a fresh Adam


def test_extras_of_another_run_at_the_same_step_are_left_aside(tmp_path: Path) -> None:
    for run in ("one", "two"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "checkpoint.zip").write_bytes(run.encode() * 100)
    save_extras(tmp_path / "one" / EXTRAS_FILE, 640, None)
    shutil.copy(tmp_path / "one" / EXTRAS_FILE, tmp_path / "two" / EXTRAS_FILE)
    lines: list[str] = []
    assert not restore_extras(tmp_path / "two" / EXTRAS_FILE, 640, None, lines.append)
    assert len(lines) == 1
    assert "another checkpoint.zip" in lines[0]
    assert lines[0].startswith(f"left aside {tmp_path / 'two' / EXTRAS_FILE}")
    assert restore_extras(tmp_path / "one" / EXTRAS_FILE, 640, None, lines.append)


def test_a_file_that_is_not_weights_only_gets_no_unsafe_advice(tmp_path: Path) -> None:
    path, lines = tmp_path / EXTRAS_FILE, []
    torch.save({"timesteps": 640, "path": Path("elsewhere")}, path)
    assert not restore_extras(path, 640, None, lines.append)
    assert "not a weights-only file" in lines[0]
    assert "weights_only" not in lines[0]
    assert "False" not in lines[0]
    assert "can still be loaded" not in lines[0]
    assert "safe_globals" not in lines[0]
