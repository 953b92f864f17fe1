"""connectx_train.teacher: the targets of a teacher set, supervised passes that learn them, the
replay during PPO, and a run with a teacher end to end (labels cached, resumable)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO

import connectx_train.teacher as train_teacher
from connectx_baselines.teacher_book import BOOKS, load_book
from connectx_baselines.teacher_labels import TeacherSet
from connectx_train.config import PRESETS, TrainConfig, preset_config
from connectx_train.config_cli import add_arguments, config_from_args
from connectx_train.config_types import BookUse, parse_teacher_books
from connectx_train.finish import markdown_report
from connectx_train.model import new_model
from connectx_train.opponents import make_vec_env
from connectx_train.teacher import (
    TEACHER_PROGRESS_FILE,
    TeacherTensors,
    batch_losses,
    load_teacher,
    policy_outputs,
    pretrain_policy,
    seconds_per_batch,
    teacher_tensors,
)
from connectx_train.trainer import RunInterruptedError, train
from tests.train.test_train_resume import arrays, tiny


def tiny_teacher_config(**settings: Any) -> TrainConfig:
    """A run on the small board that labels 40 positions of its own in one process."""
    return TrainConfig(
        rows=4, columns=5, inarow=3, teacher_positions=40, teacher_workers=1, **settings
    )


def assert_copies(
    data: TeacherTensors, first: int, taught: TeacherTensors, count: int, copies: int
) -> None:
    """``data`` holds ``copies`` copies of ``taught``'s first ``count`` positions from ``first``."""
    for copy in range(copies):
        start = first + copy * count
        for name in ("observations", "masks", "good", "values"):
            torch.testing.assert_close(
                getattr(data, name)[start : start + count], getattr(taught, name)[:count]
            )


def small_model(tmp_path: Path) -> MaskablePPO:
    config = TrainConfig(
        rows=4, columns=5, inarow=3, n_envs=2, channels=16, features_dim=32, seed=2
    )
    return new_model(config, make_vec_env(config), tmp_path)


def test_targets_are_the_value_keeping_moves(small_set: TeacherSet) -> None:
    data = teacher_tensors(small_set)
    assert data.observations.shape == (len(small_set), 2, 4, 5)
    for index, (board, values) in enumerate(zip(small_set.boards(), small_set.values, strict=True)):
        legal = board.legal_mask()
        best = values[legal].max()
        np.testing.assert_array_equal(data.masks[index].numpy(), legal)
        np.testing.assert_array_equal(data.good[index].numpy(), legal & (values == best))
        assert data.values[index].item() == best
        np.testing.assert_array_equal(data.observations[index].numpy(), board.to_planes())


def test_mirrored_losses_equal_the_losses_of_mirrored_positions(
    small_set: TeacherSet, tmp_path: Path
) -> None:
    data = teacher_tensors(small_set)
    flipped = dataclasses.replace(
        data,
        observations=data.observations.flip(-1),
        masks=data.masks.flip(-1),
        good=data.good.flip(-1),
    )
    policy = small_model(tmp_path).policy
    index = torch.arange(32)
    with torch.no_grad():
        mirrored = batch_losses(policy, data, index, mirror=True)
        direct = batch_losses(policy, flipped, index, mirror=False)
    for a, b in zip(mirrored, direct, strict=True):
        assert torch.isclose(a, b)


def test_supervised_passes_learn_the_teacher(small_set: TeacherSet, tmp_path: Path) -> None:
    data = teacher_tensors(small_set)
    policy = small_model(tmp_path).policy
    index = torch.arange(len(data))

    def argmax_keeps_value() -> float:
        with torch.no_grad():
            logits, _ = policy_outputs(policy, data.observations)
        choice = logits.masked_fill(~data.masks, -1e9).argmax(dim=1)
        return data.good[index, choice].float().mean().item()

    with torch.no_grad():
        before = batch_losses(policy, data, index, mirror=False)
    accuracy_before = argmax_keeps_value()
    summary = pretrain_policy(
        policy, data, epochs=30, batch_size=32, learning_rate=3e-3, seed=0, log=lambda _: None
    )
    with torch.no_grad():
        after = batch_losses(policy, data, index, mirror=False)
    assert after[0] < 0.6 * before[0]
    assert after[1] < before[1]
    assert argmax_keeps_value() > max(0.8, accuracy_before + 0.15)
    assert summary["epoch"] == 30


