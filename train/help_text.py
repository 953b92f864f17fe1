"""The text of ``connectx train --help`` around its flags: the description, the epilog and the
titles of the groups the flags are listed in, in order (each setting names its group in its
declaration, :mod:`connectx_train.config`)."""

from __future__ import annotations

__all__ = [
    "BOARD",
    "EVALUATION",
    "GROUPS",
    "NETWORK",
    "OPPONENTS",
    "PERFORMANCE",
    "PPO",
    "RUN",
    "TEACHER",
    "TRAIN_DESCRIPTION",
    "TRAIN_EPILOG",
]

RUN = "run and output"
BOARD = "board"
OPPONENTS = "opponents and curriculum"
TEACHER = "teacher (supervised learning from exact solver labels)"
PPO = "PPO"
NETWORK = "network"
EVALUATION = "evaluation"
PERFORMANCE = "performance"

#: the help groups of ``connectx train --help``, in the order they are listed
GROUPS = (RUN, BOARD, OPPONENTS, TEACHER, PPO, NETWORK, EVALUATION, PERFORMANCE)

TRAIN_DESCRIPTION = """\
Train a MaskablePPO agent: supervised passes on positions labelled by the exact solver (the
teacher), then PPO against a curriculum of search opponents and snapshots of itself. Writes
checkpoints, config.json, report.md, final.zip (SB3) and final.npz (weights only) to --out.

Start with:
  connectx train                                   the default run: under half an hour on 2 CPU
                                                   cores (--max-minutes bounds it)
  connectx train --opponent minimax:depth=3        one fixed opponent instead of the curriculum
  connectx train --timesteps 200000 --out runs/a   a shorter run into another folder
  connectx train --preset strong                   the settings that made the shipped 'ppo'
  connectx train --config runs/a/config.json --out runs/b --seed 1
                                                   runs/a's settings again, with another seed
  connectx train --resume --out runs/a             go on after Ctrl-C, SIGTERM or a time limit
"""

TRAIN_EPILOG = """\
Opponent mixtures (--opponent, --curriculum stages): policy specs joined by '+', each with an
optional '@weight' (default 1): "minimax:depth=2@3+onestep" plays minimax depth 2 in three games
of four and onestep in the fourth. Any spec may end in '~EPS' for a random legal move with
probability EPS: "minimax:depth=3~0.25".

--resume goes on with the run's saved settings; flags beside it may change when the run goes on
(--timesteps, the opponents, the evaluation, ...) and where and how fast it runs, but not the
board, the network, PPO's settings or the seed, which its checkpoint holds.
"""
