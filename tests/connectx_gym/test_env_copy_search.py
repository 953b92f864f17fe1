"""Env copies with the search opponents (minimax, alphabeta, solver): their policies must pickle.

Enabled after the baselines branch (picklable policies) is merged.
"""

from __future__ import annotations

import pytest

from tests.support.env_copy_checks import COPIERS, check_copy_mid_game

SEARCH_OPPONENTS = [
    "onestep",
    "minimax:depth=2",
    "negamax:depth=2",
    "alphabeta:max_depth=3",
    "solver:node_limit=200000,fallback_depth=4,time_budget=60",  # node-bound: reproducible
    "minimax:depth=2~0.25",
]


@pytest.mark.parametrize("copier", COPIERS)
@pytest.mark.parametrize("opponent", SEARCH_OPPONENTS)
def test_copy_with_a_search_opponent(opponent: str, copier: str) -> None:
    check_copy_mid_game(opponent, COPIERS[copier])
