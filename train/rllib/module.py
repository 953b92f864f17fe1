"""The project's network as an RLlib PPO module, and its export to the weights-only format.

:class:`ConnectXPPOModule` holds the very policy ``connectx train`` trains, a
:class:`~connectx_train.networks.ConnectXPolicy` over a
:class:`~connectx_train.networks.ConnectXCNN` built with
:func:`connectx_train.model.policy_kwargs` from the run's network settings (channels, blocks,
features, value layers), and answers RLlib through it: the logits are the policy's masked action
distribution's (illegal columns pushed to a large negative number, as MaskablePPO masks them),
the values its critic's. RLlib's learner optimises the module's parameters, which are the
policy's, so :func:`module_weights` exports it with :func:`connectx_train.networks.numpy_weights`,
the export of ``connectx train``: the same weights-only ``.npz`` that ``connectx evaluate``,
``connectx accuracy`` and the Kaggle export read.
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule

from connectx_gym.bitboard import Geometry
from connectx_gym.weights import WeightsFile
from connectx_train.config import TrainConfig
from connectx_train.model import policy_kwargs
from connectx_train.networks import ConnectXPolicy, numpy_weights

__all__ = ["NETWORK_SETTINGS", "ConnectXPPOModule", "module_weights"]

#: the :class:`~connectx_train.config.TrainConfig` settings of the network, which the module's
#: ``model_config`` holds
NETWORK_SETTINGS = ("channels", "blocks", "features_dim", "vf_layers")


def _no_learning_rate(progress_remaining: float) -> float:
    """The SB3 policy's own optimizer is never stepped: RLlib's learner optimises the module."""
    return 0.0


class ConnectXPPOModule(TorchRLModule, ValueFunctionAPI):
    """PPO's module on ``{"observations": planes, "action_mask": legal columns}`` observations
    (:mod:`connectx_train.rllib.env`); ``model_config``: the :data:`NETWORK_SETTINGS` (the
    defaults of ``connectx train`` for those left out)."""

    policy: ConnectXPolicy

    def setup(self) -> None:
        given = self.model_config or {}
        if not isinstance(given, dict):
            raise ValueError(f"ConnectXPPOModule's model_config is a dict of {NETWORK_SETTINGS}")
        settings = {k: v for k, v in given.items() if k in NETWORK_SETTINGS}
        if "vf_layers" in settings:
            settings["vf_layers"] = tuple(settings["vf_layers"])
        config = TrainConfig(**settings)
        space, actions = self.observation_space, self.action_space
        if not isinstance(space, gym.spaces.Dict) or "observations" not in space.spaces:
            raise ValueError(f"ConnectXPPOModule needs the planes and action mask, got {space}")
        if not isinstance(actions, gym.spaces.Discrete):
            raise ValueError(f"ConnectXPPOModule plays one of the columns, got {actions}")
        self.policy = ConnectXPolicy(
            space["observations"], actions, _no_learning_rate, **policy_kwargs(config)
        )
        if not self.policy.share_features_extractor:
            raise ValueError("ConnectXPPOModule needs one features extractor for both heads")

    def _features(self, batch: dict[str, Any]) -> torch.Tensor:
        # one tensor: the extractor is shared (checked in setup)
        return cast(torch.Tensor, self.policy.extract_features(batch[Columns.OBS]["observations"]))

    def _logits(self, batch: dict[str, Any], features: torch.Tensor) -> torch.Tensor:
        latent = self.policy.mlp_extractor.forward_actor(features)
        # the policy's own distribution (its logits: column scores + a linear layer), masked
        distribution = self.policy._get_action_dist_from_latent(latent)
        distribution.apply_masking(batch[Columns.OBS]["action_mask"] > 0.5)
        # one categorical over the columns (SB3 types it as any of its distributions)
        return cast(torch.distributions.Categorical, distribution.distribution).logits

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self._logits(batch, self._features(batch))}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        features = self._features(batch)
        # the trunk's output, handed back to compute_values: one pass for both heads
        return {
            Columns.ACTION_DIST_INPUTS: self._logits(batch, features),
            Columns.EMBEDDINGS: features,
        }

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        features = self._features(batch) if embeddings is None else embeddings
        values: torch.Tensor = self.policy.value_net(
            self.policy.mlp_extractor.forward_critic(features)
        )
        return values.squeeze(-1)


def module_weights(module: ConnectXPPOModule, geometry: Geometry) -> WeightsFile:
    """``module``'s network in the weights-only format (policy logits and value head), as
    ``connectx train`` exports its model (:func:`connectx_train.networks.numpy_weights`)."""
    return numpy_weights(module.policy, geometry)
