"""``connectx train --preset`` bundles: each a description and the settings that differ from
:class:`connectx_train.config.TrainConfig`'s defaults (``connectx_train.config.preset_config``
builds one; flags given beside ``--preset`` override it). Plain data, so that every choice's reason
sits next to it; the runs behind the reasons are recorded in docs/experiments/bench_agent.md."""

from __future__ import annotations

from typing import Any

__all__ = ["PRESETS"]

#: ``--preset`` names: (description, the settings that differ from the defaults).
PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "default": ("the defaults (the main run: about 25 minutes on 2 CPU cores)", {}),
    "long": (
        "the default run with 1,000,000 PPO steps instead of 300,000 and no time bound, the "
        "default until it was sized to 2 CPU cores without bfloat16 "
        "(docs/experiments/long_report.md): half an hour with bfloat16 instructions or a GPU, "
        "longer in float32 on few cores",
        {"out": "runs/long", "timesteps": 1_000_000, "max_minutes": 0.0},
    ),
    "strong": (
        "the shipped policy 'ppo': a bigger network taught by the exact solver, then PPO "
        "against minimax up to depth 4, alphabeta to depth 6 and 8 and itself, its last two "
        "weights averaged (1 to 2.5 hours on 2 cores, by the CPU, no time bound; resumable)",
        {
            "out": "runs/strong",
            # seed 1 made the shipped weights, taught the shipped labels of seed 0 (read in
            # seconds); seed 0 of the same recipe missed a criterion fixed before its run (4.3%
            # mistakes against 3.9%)
            "seed": 1,
            "teacher_seed": 0,
            "timesteps": 800_000,
            # no bound: on 2 CPU cores its supervised passes alone take about an hour, more than
            # a bounded session's teacher share (a third), which would cut them (to 6 of 10 on 2
            # AMD EPYC cores under the 115 minutes it had) and change the recipe; Ctrl-C saves and
            # --resume goes on
            "max_minutes": 0.0,
            "torch_threads": 2,
            # 96 channels and 3 blocks (was 64 and 2): its final weights beat the smaller run's in
            # every load-independent match, at 0.66 ms per move
            "channels": 96,
            "blocks": 3,
            "teacher_positions": 200_000,
            "teacher_epochs": 10,
            "teacher_replay": 8,
            # 3 copies of the whole opening book (4,835 positions): about 7% of the set, where
            # labels cost most (8 copies, 16%, did no better); the early book's first 27,278
            # positions (12-20 stones from ppo's games against search, once): fewer mistakes and
            # better against minimax 4 and 5 and alphabeta depth 8 than without it, and its
            # second round (44,450 in all) did no better, so the preset keeps the part that made
            # ppo; no middle book: taught with it (2 copies), the preset's run was level with
            # ppo, not better
            "teacher_book": "opening:3,early:1:27278",
            # then the default's alphabeta stages with half their games against minimax 4 (the
            # default keeps a third): 0.58 against alphabeta at 50 ms on two seeds (0.47 without
            # them), about 0.01 lower against minimax 4
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
            # the play weights are the mean of the last ones and the snapshot 50,000 steps before:
            # for the shipped seed 3.3% mistakes against 3.9%, 0.953 against 0.943 against
            # minimax 4, 0.601 against 0.568 at 50 ms in one benchmark run; over the recipe's
            # three seeds higher against minimax 4 and alphabeta at 50 ms on the test seeds, not
            # on the development ones
            "average_weights": 2,
            "eval_every": 250_000,
        },
    ),
}
