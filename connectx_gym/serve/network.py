"""What a network opponent thinks of a position, for ``connectx serve``'s page and API.

A network is a policy whose ``weights`` are a weights-only network
(:class:`~connectx_gym.weights.WeightsFile`): ``ppo``, an ``.npz`` under ``--models``, and a
search guided by one (``mcts:net=ppo``, whose view is its network's priors, not its visits). The
view is the network's move probabilities (the softmax of its logits over the legal columns) and,
for a network with a value head (:attr:`~connectx_gym.weights.WeightsFile.value`: the shipped
``ppo`` has one, ``ppo-v1`` none), its value of the position for the player to move. One
forward pass, whose work the loader bounded (:data:`~connectx_gym.weights.MAX_WORK`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from connectx_gym.bitboard import Board
from connectx_gym.files import NumpyNetPolicy
from connectx_gym.policy import NoisyPolicy, Policy
from connectx_gym.weights import WeightsFile

__all__ = ["NO_VALUE_HEAD", "VALUE_NOTE", "network_of", "network_view"]

NO_VALUE_HEAD = "this network has no value head: move probabilities only"
VALUE_NOTE = "value: the network's estimate for the player to move, -1 lost to 1 won"


def network_of(policy: Policy) -> NumpyNetPolicy | None:
    """The network behind ``policy`` (itself, the one a search is guided by, the one a noisy
    policy softens), or None when it has none."""
    while isinstance(policy, NoisyPolicy):
        policy = policy.policy
    if isinstance(policy, NumpyNetPolicy):
        return policy
    weights = getattr(policy, "weights", None)
    if isinstance(weights, WeightsFile):
        return NumpyNetPolicy(weights, name=f"{getattr(policy, 'name', 'search')}'s network")
    return None


def network_view(policy: Policy, board: Board) -> dict[str, Any] | None:
    """``{"network", "probabilities", "top"}`` of ``policy``'s network on ``board`` (not over):
    the probability of each column (None for full ones) and the most probable columns, with
    ``"value"`` (for the player to move) when the network has a value head; None when
    ``policy`` has no network. ``ValueError`` for a board its network was not trained on."""
    network = network_of(policy)
    if network is None:
        return None
    probabilities = network.probabilities(board)
    legal = board.legal_mask()
    top = np.flatnonzero(legal & (probabilities == probabilities[legal].max()))
    view: dict[str, Any] = {
        "network": network.name,
        "probabilities": [
            round(float(p), 4) if ok else None for p, ok in zip(probabilities, legal, strict=True)
        ],
        "top": [int(c) for c in top],
    }
    if network.weights.value is not None:
        view["value"] = round(float(network.values([board])[0]), 4)
    return view