def test_the_timed_batches_run_where_the_policy_is(
    small_set: TeacherSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The batches timed to plan the passes ran on a copy of the policy with the positions left
    # on the CPU: the first default run on a GPU stopped there with a device mismatch.
    data = teacher_tensors(small_set)
    policy = small_model(tmp_path).policy
    moved: list[torch.device] = []
    to = TeacherTensors.to

    def spy(self: TeacherTensors, device: torch.device) -> TeacherTensors:
        moved.append(torch.device(device))
        return to(self, device)

    monkeypatch.setattr(TeacherTensors, "to", spy)
    assert seconds_per_batch(policy, data, 32, batches=1) > 0
    assert moved == [policy.device]


def test_a_run_with_a_teacher_labels_once_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = tiny(
        out, teacher_positions=30, teacher_epochs=2, teacher_replay=2, teacher_workers=1,
        teacher_book="opening:1:30",  # a book's few positions beside the run's own, not all books
    )  # fmt: skip
    logs: list[str] = []
    report = train(config, log=logs.append)
    assert any("teaching the policy" in line for line in logs)
    assert TeacherSet.load(out / "teacher.npz").values.shape[1] == 7
    assert report["perfect_play"]["split"] == "test"
    assert 0 <= report["perfect_play"]["overall"]["mistake_rate"] <= 1
    assert "Against perfect play" in (out / "report.md").read_text()
    assert f"in a row; seed {config.seed};" in (out / "report.md").read_text()
    # A run taught another seed's positions says so on the same line.
    saved = json.loads((out / "report.json").read_text())
    saved["config"]["teacher_seed"] = config.seed + 1
    named = f"seed {config.seed} (teacher positions of seed {config.seed + 1});"
    assert named in markdown_report(saved)
    state = json.loads((out / "state.json").read_text())
    assert all("mistake_rate" in e for e in state["evaluations"])
    # More steps on --resume: the cached labels are read back, not labelled again.
    logs.clear()
    train(dataclasses.replace(config, resume=True, timesteps=512), log=logs.append)
    assert not any("labelling" in line for line in logs)
    assert not any("teaching the policy" in line for line in logs)


def interrupt_at(line_start: str) -> Callable[[str], None]:
    """A log that raises ``KeyboardInterrupt`` (Ctrl-C) at the first line starting so."""

    def log(line: str) -> None:
        if line.startswith(line_start):
            raise KeyboardInterrupt

    return log


def test_interrupted_passes_go_on_to_the_same_network(
    small_set: TeacherSet, tmp_path: Path
) -> None:
    data = teacher_tensors(small_set)
    settings = {"epochs": 3, "batch_size": 32, "learning_rate": 3e-3, "seed": 4}
    whole = small_model(tmp_path).policy
    pretrain_policy(whole, data, **settings, log=lambda _: None, progress=tmp_path / "whole.pt")
    progress = tmp_path / "parts.pt"
    cut = small_model(tmp_path).policy
    with pytest.raises(KeyboardInterrupt):  # after pass 2 is logged, before it is saved
        pretrain_policy(
            cut, data, **settings, log=interrupt_at("teacher epoch 2/"), progress=progress
        )
    assert torch.load(progress, weights_only=True)["epoch"] == 1
    lines: list[str] = []
    again = small_model(tmp_path).policy
    summary = pretrain_policy(again, data, **settings, log=lines.append, progress=progress)
    assert lines[0] == f"going on from teacher epoch 1/3 saved in {progress}"
    passes = [line.split(":")[0] for line in lines[1:] if line.startswith("teacher epoch")]
    assert passes == ["teacher epoch 2/3", "teacher epoch 3/3"]
    # between them, progress within the passes with the time left
    assert any(line.startswith("teacher pass 2/3:") and "left" in line for line in lines)
    assert summary["epoch"] == 3
    assert summary["earlier_seconds"] > 0
    for name, tensor in whole.state_dict().items():
        assert torch.equal(tensor, again.state_dict()[name]), name


def test_passes_saved_otherwise_are_not_reused(small_set: TeacherSet, tmp_path: Path) -> None:
    data = teacher_tensors(small_set)
    settings = {"epochs": 1, "batch_size": 32, "learning_rate": 3e-3, "seed": 4}
    progress = tmp_path / "progress.pt"
    policy = small_model(tmp_path).policy
    pretrain_policy(policy, data, **settings, log=lambda _: None, progress=progress)
    relabelled = dataclasses.replace(data, values=-data.values)  # same size, other labels
    for changes, other_data in (
        ({"settings": {"channels": 8}}, data),
        ({"seed": 5}, data),
        ({"epochs": 2}, data),
        ({}, relabelled),
    ):
        lines: list[str] = []
        (tmp_path / "copy.pt").write_bytes(progress.read_bytes())
        summary = pretrain_policy(
            small_model(tmp_path).policy,
            other_data,
            **{**settings, **changes},
            log=lines.append,
            progress=tmp_path / "copy.pt",
        )
        assert lines[0].endswith("with other settings or positions; teaching from the start")
        assert summary["earlier_seconds"] == 0
    progress.write_bytes(b"not a torch file")
    lines = []
    pretrain_policy(policy, data, **settings, log=lines.append, progress=progress)
    assert lines[0].startswith(f"cannot read the teacher passes saved in {progress} (")
    assert lines[0].endswith("); teaching from the start")
    assert torch.load(progress, weights_only=True)["epoch"] == 1  # written anew


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("no optimizer", "are damaged (no optimizer)"),
        ("wrong optimizer", "are damaged ("),
        ("not weights only", "cannot read the teacher passes saved in"),
    ],
)
def test_damaged_passes_start_over_and_say_so(
    small_set: TeacherSet, tmp_path: Path, damage: str, message: str
) -> None:
    data = teacher_tensors(small_set)
    settings = {"epochs": 1, "batch_size": 32, "learning_rate": 3e-3, "seed": 4}
    progress = tmp_path / "progress.pt"
    fresh = pretrain_policy(
        small_model(tmp_path).policy, data, **settings, log=lambda _: None, progress=progress
    )
    saved = torch.load(progress, weights_only=True)
    if damage == "no optimizer":  # the right key, a field missing
        del saved["optimizer"]
    elif damage == "wrong optimizer":  # the right key, a state that does not fit the network
        saved["optimizer"] = {"state": {}, "param_groups": []}
    else:
        saved["path"] = Path("elsewhere")
    torch.save(saved, progress)
    lines: list[str] = []
    policy = small_model(tmp_path).policy
    again = pretrain_policy(policy, data, **settings, log=lines.append, progress=progress)
    assert message in lines[0]
    assert lines[0].endswith("teaching from the start")
    assert "weights_only" not in lines[0]
    assert "can still be loaded" not in lines[0]  # torch's advice to load unsafely
    assert "safe_globals" not in lines[0]
    assert again["earlier_seconds"] == 0
    assert again["actor_loss"] == fresh["actor_loss"]  # the same passes, from the start
    assert "optimizer" in torch.load(progress, weights_only=True)  # written anew


