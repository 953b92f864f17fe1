"""``connectx train --preset`` bundles: each a description and the settings that differ from
:class:`connectx_train.config.TrainConfig`'s defaults (``connectx_train.config.preset_config``
builds one; flags given beside ``--preset`` override it). Plain data; each preset's runs and the
measurements behind its choices are in the record its description names."""

from __future__ import annotations

from typing import Any

__all__ = ["PRESETS"]

#: the settings of ``--preset strong-v2``, which ``--preset strong-v3`` repeats from its weights
_STRONG_V2: dict[str, Any] = {
    "out": "runs/strong-v2",
    "seed": 2,
    "teacher_seed": 0,
    "init_weights": "ppo-v1",
    "timesteps": 150_000,
    "max_minutes": 0.0,
    "torch_threads": 2,
    "channels": 96,
    "blocks": 3,
    # the labels of seed 0's 200,000 game positions (shipped) and every book as it was
    # when the recipe ran (the books grow)
    "teacher_positions": 200_000,
    "teacher_epochs": 3,
    "teacher_learning_rate": 5e-4,
    "scale_teacher": False,
    "teacher_replay": 8,
    "teacher_book": "opening:2:4835,early:1:44450,middle:1:18916,random:1:21499",
    "curriculum": (
        "minimax:depth=4",
        "alphabeta:max_depth=6@1+minimax:depth=4",
        "alphabeta:max_depth=8@1+minimax:depth=4",
    ),
    "snapshot_every": 25_000,
    "eval_every": 50_000,
}

#: the settings of ``--preset strong-v3``: ``strong-v2``'s from its weights, with all of the random
#: book as it was when the recipe ran (171,425 positions)
_STRONG_V3: dict[str, Any] = {
    **_STRONG_V2,
    "out": "runs/strong-v3",
    "seed": 3,
    "init_weights": "ppo-v2",
    "teacher_book": "opening:2:4835,early:1:44450,middle:1:18916,random:1:171425",
}

#: ``--preset`` names: (description, the settings that differ from the defaults).
PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "default": ("the defaults (docs/experiments/default_report.md)", {}),
    "long": (
        "the default run with 1,000,000 PPO steps instead of 300,000 and no time bound "
        "(docs/experiments/long_report.md)",
        {"out": "runs/long", "timesteps": 1_000_000, "max_minutes": 0.0},
    ),
    "strong": (
        "the settings that made the shipped policy 'ppo': the recipe of 'ppo-v3' (--preset "
        "strong-v3) once more from its weights, the opening book taught three times and the "
        "early book twice; no time bound, resumable (docs/experiments/strong_report.md)",
        {
            **_STRONG_V3,
            "out": "runs/strong",
            "seed": 5,
            "init_weights": "ppo-v3",
            "teacher_book": "opening:3:4835,early:2:44450,middle:1:18916,random:1:171425",
        },
    ),
    "strong-v3": (
        "the settings that made 'ppo-v3', the network shipped as 'ppo' before: the recipe of "
        "'ppo-v2' (--preset strong-v2) once more from its weights, with eight times the "
        "positions of random legal play; no time bound, resumable "
        "(docs/experiments/strong_v3_report.md)",
        _STRONG_V3,
    ),
    "strong-v2": (
        "the settings that made 'ppo-v2', the network shipped as 'ppo' before 'ppo-v3': the "
        "weights of 'ppo-v1' (--preset strong-v1) taught again, at a lower rate, on positions "
        "labelled by the exact solver from games and from random legal play, its value head "
        "taught too, then PPO against minimax depth 4, alphabeta to depth 6 and 8 and itself; no "
        "time bound, resumable (docs/experiments/strong_v2_report.md)",
        _STRONG_V2,
    ),
    "strong-v1": (
        "the settings that made 'ppo-v1', the network shipped as 'ppo' before 'ppo-v2': a bigger "
        "network taught by the exact solver, then PPO against minimax up to depth 4, alphabeta to "
        "depth 6 and 8 and itself, its last two weights averaged; no time bound, resumable "
        "(docs/experiments/strong_v1_report.md)",
        {
            "out": "runs/strong-v1",
            # the seed of the shipped weights, taught the shipped labels (seed 0's: read, not
            # labelled)
            "seed": 1,
            "teacher_seed": 0,
            "timesteps": 800_000,
            # unbounded: a bounded command keeps its teaching to a third of the bound, which would
            # cut this recipe's supervised passes on few cores; Ctrl-C saves and --resume goes on
            "max_minutes": 0.0,
            "torch_threads": 2,
            "channels": 96,
            "blocks": 3,
            "teacher_positions": 200_000,
            "teacher_epochs": 10,
            "teacher_replay": 8,
            # all of the opening book three times, the part of the early book that made ppo, no
            # middle book
            "teacher_book": "opening:3,early:1:27278",
            # the default's stages from onestep on, half of the alphabeta stages' games against
            # minimax 4 (the default keeps a third)
            "curriculum": (
                "onestep",
                "minimax:depth=2",
                "minimax:depth=3~0.25",
                "minimax:depth=3",
                "minimax:depth=4~0.25",
                "minimax:depth=4",
                "alphabeta:max_depth=6~0.25@1+minimax:depth=4",
                "alphabeta:max_depth=6@1+minimax:depth=4",
                "alphabeta:max_depth=8~0.25@1+minimax:depth=4",
                "alphabeta:max_depth=8@1+minimax:depth=4",
            ),
            # the play weights: the mean of the last ones and the snapshot before them
            "average_weights": 2,
            "eval_every": 250_000,
        },
    ),
    "selfplay": (
        "PPO from scratch with no exact solver anywhere in what the run learns from or decides: "
        "no teacher positions, books or replay, against the default search curriculum and, in "
        "half of its games, its own snapshots, games starting after up to 20 random stones; "
        "bounded to two hours. Its mistake rates (the dev "
        "split during the run, the test split in the report) read labels shipped in "
        "connectx_baselines' data and only measure "
        "(docs/experiments/selfplay.md)",
        {
            "out": "runs/selfplay",
            "timesteps": 8_000_000,
            "max_minutes": 120.0,
            "teacher_positions": 0,
            "teacher_book": "none",
            "teacher_replay": 0,
            # half of the games against the agent's own snapshots (the default plays a quarter),
            # drawn from the last ten, one per 100,000 steps
            "selfplay_weight": 0.5,
            # games from random play's middle and end positions too (0 to 20 random stones, their
            # wins in one unplayed), not only from the first 4 stones: random positions' tactics
            "opening_plies": 20,
            "snapshot_every": 100_000,
            "pool_size": 10,
            "checkpoint_every": 200_000,
            "eval_every": 400_000,
        },
    ),
}
