"""The learner: building, saving and loading the MaskablePPO model, its weights-only form, and
the panel evaluation of those weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import VecEnv

from connectx_gym.bitboard import Geometry
from connectx_gym.files import NumpyNetPolicy
from connectx_gym.match import play_match
from connectx_gym.outputs import write_atomically
from connectx_gym.weights import WeightsFile
from connectx_train.config import TrainConfig
from connectx_train.devices import resolve_device, use_bf16
from connectx_train.networks import ConnectXCNN, ConnectXPolicy, numpy_layers
from connectx_train.sb3_files import GEOMETRY_ATTRIBUTE, renamed_module_objects
from connectx_train.sb3_without_gym import without_gym
from connectx_train.torch_files import load_error_reason

__all__ = [
    "LinearSchedule",
    "evaluate_panel",
    "load_model",
    "model_weights",
    "new_model",
    "perfect_play_rates",
    "save_model",
]


class LinearSchedule:
    """Learning rate decaying linearly from ``start`` to ``end`` (picklable, for SB3)."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end

    def __call__(self, progress_remaining: float) -> float:
        return self.end + (self.start - self.end) * progress_remaining


def new_model(config: TrainConfig, env: VecEnv, out: Path) -> MaskablePPO:
    """A fresh MaskablePPO with the network and PPO settings of ``config``, logging to
    ``out/tb``, on ``config.device``."""
    device = resolve_device(config.device)
    policy_kwargs = {
        "features_extractor_class": ConnectXCNN,
        "features_extractor_kwargs": {
            "channels": config.channels,
            "blocks": config.blocks,
            "features_dim": config.features_dim,
            "bf16": use_bf16(config.precision, device),
        },
        "net_arch": {"pi": [], "vf": list(config.vf_layers)},
        "activation_fn": torch.nn.ReLU,
        # SB3's Adam settings (eps=1e-5) with the fused kernel: one pass over all parameters.
        "optimizer_kwargs": {"eps": 1e-5, "fused": True},
    }
    model = MaskablePPO(
        ConnectXPolicy,
        env,
        learning_rate=LinearSchedule(config.learning_rate, config.final_learning_rate),
        n_steps=config.n_steps,
        batch_size=config.batch_size,
        n_epochs=config.n_epochs,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        clip_range=config.clip_range,
        ent_coef=config.ent_coef,
        vf_coef=config.vf_coef,
        max_grad_norm=config.max_grad_norm,
        policy_kwargs=policy_kwargs,
        tensorboard_log=str(out / "tb"),
        seed=config.seed,
        device=device,
        verbose=0,
    )
    # Saved in the model's zip: the Kaggle export reads the board size back from it.
    setattr(model, GEOMETRY_ATTRIBUTE, [config.rows, config.columns, config.inarow])
    return model


def load_model(
    path: Path, env: VecEnv, out: Path, device: str | torch.device = "cpu"
) -> MaskablePPO:
    """The checkpoint at ``path`` (SB3 zip, optimizer and step count included), on ``env``,
    logging to ``out/tb`` (the same TensorBoard run goes on), on ``device`` whatever device
    saved it."""
    try:
        model = MaskablePPO.load(
            path, env=env, device=device, custom_objects=renamed_module_objects(path)
        )
    except Exception as error:  # zipfile, pickle, torch and SB3 errors alike
        reason = f"{type(error).__name__}: {load_error_reason(error)}"
        raise ValueError(f"{path}: not a loadable checkpoint ({reason})") from None
    model.tensorboard_log = str(out / "tb")
    return model


def save_model(model: MaskablePPO, path: Path) -> None:
    """``model.save`` to a temporary file, then a rename onto ``path``
    (:func:`connectx_gym.outputs.write_atomically`)."""
    with without_gym():  # SB3 lists gym's version in the file, and importing gym prints a banner
        write_atomically(path, model.save)


def model_weights(model: MaskablePPO, geometry: Geometry) -> WeightsFile:
    """The policy of ``model`` in the weights-only format (numpy inference)."""
    layers, params = numpy_layers(model.policy)
    return WeightsFile(geometry, layers, params)


def evaluate_panel(
    weights: WeightsFile, panel: tuple[str, ...], games: int, seed: int
) -> dict[str, dict[str, Any]]:
    """Deterministic play of ``weights`` against every panel spec, seats alternating."""
    agent = NumpyNetPolicy(weights, deterministic=True, name="agent")
    g = weights.geometry
    results = {}
    for spec in panel:
        match = play_match(agent, spec, games, seed, g.rows, g.columns, g.inarow)
        results[spec] = match.to_dict()
    return results


def perfect_play_rates(weights: WeightsFile, split: str) -> dict[str, Any] | None:
    """Mistake and perfect-move rates of the deterministic agent on the shipped labelled
    positions of ``split`` (:mod:`connectx_baselines.perfect_play`; ``"dev"`` during the run,
    ``"test"``
    in the final report), or None for a board size without a shipped set."""
    from connectx_baselines.perfect_play import evaluate_policy, load_positions

    positions = load_positions(split=split)
    if positions.geometry != weights.geometry:
        return None
    agent = NumpyNetPolicy(weights, deterministic=True, name="agent")
    result = evaluate_policy(agent, positions).to_dict()
    result["split"] = split
    return result