def test_a_run_killed_while_teaching_goes_on_to_the_same_weights(tmp_path: Path) -> None:
    changes = {"teacher_positions": 30, "teacher_epochs": 3, "teacher_replay": 2}
    changes |= {"teacher_book": "none"}
    whole = train(tiny(tmp_path / "whole", teacher_workers=1, **changes), log=lambda _: None)
    out = tmp_path / "cut"
    out.mkdir()
    (out / "teacher.npz").write_bytes((tmp_path / "whole" / "teacher.npz").read_bytes())
    config = tiny(out, teacher_workers=1, **changes)
    with pytest.raises(RunInterruptedError, match=r"passes done are kept.*same command again"):
        train(config, log=interrupt_at("teacher epoch 3/"))
    assert (out / TEACHER_PROGRESS_FILE).is_file()
    assert not (out / "checkpoint.zip").exists()
    lines: list[str] = []
    # another time limit and thread count are one session's: the passes are still reused
    cut = train(dataclasses.replace(config, max_minutes=60, torch_threads=2), log=lines.append)
    assert any(line.startswith("going on from teacher epoch 2/3") for line in lines)
    assert not (out / TEACHER_PROGRESS_FILE).exists()  # the first checkpoint holds the passes
    assert arrays(out / "final.npz") == arrays(tmp_path / "whole" / "final.npz")
    assert cut["evaluations"] == whole["evaluations"]


