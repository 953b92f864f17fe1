"""connectx-gym: ConnectX rules, the ``ConnectX-v0`` Gymnasium environment and a policy registry.

Importing this package registers ``ConnectX-v0`` with Gymnasium and the built-in policies with the
registry; the search agents (package ``baselines``) and the model loaders are imported only when a
policy that needs them is first made.
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
register_policy("onestep", "baselines.lookahead:OneStepPolicy")
register_policy("minimax", "baselines.lookahead:MinimaxPolicy", depth=3)
register_policy("negamax", "baselines.negamax:NegamaxPolicy", depth=4)
register_policy("alphabeta", "baselines.alphabeta:AlphaBetaPolicy")
register_policy("kaggle:random", "baselines.kaggle_agents:KaggleBuiltinPolicy", agent="random")
register_policy("kaggle:negamax", "baselines.kaggle_agents:KaggleBuiltinPolicy", agent="negamax")
register_policy("solver", "baselines.solver:SolverPolicy")
register_policy("file", "connectx_gym.files:load_policy_file")
register_policy("ppo", "connectx_gym.files:load_ppo")

# The env enforces reset-before-step itself, so Gymnasium's OrderEnforcing layer is left out.
# ``gymnasium.make_vec("ConnectX-v0", num_envs=N)`` builds the batched env (connectx_gym.vector).
_register_env(
    id="ConnectX-v0",
    entry_point="connectx_gym.env:ConnectXEnv",
    vector_entry_point="connectx_gym.vector:ConnectXVectorEnv",
    order_enforce=False,
)
