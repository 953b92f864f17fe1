"""connectx-gym: ConnectX rules, the ``ConnectX-v0`` Gymnasium environment and a policy registry.

Importing this package registers ``ConnectX-v0`` with Gymnasium and the core's own policies with
the registry. Installed packages add theirs (the search agents among them) through entry points
(:mod:`connectx_gym.plugins`); each is imported only when a policy that needs it is first made.
"""

from __future__ import annotations

from gymnasium.envs.registration import register as _register_env

from connectx_gym.bitboard import Board, Geometry, has_line, winning_cells
from connectx_gym.match import MatchResult, play_match
from connectx_gym.policy import (
    IllegalMoveError,
    KaggleAgentPolicy,
    Policy,
    RandomPolicy,
    Struct,
    choose_best,
)
from connectx_gym.registry import (
    as_kaggle_agent,
    list_policies,
    make_policy,
    parse_spec,
    register_policy,
)

__version__ = "0.1.0"

__all__ = [
    "Board",
    "Geometry",
    "IllegalMoveError",
    "KaggleAgentPolicy",
    "MatchResult",
    "Policy",
    "RandomPolicy",
    "Struct",
    "as_kaggle_agent",
    "choose_best",
    "has_line",
    "list_policies",
    "make_policy",
    "parse_spec",
    "play_match",
    "register_policy",
    "winning_cells",
]

register_policy("random", "connectx_gym.policy:RandomPolicy")
register_policy("file", "connectx_gym.files:load_policy_file")
register_policy("ppo", "connectx_gym.files:load_ppo")
register_policy("ppo-v3", "connectx_gym.files:load_ppo_v3")
register_policy("ppo-v2", "connectx_gym.files:load_ppo_v2")
register_policy("ppo-v1", "connectx_gym.files:load_ppo_v1")

# The env enforces reset-before-step itself, so Gymnasium's OrderEnforcing layer is left out.
# ``gymnasium.make_vec("ConnectX-v0", num_envs=N)`` builds the batched env (connectx_gym.vector).
_register_env(
    id="ConnectX-v0",
    entry_point="connectx_gym.env:ConnectXEnv",
    vector_entry_point="connectx_gym.vector:ConnectXVectorEnv",
    order_enforce=False,
)
