"""Every hyper-parameter of ``connectx train``: one documented dataclass, also on the command line.

Each field's ``metadata["help"]`` is its documentation and its ``--flag`` help text; field names map
to flags with dashes (``n_envs`` -> ``--n-envs``). Tuples take several values (``--panel random
onestep``). The defaults are the main run's, tuned to finish on 2 CPU cores in under 30
minutes.

Opponent mixtures
-----------------
A *mixture* is ``spec[@weight]`` items joined by ``+``, for example ``"minimax:depth=2@3+onestep"``:
each env plays a policy drawn with those weights (default weight 1). A spec may end in
``~epsilon``: ``"onestep~0.25"`` plays a random legal column 25% of the time (a softer stage).
``--opponent`` (repeatable) fixes the mixture for the whole run and turns the curriculum off;
otherwise the run walks through ``--curriculum`` stages, moving on when the recent win rate
against the current stage passes ``--advance-threshold``. From stage ``selfplay_from_stage`` on,
a ``selfplay_weight`` share of the games is played against frozen snapshots of the agent itself,
and a ``review_weight`` share against the earlier stages.

Teacher
-------
Before PPO, the run labels ``teacher_positions`` positions with the exact solver and teaches the
policy to keep each position's game value (:mod:`connectx_train.teacher`), together with copies of
the shipped books that ``teacher_book`` lists (:mod:`connectx_train.teacher_books`: exactly labelled
positions of 5 to 11, 12 to 20 and 21 to 28 stones, labelled once outside any run);
``teacher_replay`` supervised minibatches after each rollout keep that knowledge while PPO learns.
This is the run's only use of exact scores (no reward comes from the solver); ``--teacher-positions
0`` is pure PPO. The positions come from games seeded by ``teacher_seed`` (by default ``seed``);
with ``teacher_labels`` ``shipped`` (the default) the labels that the package ships (seed 0's on
6x7, :mod:`connectx_baselines.teacher_cache`: the same positions and values, labelled once) are read
in seconds and only the rest is labelled.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import textwrap
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from connectx_baselines._thread_choice import available_cores
from connectx_gym.bitboard import Geometry
from connectx_gym.env import check_opening_plies, most_opening_plies
from connectx_gym.outputs import write_text_atomically
from connectx_train.config_types import check_setting_type
from connectx_train.help_text import ARGUMENT_GROUPS, TRAIN_DESCRIPTION, TRAIN_EPILOG
from connectx_train.presets import PRESETS
from connectx_train.teacher_books import parse_teacher_books, upgrade_saved_books

__all__ = ["PRESETS", "TrainConfig", "add_arguments", "config_from_args", "parse_mixture"]


#: the choices of ``--vec-env``
VEC_ENVS = ("batched", "subproc", "dummy")
#: the choices of ``--teacher-labels``
TEACHER_LABELS = ("shipped", "label")
#: the choices of ``--precision``
PRECISIONS = ("auto", "bf16", "fp32")
#: the choices of ``--device``
DEVICES = ("auto", "cpu", "cuda")
#: random stones before each training game when ``opening_plies`` is unset (capped by the board):
#: 4 instead of 0 raised the mean against alphabeta at 50 ms over five seeds from 0.340 to 0.363
#: and against minimax 4 from 0.911 to 0.923 (docs/experiments/bench_agent.md)
DEFAULT_OPENING_PLIES = 4


def _field(default: Any, help: str, **kwargs: Any) -> Any:
    if isinstance(default, (list, tuple, dict)):
        return field(default_factory=lambda: default, metadata={"help": help, **kwargs})
    return field(default=default, metadata={"help": help, **kwargs})


@dataclass
class TrainConfig:
    """Hyper-parameters and settings of a MaskablePPO training run (see the module docstring)."""

    # run
    # 300,000 (was 1,000,000): PPO's updates in float32 on two cores without bfloat16 take about
    # 3 ms a step, so a million steps did not fit the 27 minutes (docs/experiments/hardware_runs.md)
    timesteps: int = _field(300_000, "total environment steps (agent moves) to train for")
    seed: int = _field(0, "seed of the run: network init, envs, opponents, evaluation")
    out: str = _field("runs/connectx", "output directory: checkpoints, logs, report, models")
    resume: bool = _field(False, "continue the run saved in --out from its last checkpoint")
    max_minutes: float = _field(
        27.0,
        "bound on this invocation's wall time, shared between its phases "
        "(connectx_train.budget): the "
        "teaching passes are cut to keep labelling and teaching within a third, PPO stops in "
        "time for the final panel; a stop while labelling or teaching keeps what is done for "
        "the next session; 0 means no limit",
    )
    progress_bar: bool = _field(
        True,
        "show PPO's progress bar when the output is a terminal (into a file or a pipe, and "
        "with --no-progress-bar, a progress line a minute instead)",
    )
    # board
    rows: int = _field(6, "board rows")
    columns: int = _field(7, "board columns")
    inarow: int = _field(4, "discs in a row needed to win")
    # vectorised envs
    n_envs: int = _field(32, "parallel environments")
    vec_env: str = _field(
        "batched",
        "'batched': every board in one numba-batched env, opponents answering all their boards "
        "at once (the training path); 'subproc': one process per env, for opponents without a "
        "batch answer that are slow in Python (a Kaggle agent, a .py file), whose moves it "
        "spreads over the cores; 'dummy': the envs one after another in this process, the "
        "plain reference path (a debugger steps into the opponent there)",
        choices=VEC_ENVS,
    )
    opening_plies: int | None = _field(
        None,
        "each training game starts after 0 to this many random stones (drawn per game: the env's "
        "opening_plies), so that games against deterministic opponents do not replay a few lines "
        "from the empty board; 0: every game from the empty board",
        type=int,
        default_text=f"{DEFAULT_OPENING_PLIES}, or the most the board allows where that is fewer",
    )
    torch_threads: int = _field(
        2,
        "torch CPU threads of the learner (0: torch's default); numpy's BLAS is held to one "
        "thread during the run, so the two thread pools do not fight over the cores",
    )
    precision: str = _field(
        "auto",
        "number format of the network's convolutions and matrix products in passes that "
        "compute gradients (PPO updates, teacher passes): 'fp32'; 'bf16' (bfloat16 products "
        "with float32 weights, optimizer and outputs: PPO updates about a third faster on CPUs "
        "with bfloat16 instructions, slower on others); 'auto': bf16 where the CPU has them "
        "(AVX512-BF16 or AMX), else fp32, and fp32 on a GPU. Rollouts, predict and evaluation "
        "stay float32",
        choices=PRECISIONS,
    )
    device: str = _field(
        "auto",
        "where the network computes (teacher passes, PPO updates, the rollouts' forward passes): "
        "'cpu', 'cuda' (the first GPU) or 'auto' (the GPU when torch sees one, else the CPU); "
        "opponents, self-play snapshots and labelling stay on the CPU. A resumed run may change "
        "it",
        choices=DEVICES,
    )
    # PPO
    n_steps: int = _field(64, "steps per env per rollout")
    batch_size: int = _field(256, "minibatch size")
    n_epochs: int = _field(4, "passes over each rollout")
    learning_rate: float = _field(5e-4, "Adam learning rate at the start")
    final_learning_rate: float = _field(1e-4, "learning rate at the end (linear decay)")
    gamma: float = _field(0.99, "discount factor")
    gae_lambda: float = _field(0.95, "GAE lambda")
    clip_range: float = _field(0.2, "PPO clip range")
    ent_coef: float = _field(0.01, "entropy bonus coefficient")
    vf_coef: float = _field(0.5, "value loss coefficient")
    max_grad_norm: float = _field(0.5, "gradient clipping norm")
    # network
    # 64 channels and 2 blocks (were 32 and 1): fewer mistakes and stronger against minimax 4 and
    # alphabeta over two seeds each (docs/experiments/bench_agent.md)
    channels: int = _field(64, "channels of the CNN's convolutions")
    blocks: int = _field(2, "residual blocks after the stem convolution")
    features_dim: int = _field(128, "size of the dense layer over the board")
    vf_layers: tuple[int, ...] = _field((64,), "hidden layers of the value head")
    # opponents
    opponent: tuple[str, ...] = _field(
        (),
        "fixed opponent mixture for the whole run (repeatable; turns the curriculum off)",
        action="append",
    )
    curriculum: tuple[str, ...] = _field(
        (
            "random",
            "onestep~0.5",
            "onestep~0.25",
            "onestep",
            "minimax:depth=2~0.25",
            "minimax:depth=2",
            "minimax:depth=3~0.25",
            "minimax:depth=3",
            "minimax:depth=4~0.25",
            "minimax:depth=4",
            # then alphabeta, keeping a third of the main share on minimax 4 (without it the
            # score against minimax 4 fell 0.03): against alphabeta at 50 ms 0.43 against 0.38
            # without these stages (seed 0, one benchmark run), 0.41 over four seeds; minimax 4
            # held; 4% more wall time
            "alphabeta:max_depth=6~0.25@2+minimax:depth=4",
            "alphabeta:max_depth=6@2+minimax:depth=4",
            "alphabeta:max_depth=8~0.25@2+minimax:depth=4",
            "alphabeta:max_depth=8@2+minimax:depth=4",
        ),
        "curriculum stages, each an opponent mixture, easiest first",
    )
    advance_threshold: float = _field(0.8, "recent win rate against a stage that moves it on")
    advance_window: int = _field(400, "episodes against the current stage in the win rate")
    review_weight: float = _field(0.15, "share of games against earlier stages")
    selfplay_weight: float = _field(0.25, "share of games against snapshots of the agent")
    selfplay_from_stage: int = _field(1, "first curriculum stage (0-based) with self-play")
    snapshot_every: int = _field(50_000, "steps between snapshots added to the self-play pool")
    pool_size: int = _field(5, "most recent snapshots kept in the self-play pool")
    average_weights: int = _field(
        1,
        "weights averaged into the play weights (final.npz, the final panel): the last ones and "
        "the newest average_weights - 1 snapshots before them, one per snapshot_every steps "
        "(stochastic weight averaging: connectx_train.averaging); 1: the last weights alone. "
        "final.zip "
        "keeps the last weights",
    )
    # teacher: the one place a run uses exact scores (--teacher-positions 0 turns it off)
    teacher_positions: int = _field(
        30_000,
        "positions labelled with their exact move values by the solver (baselines."
        "teacher_labels) to teach the policy by supervised learning before PPO; 0: pure PPO, "
        "no exact scores anywhere in the run",
    )
    teacher_seed: int | None = _field(
        None,
        "seed of the games the teacher positions are drawn from, so that runs of other seeds "
        "can be taught the same positions (the shipped labels are seed 0's: read in seconds "
        "instead of labelled)",
        type=int,
        default_text="--seed",
    )
    teacher_epochs: int = _field(10, "supervised passes over the teacher positions before PPO")
    scale_teacher: bool = _field(
        True,
        "size the teacher to the run: the supervised passes see at most as many positions as "
        "PPO's updates (timesteps * n_epochs), a share of every part when more "
        "(connectx_train.budget); "
        "--no-scale-teacher teaches the whole set however short the run",
    )
    teacher_replay: int = _field(
        8,
        "supervised minibatches of teacher positions after each rollout, so PPO keeps what "
        "was taught (0: none)",
    )
    teacher_workers: int = _field(available_cores(), "processes labelling the teacher positions")
    teacher_book: str = _field(
        "opening:2:1929,early:1:27278,middle:1:18916",
        "shipped books of exactly labelled positions added to the teacher positions, on the "
        "board sizes they cover (connectx_train.teacher_books): NAME:COPIES[:FIRST] items joined "
        "by "
        "commas, COPIES copies of book NAME's first FIRST positions (the whole book without "
        "FIRST); books: opening (5 to 11 stones, which a run's own labelling mostly cannot "
        "afford), early (12 to 20) and middle (21 to 28, both from the shipped network's games "
        "against search); 'none': the run's own positions only",
        metavar="BOOKS",
    )
    teacher_labels: str = _field(
        "shipped",
        "where the run's own teacher positions get their labels: 'shipped' reads those that the "
        "package ships (seed 0's on 6x7, made by the same labelling) and labels the rest with "
        "the exact solver, 'label' labels them all (the log says which)",
        choices=TEACHER_LABELS,
    )
    # evaluation and saving
    panel: tuple[str, ...] = _field(
        ("random", "onestep", "minimax:depth=2", "minimax:depth=3", "minimax:depth=4"),
        "fixed evaluation panel (both seats, seats alternating)",
    )
    eval_every: int = _field(100_000, "steps between panel evaluations (0: only at the end)")
    eval_games: int = _field(40, "games per panel opponent in periodic evaluations")
    final_games: int = _field(200, "games per panel opponent in the final report")
    checkpoint_every: int = _field(50_000, "steps between checkpoints")

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first setting of the wrong type or out of range."""
        for f in fields(self):
            check_setting_type(f.name, str(f.type), getattr(self, f.name))
        positive = (
            "timesteps",
            "rows",
            "columns",
            "inarow",
            "n_envs",
            "n_steps",
            "batch_size",
            "n_epochs",
            "channels",
            "features_dim",
            "advance_window",
            "pool_size",
            "snapshot_every",
            "average_weights",
            "eval_games",
            "final_games",
            "checkpoint_every",
            "teacher_epochs",
            "teacher_workers",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in (
            "blocks",
            "eval_every",
            "torch_threads",
            "max_minutes",
            "selfplay_from_stage",
            "teacher_positions",
            "teacher_replay",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("learning_rate", "final_learning_rate", "clip_range"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("gamma", "gae_lambda", "advance_threshold"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.review_weight < 0 or self.selfplay_weight < 0:
            raise ValueError("review_weight and selfplay_weight must be >= 0")
        if self.review_weight + self.selfplay_weight >= 1:
            raise ValueError("review_weight + selfplay_weight must be < 1")
        if self.vec_env not in VEC_ENVS:
            raise ValueError(f"vec_env must be one of {', '.join(VEC_ENVS)}, got {self.vec_env!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if self.teacher_labels not in TEACHER_LABELS:
            raise ValueError(
                f"teacher_labels must be one of {', '.join(TEACHER_LABELS)}, "
                f"got {self.teacher_labels!r}"
            )
        parse_teacher_books(self.teacher_book)
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.opening_plies is not None:
            check_opening_plies(self.opening_plies, self.geometry)
        if self.teacher_seed is not None and self.teacher_seed < 0:
            raise ValueError(f"teacher_seed must be >= 0, got {self.teacher_seed}")
        if not self.opponent and not self.curriculum:
            raise ValueError("give at least one --opponent or curriculum stage")
        if not self.panel:
            raise ValueError("the evaluation panel is empty")
        for mixture in (*self.opponent, *self.curriculum):
            parse_mixture(mixture)

    @property
    def geometry(self) -> Geometry:
        """The board of the run."""
        return Geometry(self.rows, self.columns, self.inarow)

    def training_opening_plies(self) -> int:
        """``opening_plies``, or when unset :data:`DEFAULT_OPENING_PLIES` capped at what the
        board allows (:func:`connectx_gym.env.most_opening_plies`: 3 on 4x5 with 3 in a row)."""
        if self.opening_plies is None:
            return min(DEFAULT_OPENING_PLIES, most_opening_plies(self.geometry))
        return self.opening_plies

    def to_json(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict."""
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainConfig:
        """Settings from :meth:`to_json`'s dict (unknown keys are an error). A setting added
        after the dict was saved takes the value that keeps the older run as it was
        (:data:`ADDED_LATER`) and settings since renamed are read in their new form
        (:func:`upgrade_saved_settings`), so ``--resume`` does not change what a run trains on."""
        data = upgrade_saved_settings(data)
        names = {f.name: f for f in fields(cls)}
        unknown = set(data) - set(names)
        if unknown:
            raise ValueError(f"unknown settings {sorted(unknown)}")
        data = {**ADDED_LATER, **data}
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        types = {f.name: str(f.type) for f in fields(cls)}
        for name, value in values.items():
            check_setting_type(name, types[name], value)
        return cls(**values)

    def save(self, path: Path) -> None:
        """Write the settings as JSON."""
        write_text_atomically(path, json.dumps(self.to_json(), indent=2))


def parse_mixture(text: str) -> list[tuple[str, float]]:
    """``"minimax:depth=2@3+onestep"`` -> ``[("minimax:depth=2", 3.0), ("onestep", 1.0)]``."""
    items: list[tuple[str, float]] = []
    for part in text.split("+"):
        spec, weight = part.strip(), 1.0
        head, at, tail = spec.rpartition("@")
        if at:
            with contextlib.suppress(ValueError):
                spec, weight = head.strip(), float(tail)
        if not spec:
            raise ValueError(f"empty opponent in mixture {text!r}")
        if not weight > 0:
            raise ValueError(f"opponent weight must be > 0 in {text!r}")
        items.append((spec, weight))
    return items


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--preset`` and one ``--flag`` per :class:`TrainConfig` field to ``parser``, in the
    groups of :data:`ARGUMENT_GROUPS` (defaults: None = unset)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = TRAIN_DESCRIPTION
    parser.epilog = TRAIN_EPILOG + "\n" + textwrap.fill(parser.epilog or "", width=100)
    groups = {title: parser.add_argument_group(title) for title, _ in ARGUMENT_GROUPS}
    group_of = {name: groups[title] for title, names in ARGUMENT_GROUPS for name in names}
    first_group = groups[ARGUMENT_GROUPS[0][0]]
    first_group.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help="start from a named bundle of settings (flags given beside it override it): "
        + "; ".join(f"{name}: {text}" for name, (text, _) in sorted(PRESETS.items())),
    )
    for f in fields(TrainConfig):
        group = group_of.get(f.name, first_group)
        flag = "--" + f.name.replace("_", "-")
        help_text = f.metadata["help"]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        default_text = f.metadata.get("default_text", default)
        if f.type in ("bool", bool):
            group.add_argument(
                flag,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=f"{help_text} (default: {default})",
            )
        elif f.metadata.get("action") == "append":
            group.add_argument(
                flag, action="append", default=None, metavar="MIXTURE", help=help_text
            )
        elif isinstance(default, tuple):
            kind = int if all(isinstance(v, int) for v in default) and default else str
            group.add_argument(
                flag,
                nargs="*",
                type=kind,
                default=None,
                help=f"{help_text} (default: {' '.join(map(str, default))})",
            )
        else:
            group.add_argument(
                flag,
                type=f.metadata.get("type", type(default)),
                default=None,
                choices=f.metadata.get("choices"),
                metavar=f.metadata.get("metavar"),
                help=f"{help_text} (default: {default_text})",
            )


def config_from_args(args: argparse.Namespace, base: TrainConfig | None = None) -> TrainConfig:
    """A :class:`TrainConfig` from parsed flags: those given override ``base`` (a resumed run's
    saved settings), else the ``--preset``'s settings, else the defaults."""
    preset = getattr(args, "preset", None)
    if preset is not None and base is not None:
        raise ValueError("--preset cannot be combined with --resume: a run keeps its settings")
    if preset is not None:
        config = preset_config(preset)
    else:
        config = dataclasses.replace(base) if base is not None else TrainConfig()
    for f in fields(TrainConfig):
        value = getattr(args, f.name, None)
        if value is not None:
            setattr(config, f.name, tuple(value) if isinstance(value, list) else value)
    config.validate()
    return config


def preset_config(name: str) -> TrainConfig:
    """The settings of preset ``name`` (see :data:`PRESETS`)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(sorted(PRESETS))}")
    return TrainConfig(**PRESETS[name][1])


#: settings whose default changed what a run does when they were added, with the value that
#: reproduces a run saved before them (read by :meth:`TrainConfig.from_json`)
ADDED_LATER: dict[str, Any] = {
    "scale_teacher": False,
    "opening_plies": 0,
}


def upgrade_saved_settings(saved: dict[str, Any]) -> dict[str, Any]:
    """Settings saved by an older version in today's names: the six book settings as one
    ``teacher_book`` list (:func:`connectx_train.teacher_books.upgrade_saved_books`) and ``vec_env``
    ``'auto'`` (subprocesses, a choice since removed) as ``'subproc'``."""
    data = upgrade_saved_books(saved)
    if data.get("vec_env") == "auto":
        data["vec_env"] = "subproc"
    return data
