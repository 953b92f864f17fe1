"""SB3 imports the unmaintained ``gym`` when it is installed (kaggle-environments brings it), and
gym prints a four-line banner on stderr: ``import connectx_train`` keeps SB3 from importing it, so
``connectx train`` and the exports print only their own lines."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gym") is None or importlib.util.find_spec("sb3_contrib") is None,
    reason="needs gym (the banner's source) and the train extra",
)


def python(code: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        cwd=ROOT,
        check=False,
    )


def test_gym_prints_its_banner_when_imported() -> None:
    assert "unmaintained" in python("import gym").stderr  # what the tests below keep away


def test_training_imports_sb3_without_the_gym_banner() -> None:
    done = python(
        "import connectx_train.model, connectx_train.trainer\n"
        "import stable_baselines3.common.vec_env.patch_gym as patch\n"
        "import sys\n"
        "print(patch.gym_installed, 'gym' in sys.modules)"
    )
    assert done.returncode == 0, done.stderr
    assert "unmaintained" not in done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_an_export_error_is_one_line_without_the_banner(tmp_path: Path) -> None:
    done = python(
        "import sys; from connectx_gym.cli import main; "
        f"sys.exit(main(['export-onnx', {str(tmp_path / 'missing.zip')!r}]))"
    )
    assert done.returncode != 0
    assert "unmaintained" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "missing.zip" in done.stderr


def test_saving_a_model_prints_no_gym_banner(tmp_path: Path) -> None:
    done = python(
        "from pathlib import Path\n"
        "from connectx_train.config import TrainConfig\n"
        "from connectx_train.model import new_model, save_model\n"
        "from connectx_train.opponents import make_vec_env\n"
        "config = TrainConfig(n_envs=2, channels=8, features_dim=32, teacher_positions=0)\n"
        f"out = Path({str(tmp_path)!r})\n"
        "save_model(new_model(config, make_vec_env(config), out), out / 'checkpoint.zip')\n"
        "import sys\n"
        "print('gym' in sys.modules)"
    )
    assert done.returncode == 0, done.stderr
    assert "unmaintained" not in done.stderr
    assert done.stdout.split() == ["False"]
    assert (tmp_path / "checkpoint.zip").is_file()


def test_gym_stays_importable_for_others() -> None:
    done = python("import connectx_train.model\nimport gym\nprint(gym.__name__)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "gym"
