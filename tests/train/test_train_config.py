"""connectx_train.config: settings of the wrong type, from a config.json or made by hand, are one
line naming the setting (and the file), never an error deep in the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connectx_train.config import TrainConfig


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
