"""The text of ``connectx train --help``: its description, its epilog and the groups its flags are
listed in (plain data, read by :func:`connectx_train.config.add_arguments`)."""

from __future__ import annotations

__all__ = ["ARGUMENT_GROUPS", "TRAIN_DESCRIPTION", "TRAIN_EPILOG"]

#: ``connectx train --help`` groups: (title, the fields in it). A field in none of them is listed
#: under the first group.
ARGUMENT_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "run and output",
        ("timesteps", "seed", "out", "resume", "max_minutes", "checkpoint_every", "progress_bar"),
    ),
    ("board", ("rows", "columns", "inarow")),
    (
        "opponents and curriculum",
        (
            "opponent",
            "curriculum",
            "advance_threshold",
            "advance_window",
            "review_weight",
            "selfplay_weight",
            "selfplay_from_stage",
            "snapshot_every",
            "pool_size",
            "opening_plies",
        ),
    ),
    (
        "teacher (supervised learning from exact solver labels)",
        (
            "teacher_positions",
            "teacher_seed",
            "teacher_epochs",
            "teacher_replay",
            "teacher_workers",
            "teacher_book",
            "teacher_labels",
        ),
    ),
    (
        "PPO",
        (
            "n_steps",
            "batch_size",
            "n_epochs",
            "learning_rate",
            "final_learning_rate",
            "gamma",
            "gae_lambda",
            "clip_range",
            "ent_coef",
            "vf_coef",
            "max_grad_norm",
        ),
    ),
    ("network", ("channels", "blocks", "features_dim", "vf_layers", "average_weights")),
    ("evaluation", ("panel", "eval_every", "eval_games", "final_games")),
    ("performance", ("n_envs", "vec_env", "torch_threads", "precision", "device", "workers")),
)

TRAIN_DESCRIPTION = """\
Train a MaskablePPO agent: supervised passes on positions labelled by the exact solver (the
teacher), then PPO against a curriculum of search opponents and snapshots of itself. Writes
checkpoints, report.md, final.zip (SB3) and final.npz (weights only) to --out.

Start with:
  connectx train                                   the default run (about 30 minutes on 2 cores)
  connectx train --opponent minimax:depth=3        one fixed opponent instead of the curriculum
  connectx train --timesteps 200000 --out runs/a   a shorter run into another folder
  connectx train --preset strong                   the settings that made the shipped 'ppo'
  connectx train --resume --out runs/a             go on after Ctrl-C, SIGTERM or a time limit
"""

TRAIN_EPILOG = """\
Opponent mixtures (--opponent, --curriculum stages): policy specs joined by '+', each with an
optional '@weight' (default 1): "minimax:depth=2@3+onestep" plays minimax depth 2 in three games
of four and onestep in the fourth. Any spec may end in '~EPS' for a random legal move with
probability EPS: "minimax:depth=3~0.25".
"""
