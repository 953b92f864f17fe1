"""Search baselines for ConnectX, registered in :mod:`connectx_gym`'s policy registry.

``onestep`` and ``minimax`` are the Kaggle "Intro to Game AI" agents, ``negamax`` the one from the
Kaggle ConnectX notes, ``alphabeta`` a strong iterative-deepening searcher and ``solver`` an exact
solver. Make them with ``connectx_gym.make_policy("minimax:depth=4")`` or by name as the opponent of
``ConnectX-v0``.
"""
