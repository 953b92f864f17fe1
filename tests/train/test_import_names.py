"""The installed import names (``connectx_baselines``, ``connectx_train``) cannot be shadowed by a
user's own ``train.py`` or ``baselines.py``, and models saved under the earlier names (``train``,
``baselines``) still load."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")

from connectx_gym.env import ConnectXEnv
from connectx_train import networks
from connectx_train.config import TrainConfig
from connectx_train.model import load_model, model_weights, new_model
from connectx_train.opponents import make_vec_env
from connectx_train.sb3_files import renamed_module_objects, weights_from_sb3


def save_under_earlier_names(path: Path) -> None:
    """A model saved as an earlier version saved it: its network class pickled as
    ``train.networks.ConnectXCNN``."""
    model = new_model(TrainConfig(seed=1), ConnectXEnv(), path.parent)
    earlier_modules = {"train": networks, "train.networks": networks}
    cls = networks.ConnectXCNN
    own_module = cls.__module__
    cls.__module__ = "train.networks"
    sys.modules.update(earlier_modules)
    try:
        model.save(path)
    finally:
        cls.__module__ = own_module
        for name in earlier_modules:
            del sys.modules[name]


def test_a_model_saved_under_the_earlier_import_names_loads(tmp_path: Path) -> None:
    path = tmp_path / "earlier.zip"
    save_under_earlier_names(path)
    assert b"train.networks" in path.read_bytes() or renamed_module_objects(path)
    objects = renamed_module_objects(path)
    kwargs = objects["policy_kwargs"]
    assert kwargs["features_extractor_class"] is networks.ConnectXCNN
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        weights = weights_from_sb3(path)
    assert weights.geometry.columns == 7
    env = make_vec_env(TrainConfig(seed=1, n_envs=2))
    try:
        model = load_model(path, env, tmp_path)
        assert isinstance(model.policy.features_extractor, networks.ConnectXCNN)
        assert model_weights(model, weights.geometry).layers == weights.layers
    finally:
        env.close()


def test_a_model_of_this_version_needs_no_renaming(tmp_path: Path) -> None:
    model = new_model(TrainConfig(seed=1), ConnectXEnv(), tmp_path)
    model.save(tmp_path / "now.zip")
    assert renamed_module_objects(tmp_path / "now.zip") == {}
    assert renamed_module_objects(tmp_path / "missing.zip") == {}


def test_a_users_train_py_and_baselines_py_shadow_nothing(tmp_path: Path) -> None:
    """The README's quickstart, then a saved ``.zip`` as an env opponent, run from a folder that
    holds a ``train.py`` and a ``baselines.py`` (the most common file names of RL projects)."""
    model = new_model(TrainConfig(seed=2), ConnectXEnv(), tmp_path)
    model.save(tmp_path / "model.zip")
    shadow = 'raise SystemExit("the user\'s own {} was imported")\n'
    (tmp_path / "train.py").write_text(shadow.format("train.py"))
    (tmp_path / "baselines.py").write_text(shadow.format("baselines.py"))
    script = textwrap.dedent(
        """
        import warnings
        import gymnasium as gym
        import connectx_gym
        from sb3_contrib import MaskablePPO

        env = gym.make("ConnectX-v0", opponent="minimax:depth=2")
        observation, info = env.reset(seed=0)
        model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0)
        model.learn(64)
        warnings.simplefilter("ignore", UserWarning)
        env = gym.make("ConnectX-v0", opponent="model.zip")
        observation, info = env.reset(seed=0)
        observation, reward, terminated, truncated, info = env.step(3)
        print("opponent played", info["opponent_action"])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "opponent played" in done.stdout
    assert "was imported" not in done.stderr
