"""kaggle-environments' own ConnectX agents as policies: ``"kaggle:random"``, ``"kaggle:negamax"``.

kaggle-environments stays optional: it is imported only when such a policy is made, and a clear
``ImportError`` says how to install it otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from connectx_gym.bitboard import Board
from connectx_gym.policy import KaggleAgentPolicy

__all__ = [
    "KAGGLE_AGENTS",
    "KaggleBuiltinPolicy",
    "kaggle_negamax",
    "kaggle_random",
    "load_kaggle_agent",
]

#: The agents of kaggle-environments' ``connectx`` that can be wrapped.
KAGGLE_AGENTS = ("random", "negamax")

_INSTALL_HINT = 'pip install "connectx-gym[kaggle]"'


def load_kaggle_agent(agent: str) -> Callable[[Any, Any], int]:
    """kaggle-environments' ConnectX agent function ``agent`` (``"random"`` or ``"negamax"``).

    Raises ``ValueError`` for another name and ``ImportError`` (with the install command) when
    kaggle-environments is not installed.
    """
    if agent not in KAGGLE_AGENTS:
        raise ValueError(
            f"unknown kaggle agent {agent!r}; choose one of {', '.join(KAGGLE_AGENTS)}"
        )
    try:
        from kaggle_environments.envs.connectx import connectx
    except ImportError as error:
        raise ImportError(
            f"the 'kaggle:{agent}' policy needs kaggle-environments: {_INSTALL_HINT}"
        ) from error
    return connectx.agents[agent]


class KaggleBuiltinPolicy(KaggleAgentPolicy):
    """One of kaggle-environments' built-in ConnectX agents, run through
    :class:`~connectx_gym.policy.KaggleAgentPolicy` (its ``random`` calls are seeded from the
    caller's generator, so games are reproducible).

    Args:
        agent: ``"random"`` or ``"negamax"`` (kaggle's depth-4 negamax, about 0.1 s a move).
    """

    def __init__(self, agent: str = "negamax") -> None:
        super().__init__(load_kaggle_agent(agent), name=f"kaggle:{agent}")
        self.agent_name = agent

    def scores(self, board: Board) -> np.ndarray:
        """Zeros on legal columns for ``"random"``; kaggle's negamax only answers a column."""
        if self.agent_name == "random":
            return np.where(board.legal_mask(), 0.0, np.nan)
        raise NotImplementedError(
            "kaggle-environments' negamax agent returns a column, not per-column scores; "
            "use the 'negamax' policy for scores"
        )

    def __repr__(self) -> str:
        return f"KaggleBuiltinPolicy(agent={self.agent_name!r})"


def kaggle_random() -> KaggleBuiltinPolicy:
    """The ``"kaggle:random"`` policy (an entry point of this distribution)."""
    return KaggleBuiltinPolicy("random")


def kaggle_negamax() -> KaggleBuiltinPolicy:
    """The ``"kaggle:negamax"`` policy (an entry point of this distribution)."""
    return KaggleBuiltinPolicy("negamax")
