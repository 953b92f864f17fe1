"""connectx_train.config and config_cli: every setting declared once (help, group, bounds, what
--resume may do), the flags, help groups, checks and resume rules derived from the declarations;
settings of the wrong type or out of bounds, from a flag, a config.json or made by hand, are one
line naming the setting (and the file), never an error deep in the run; --config FILE."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest

import connectx_train.config as config_module
from connectx_train.config import TrainConfig, added_later, settings_on_resume
from connectx_train.config_cli import add_arguments, config_from_args, read_config
from connectx_train.config_types import GROUPS, RUN, TEACHER, OnResume, declaration

NUMBER_TYPES = ("int", "float", "tuple[int, ...]")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("channels", "abc", "setting channels must be a whole number, got 'abc'"),
        ("channels", 64.0, "setting channels must be a whole number, got 64.0"),
        ("learning_rate", "fast", "setting learning_rate must be a number"),
        ("progress_bar", 1, "setting progress_bar must be true or false"),
        ("panel", ["random", 3], "setting panel must be a list of strings"),
        ("teacher_seed", "x", "setting teacher_seed must be a whole number or null"),
    ],
)
def test_saved_settings_of_the_wrong_type_are_named(field: str, value: object, message: str):
    data = {**TrainConfig().to_json(), field: value}
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_json(data)


def test_right_types_load_and_validate() -> None:
    data = {**TrainConfig().to_json(), "learning_rate": 1, "teacher_seed": None}
    config = TrainConfig.from_json(data)
    config.validate()
    assert config.learning_rate == 1


def test_a_config_made_by_hand_is_checked_too() -> None:
    with pytest.raises(ValueError, match="setting channels must be a whole number"):
        TrainConfig(channels="abc").validate()  # type: ignore[arg-type]


def test_resume_with_a_bad_config_json_is_one_line_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("sb3_contrib")
    from connectx_gym.cli import main

    saved = tmp_path / "config.json"
    saved.write_text(json.dumps({**TrainConfig().to_json(), "channels": "abc"}))
    code = main(["train", "--resume", "--out", str(tmp_path)])
    error = capsys.readouterr().err.strip()
    assert code == 2
    assert len(error.splitlines()) == 1
    assert str(saved) in error
    assert "channels" in error
    assert "not supported between" not in error


def test_a_run_saved_with_the_removed_vec_env_auto_resumes_with_subprocesses() -> None:
    saved = TrainConfig().to_json() | {"vec_env": "auto"}
    assert TrainConfig.from_json(saved).vec_env == "subproc"
    with pytest.raises(ValueError, match="vec_env must be one of batched, subproc, dummy"):
        TrainConfig(vec_env="auto").validate()


# Each setting declared once: everything else is derived from the declarations.

SETTINGS = dataclasses.fields(TrainConfig)
NUMERIC = [f for f in SETTINGS if str(f.type).removesuffix(" | None") in NUMBER_TYPES]


def test_every_setting_declares_help_group_bounds_and_resume() -> None:
    for f in SETTINGS:
        declared = declaration(f)
        assert declared.help.strip(), f.name
        assert declared.group in GROUPS, f.name
        assert isinstance(declared.on_resume, OnResume), f.name
        if f in NUMERIC:
            assert declared.low is not None, f.name
            assert declared.high is not None, f.name
        if str(f.type) == "str" and f.name != "out":
            assert declared.choices or declared.check, f.name  # free text only where it is a path
    assert {declaration(f).group for f in SETTINGS} == set(GROUPS)  # no empty group


def test_a_field_without_a_declaration_is_refused() -> None:
    bare = dataclasses.field(default=1)
    bare.name = "bare"
    with pytest.raises(ValueError, match="bare is not declared"):
        declaration(bare)


def test_help_lists_every_setting_in_its_declared_group() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    listed = {
        action.dest: group.title
        for group in parser._action_groups
        for action in group._group_actions
    }
    for f in SETTINGS:
        assert listed[f.name] == declaration(f).group, f.name
    assert listed["scale_teacher"] == TEACHER
    assert listed["config"] == listed["preset"] == RUN


@pytest.mark.parametrize("field", NUMERIC, ids=lambda f: f.name)
def test_every_numeric_setting_is_bounded_on_the_command_line_and_in_validate(
    field: dataclasses.Field[object],
) -> None:
    declared = declaration(field)
    is_tuple = str(field.type).startswith("tuple")
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser)
    flag = "--" + field.name.replace("_", "-")
    outside = [declared.high + 1, declared.low if declared.low_excluded else declared.low - 1]
    if "float" in str(field.type):
        outside += [float("nan"), float("inf")]
    for value in outside:
        with pytest.raises(argparse.ArgumentError, match=field.name):
            parser.parse_args([flag, str(value)])
        made = TrainConfig(**{field.name: (value,) if is_tuple else value})
        with pytest.raises(ValueError, match=f"^{field.name} must be"):
            made.validate()
    for value in (declared.low, declared.high):  # the bounds themselves are settings
        if value != declared.low or not declared.low_excluded:
            parsed = parser.parse_args([flag, str(value)])
            assert getattr(parsed, field.name) in (value, [value])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--vf-layers", "-1"], "argument --vf-layers: vf_layers must be >= 1, got -1"),
        (["--vf-layers", *["8"] * 17], "vf_layers takes at most 16 values"),
        (["--blocks", "65"], "argument --blocks: blocks must be <= 64"),
        (["--features-dim", "100000"], "features_dim must be <= 4096"),
        (["--channels", "abc"], "argument --channels: expected a whole number, got 'abc'"),
        (["--max-minutes", "nan"], "max_minutes must be a finite number, got nan"),
        (["--learning-rate", "0"], "learning_rate must be > 0"),
        (["--batch-size", "1"], "batch_size must be >= 2"),
        (["--teacher-book", "late:1"], "unknown teacher book 'late'"),
        (["--opponent", "onestep@nan"], "opponent weight must be a finite number > 0"),
        (["--vec-env", "auto"], "vec_env must be one of batched, subproc, dummy"),
        (["--timesteps", "2048", "--n-envs", "64"], "one rollout (--n-envs 64 x --n-steps 64"),
        (["--config", "MISSING"], "cannot read"),
    ],
)
def test_bad_settings_are_one_line_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = [str(tmp_path / "missing.json") if a == "MISSING" else a for a in argv]
    code, error = _connectx(capsys, "train", *argv, "--out", str(tmp_path / "run"))
    assert code == 2
    assert message in error
    assert len(error.strip().splitlines()) == 1, error
    assert not (tmp_path / "run").exists()


def test_a_rollout_longer_than_the_run_is_refused_with_values_that_fit() -> None:
    with pytest.raises(ValueError, match="lower --n-steps to 64 or less, or raise --timesteps to"):
        TrainConfig(timesteps=2048, n_envs=32, n_steps=1024).validate()
    with pytest.raises(ValueError, match="lower --n-envs to 16 or less with --n-steps 1"):
        TrainConfig(timesteps=16, n_envs=32).validate()
    TrainConfig(timesteps=2048, n_envs=32, n_steps=64).validate()  # the suggestion fits
    TrainConfig(timesteps=16, n_envs=16, n_steps=1).validate()


# Old config.json files and what --resume may change.


def test_settings_added_later_come_from_their_declarations() -> None:
    assert added_later() == {"scale_teacher": False, "opening_plies": 0}
    saved = TrainConfig().to_json()
    for name in added_later():
        del saved[name]
    old = TrainConfig.from_json(saved)
    assert (old.scale_teacher, old.opening_plies) == (False, 0)


def test_learning_settings_leave_out_what_shapes_nothing_the_run_learns() -> None:
    one_command = {"out", "resume", "max_minutes", "progress_bar", "torch_threads", "device"}
    # the final report's split is read after the last step and shapes no weights
    reported = {"report_split"}
    free = one_command | reported | {"teacher_workers", "average_weights", "teacher_labels", "ray"}
    assert settings_on_resume(OnResume.FREE) == free
    settings = TrainConfig().learning_settings()
    assert set(settings) == {f.name for f in SETTINGS} - free
    assert (
        settings == TrainConfig(out="elsewhere", max_minutes=3, device="cuda").learning_settings()
    )
    assert settings != TrainConfig(channels=8).learning_settings()


def test_resume_refuses_a_change_its_checkpoint_holds(tmp_path: Path) -> None:
    saved = TrainConfig(out=str(tmp_path), timesteps=4096, channels=8)
    parser = argparse.ArgumentParser()
    add_arguments(parser)

    def resumed(*argv: str) -> TrainConfig:
        return config_from_args(parser.parse_args(["--resume", *argv]), saved)

    longer = resumed("--timesteps", "8192", "--max-minutes", "5", "--eval-games", "4")
    assert (longer.timesteps, longer.max_minutes, longer.channels) == (8192, 5, 8)
    assert resumed("--channels", "8").channels == 8  # the same value is no change
    for argv, flag in (
        (["--channels", "16"], "--channels"),
        (["--vf-layers", "32", "32"], "--vf-layers"),
        (["--learning-rate", "0.001"], "--learning-rate"),
        (["--rows", "5"], "--rows"),
        (["--seed", "3"], "--seed"),
    ):
        with pytest.raises(ValueError, match=f"^{flag} cannot change on --resume") as error:
            resumed(*argv)
        assert str(tmp_path / "config.json") in str(error.value)  # how to start anew from it
    assert settings_on_resume(OnResume.FIXED) >= {"channels", "n_steps", "gamma", "inarow"}


# --config FILE: a run's config.json as a starting point.


def test_config_file_starts_a_run_and_flags_override_it(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    TrainConfig(out="runs/a", channels=16, seed=4, resume=True, timesteps=4096).save(path)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--config", str(path), "--seed", "5", "--out", "runs/b"])
    config = config_from_args(args)
    assert (config.channels, config.timesteps, config.seed, config.out) == (16, 4096, 5, "runs/b")
    assert config.resume is False  # starting from a run's settings does not resume that run
    assert read_config(path) == TrainConfig(
        out="runs/a", channels=16, seed=4, resume=True, timesteps=4096
    )
    with pytest.raises(ValueError, match="--preset and --config are both starting points"):
        config_from_args(parser.parse_args(["--config", str(path), "--preset", "strong"]))
    with pytest.raises(ValueError, match="--config cannot be combined with --resume"):
        config_from_args(parser.parse_args(["--config", str(path)]), TrainConfig())


def test_config_file_of_an_older_version_reads_in_todays_names(tmp_path: Path) -> None:
    old = TrainConfig().to_json()
    for name in ("teacher_book", "scale_teacher", "opening_plies", "teacher_labels"):
        del old[name]
    old |= {"teacher_book": 2, "teacher_book_positions": 1929, "teacher_early_book": 1}
    old |= {"teacher_early_book_positions": 27278, "vec_env": "auto"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(old))
    config = read_config(path)
    assert config.teacher_book == "opening:2:1929,early:1:27278"
    assert (config.vec_env, config.scale_teacher, config.opening_plies) == ("subproc", False, 0)
    assert config.teacher_labels == TrainConfig().teacher_labels


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"channels": 8, "chanels": 16}, "unknown setting(s) 'chanels'"),
        ({"channels": "wide"}, "setting channels must be a whole number"),
        ("[1, 2]", "not a JSON object of settings"),
        ("{", "not JSON"),
    ],
)
def test_a_bad_config_file_is_one_line_naming_it(
    content: object, message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "config.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    code, error = _connectx(capsys, "train", "--config", str(path), "--out", str(tmp_path / "b"))
    assert code == 2
    assert len(error.strip().splitlines()) == 1, error
    assert str(path) in error
    assert message in error


def test_a_nan_in_a_config_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(TrainConfig().to_json()).replace('"max_minutes": 27.0', '"max_minutes": NaN')
    )
    with pytest.raises(ValueError, match="max_minutes must be a finite number, got nan"):
        read_config(path).validate()


def test_teacher_workers_are_counted_when_the_run_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    assert TrainConfig().teacher_workers == 0  # "auto": nothing of this machine in the defaults
    monkeypatch.setattr(config_module, "available_cores", lambda: 7)
    assert TrainConfig().labelling_workers() == 7
    assert TrainConfig(teacher_workers=3).labelling_workers() == 3


def _connectx(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    from connectx_gym.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's errors
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err