def test_the_shipped_books_hold_every_position_a_preset_reads() -> None:
    # A preset pins how many of a growing book's positions it teaches; a book shorter than that
    # would teach fewer, and the preset would no longer be the recipe of its record.
    for name in PRESETS:
        config = preset_config(name)
        for use in parse_teacher_books(config.teacher_book):
            book = load_book(config.geometry, BOOKS[use.name].file)
            assert book is not None, (name, use.name)
            assert len(book) >= (use.first or 1), (name, use)


def test_presets_are_valid_configs() -> None:
    for name in PRESETS:
        preset_config(name).validate()
    strong = preset_config("strong-v1")
    assert strong.teacher_positions > 0
    assert strong.channels > TrainConfig().channels
    # The default keeps the parts of the growing books that made its README run: two copies of
    # the opening book's first 1,929 positions, the early book's first 27,278 once, the middle
    # book's 18,916 once, the random book's 21,499 once. The opening book weighs more in the
    # strong-v1 run's larger teacher set (three copies of all of it), which has no middle book.
    assert parse_teacher_books(TrainConfig().teacher_book) == (
        BookUse("opening", 2, 1929),
        BookUse("early", 1, 27278),
        BookUse("middle", 1, 18916),
        BookUse("random", 1, 21499),
    )
    assert parse_teacher_books(strong.teacher_book) == (
        BookUse("opening", 3),
        BookUse("early", 1, 27278),
    )
    # The network and length of the README's default run (docs/experiments/default_report.md).
    default = TrainConfig()
    assert (default.channels, default.blocks, default.timesteps) == (64, 2, 300_000)
    # --preset long: the same run with the million PPO steps it had before, and no time bound.
    long = preset_config("long")
    assert (long.timesteps, long.max_minutes) == (1_000_000, 0)
    same = {"out": default.out, "timesteps": default.timesteps, "max_minutes": default.max_minutes}
    assert dataclasses.replace(long, **same) == default
    assert (strong.channels, strong.blocks, strong.timesteps) == (96, 3, 800_000)
    # Unbounded: a session's bound would cut its hour of supervised passes on 2 CPU cores to
    # the teacher's share, and the preset would no longer be the recipe that made ppo-v1.
    assert strong.max_minutes == 0
    # --preset strong-v2 goes on from ppo-v1 (the same network) with the random book as well,
    # its whole teacher set taught however short its PPO; --preset strong-v3 repeats it from
    # ppo-v2 with the random book eight times as large, nothing else changed but the seed;
    # --preset strong repeats that from ppo-v3, the opening and early books taught more often
    again = preset_config("strong-v2")
    assert (again.init_weights, again.channels, again.blocks) == ("ppo-v1", 96, 3)
    assert "random" in {use.name for use in parse_teacher_books(again.teacher_book)}
    assert not again.scale_teacher
    assert again.max_minutes == 0
    third = preset_config("strong-v3")
    assert third.init_weights == "ppo-v2"
    books = {use.name: use for use in parse_teacher_books(third.teacher_book)}
    assert books["random"] == BookUse("random", 1, 171_425)
    changed = {"out", "seed", "init_weights", "teacher_book"}
    assert dataclasses.replace(third, **{key: getattr(again, key) for key in changed}) == again
    latest = preset_config("strong")
    assert latest.init_weights == "ppo-v3"
    books = {use.name: use for use in parse_teacher_books(latest.teacher_book)}
    assert (books["opening"].copies, books["early"].copies) == (3, 2)
    assert books["random"] == BookUse("random", 1, 171_425)
    assert dataclasses.replace(latest, **{key: getattr(third, key) for key in changed}) == third
    # The default curriculum goes past minimax 4 into alphabeta, a third of those games still
    # against minimax 4; the strong preset's alphabeta stages keep half of them there.
    assert len(default.curriculum) == 14
    assert default.curriculum[-1] == "alphabeta:max_depth=8@2+minimax:depth=4"
    assert len(strong.curriculum) == 10
    assert strong.curriculum[-1] == "alphabeta:max_depth=8@1+minimax:depth=4"
    # The shipped weights' seed, taught the shipped labels of seed 0 (read, not labelled).
    assert (strong.seed, strong.teacher_seed) == (1, 0)
    assert default.teacher_seed is None
    # Random openings of up to 4 stones in both (fewer where the board allows fewer).
    assert default.opening_plies is strong.opening_plies is None
    assert default.training_opening_plies() == strong.training_opening_plies() == 4
    with pytest.raises(ValueError, match="unknown preset"):
        preset_config("strongest")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("teacher_positions", -1, "teacher_positions must be >= 0"),
        ("teacher_epochs", 0, "teacher_epochs must be >= 1"),
        ("teacher_replay", -2, "teacher_replay must be >= 0"),
        ("teacher_workers", -1, "teacher_workers must be >= 0"),
        ("teacher_book", "opening:-1", "copies of the opening book must be a whole number"),
        ("teacher_book", "opening:2:0", "positions of the opening book must be a whole number"),
        ("teacher_book", "opening:x", "copies of the opening book must be a whole number"),
        ("teacher_book", "late:1", "unknown teacher book 'late'; books: opening, early, middle"),
        ("teacher_book", "opening", "'opening' is not NAME:COPIES or NAME:COPIES:FIRST"),
        ("teacher_book", "opening:1:2:3", "is not NAME:COPIES or NAME:COPIES:FIRST"),
        ("teacher_book", "early:1,early:2", "teacher book 'early' is given twice"),
        ("teacher_book", "", "'' is not NAME:COPIES"),
        ("teacher_labels", "solver", "teacher_labels must be one of shipped, label"),
        ("teacher_seed", -1, "teacher_seed must be >= 0"),
    ],
)
def test_teacher_settings_are_validated(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(TrainConfig(), **{field: value}).validate()


def test_the_teacher_seed_draws_the_positions_of_that_seed(tmp_path: Path) -> None:
    def labelled(name: str, **settings: Any) -> TeacherTensors:
        (tmp_path / name).mkdir()
        return load_teacher(tiny_teacher_config(**settings), tmp_path / name, lambda _: None)

    borrowed, seed_1 = labelled("borrowed", seed=3, teacher_seed=1), labelled("seed1", seed=1)
    for name in ("observations", "masks", "good", "values"):
        torch.testing.assert_close(getattr(borrowed, name), getattr(seed_1, name))
    assert not torch.equal(borrowed.observations, labelled("seed3", seed=3).observations)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--seed", "1", "--teacher-seed", "0"])
    assert config_from_args(args).teacher_seed == 0
    assert config_from_args(parser.parse_args([])).teacher_seed is None


def test_ctrl_c_while_labelling_keeps_the_chunks_and_says_how_to_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(train_teacher, "make_teacher_set", interrupted)
    config = tiny(tmp_path / "run", teacher_positions=30, teacher_workers=1)
    with pytest.raises(RunInterruptedError, match="run the same command again"):
        train(config, log=lambda _: None)


def test_a_preset_is_refused_beside_resume() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--preset", "strong", "--resume"])
    with pytest.raises(ValueError, match="cannot be combined with --resume"):
        config_from_args(args, TrainConfig())
    strong = config_from_args(parser.parse_args(["--preset", "strong", "--channels", "48"]))
    assert strong.channels == 48
    assert strong.teacher_positions == preset_config("strong").teacher_positions


def test_a_run_saved_with_the_old_default_network_resumes_with_it() -> None:
    saved = TrainConfig().to_json()
    saved.update(channels=32, blocks=1, timesteps=2_000_000)
    older = TrainConfig.from_json(saved)
    assert (older.channels, older.blocks, older.timesteps) == (32, 1, 2_000_000)
