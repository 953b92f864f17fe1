"""Every setting of ``connectx train``: one documented dataclass, each field declared once.

Each field is a :func:`connectx_train.config_types.setting`: its default, help group, help text,
bounds and what ``--resume`` may do with it, side by side; field names map to flags with dashes
(``n_envs`` -> ``--n-envs``, :mod:`connectx_train.config_cli`). The defaults are the main run's.
The opponents' grammar and the curriculum: ``connectx train --help``; the teacher, the run's only
use of exact scores: :mod:`connectx_train.teacher`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from connectx_baselines._thread_choice import available_cores
from connectx_gym.bitboard import MAX_CELLS, MAX_SIDE, Geometry
from connectx_gym.env import check_opening_plies, quiet_opening_plies
from connectx_gym.outputs import write_text_atomically
from connectx_gym.ray_executor import check_address
from connectx_train.config_types import (
    DEFAULT_OPENING_PLIES,
    DEVICES,
    EVALUATION,
    MAX_REPEATS,
    MAX_TRAIN_SEED,
    MAX_WIDTH,
    NETWORK,
    OPPONENTS,
    PERFORMANCE,
    PRECISIONS,
    REPORT_SPLITS,
    RUN,
    TEACHER,
    TEACHER_LABELS,
    VEC_ENVS,
    OnResume,
    board_setting,
    check_init_weights,
    check_rollout,
    check_setting,
    check_setting_type,
    count_setting,
    declaration,
    machine_setting,
    network_setting,
    parse_mixture,
    parse_teacher_books,
    ppo_setting,
    setting,
    share_setting,
    upgrade_saved_settings,
)
from connectx_train.presets import PRESETS

__all__ = [
    "PRESETS",
    "TrainConfig",
    "added_later",
    "parse_mixture",
    "preset_config",
    "settings_on_resume",
]

FREE, CHANGES, FIXED = OnResume.FREE, OnResume.CHANGES, OnResume.FIXED


@dataclass
class TrainConfig:
    """Hyper-parameters and settings of a MaskablePPO training run (see the module docstring)."""

    # run and output
    timesteps: int = count_setting(
        300_000, "total environment steps (agent moves) to train for", RUN, CHANGES
    )
    seed: int = setting(
        0,
        help="seed of the run: network init, envs, opponents, evaluation",
        group=RUN,
        on_resume=FIXED,
        bounds=(0, MAX_TRAIN_SEED),
    )
    out: str = setting(
        "runs/connectx",
        help="output directory: checkpoints, config.json, logs, report, models",
        group=RUN,
        on_resume=FREE,
    )
    resume: bool = setting(
        False,
        help="continue the run saved in --out from its last checkpoint, with its saved settings",
        group=RUN,
        on_resume=FREE,
    )
    max_minutes: float = setting(
        27.0,
        help="bound on this command's wall time, shared between its phases "
        "(connectx_train.budget): the teaching passes are cut to keep labelling and teaching "
        "within a third, PPO stops in time for the final panel; a stop while labelling or "
        "teaching keeps what is done for the next command; 0 means no limit",
        group=RUN,
        on_resume=FREE,
        bounds=(0, 10**6),
    )
    checkpoint_every: int = count_setting(50_000, "steps between checkpoints", RUN, CHANGES)
    progress_bar: bool = setting(
        True,
        help="show PPO's progress bar when the output is a terminal (into a file or a pipe, and "
        "with --no-progress-bar, a progress line a minute instead)",
        group=RUN,
        on_resume=FREE,
    )
    # board
    rows: int = board_setting(6, help="board rows", bounds=(1, MAX_SIDE))
    columns: int = board_setting(7, help="board columns", bounds=(1, MAX_SIDE))
    inarow: int = board_setting(4, help="discs in a row needed to win", bounds=(1, MAX_SIDE))
    # opponents and curriculum
    opponent: tuple[str, ...] = setting(
        (),
        help="fixed opponent mixture for the whole run (repeatable; turns the curriculum off)",
        group=OPPONENTS,
        on_resume=CHANGES,
        check=parse_mixture,
        metavar="MIXTURE",
        repeatable=True,
    )
    curriculum: tuple[str, ...] = setting(
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
            # alphabeta, a third of the main share kept on minimax 4 so that it is not forgotten
            "alphabeta:max_depth=6~0.25@2+minimax:depth=4",
            "alphabeta:max_depth=6@2+minimax:depth=4",
            "alphabeta:max_depth=8~0.25@2+minimax:depth=4",
            "alphabeta:max_depth=8@2+minimax:depth=4",
        ),
        help="curriculum stages, each an opponent mixture, easiest first",
        group=OPPONENTS,
        on_resume=CHANGES,
        max_items=MAX_REPEATS,
        check=parse_mixture,
    )
    advance_threshold: float = share_setting(0.8, "recent win rate that moves a stage on")
    advance_window: int = setting(
        400,
        help="episodes against the current stage in the win rate",
        group=OPPONENTS,
        on_resume=CHANGES,
        bounds=(1, 10**6),
    )
    review_weight: float = share_setting(0.15, "share of games against earlier stages")
    selfplay_weight: float = share_setting(0.25, "share of games against snapshots of the agent")
    selfplay_from_stage: int = setting(
        1,
        help="first curriculum stage (0-based) with self-play",
        group=OPPONENTS,
        on_resume=CHANGES,
        bounds=(0, MAX_REPEATS),
    )
    snapshot_every: int = count_setting(
        50_000, "steps between snapshots added to the self-play pool", OPPONENTS, CHANGES
    )
    pool_size: int = setting(
        5,
        help="most recent snapshots kept in the self-play pool",
        group=OPPONENTS,
        on_resume=CHANGES,
        bounds=(1, MAX_REPEATS),
    )
    opening_plies: int | None = setting(
        None,
        help="each training game starts after 0 to this many random stones (drawn per game: the "
        "env's opening_plies), so that games against deterministic opponents do not replay a few "
        "lines from the empty board; past 2*inarow-3 (5 on 6x7), random play's middle and end "
        "positions, their wins in one unplayed; 0: every game from the empty board",
        group=OPPONENTS,
        on_resume=CHANGES,
        bounds=(0, MAX_CELLS),
        added_later=0,
        default_text=f"{DEFAULT_OPENING_PLIES}, or 2*inarow-3 (cells-2 at most) if fewer",
    )
    # teacher: the one place a run uses exact scores (--teacher-positions 0 turns it off)
    teacher_positions: int = count_setting(
        30_000,
        "positions labelled with their exact move values by the solver "
        "(connectx_baselines.teacher_labels) to teach the policy by supervised learning before "
        "PPO; 0: pure PPO, no exact scores anywhere in the run",
        TEACHER,
        CHANGES,
        low=0,
    )
    teacher_seed: int | None = setting(
        None,
        help="seed of the games the teacher positions are drawn from, so that runs of other seeds "
        "can be taught the same positions (the shipped labels are seed 0's: read in seconds "
        "instead of labelled)",
        group=TEACHER,
        on_resume=CHANGES,
        bounds=(0, MAX_TRAIN_SEED),
        default_text="--seed",
    )
    teacher_learning_rate: float = setting(
        2e-3,
        help="Adam's rate at the start of the supervised passes (cosine-decayed to zero); lower "
        "it to refine a network given by --init-weights rather than unlearn it",
        group=TEACHER,
        on_resume=CHANGES,
        bounds=(0, 1),
        low_excluded=True,
    )
    teacher_epochs: int = setting(
        10,
        help="supervised passes over the teacher positions before PPO",
        group=TEACHER,
        on_resume=CHANGES,
        bounds=(1, MAX_REPEATS),
    )
    scale_teacher: bool = setting(
        True,
        help="size the teacher to the run: the supervised passes see at most as many positions "
        "as PPO's updates (timesteps * n_epochs), a share of every part when more "
        "(connectx_train.budget); --no-scale-teacher teaches the whole set however short the run",
        group=TEACHER,
        on_resume=CHANGES,
        added_later=False,
    )
    teacher_replay: int = setting(
        8,
        help="supervised minibatches of teacher positions after each rollout, so PPO keeps what "
        "was taught (0: none)",
        group=TEACHER,
        on_resume=CHANGES,
        bounds=(0, MAX_REPEATS),
    )
    teacher_book: str = setting(
        "opening:2:1929,early:1:27278,middle:1:18916,random:1:21499",
        help="shipped books of exactly labelled positions added to the teacher positions, on the "
        "board sizes they cover (connectx_train.config_types): NAME:COPIES[:FIRST] items joined "
        "by commas, COPIES copies of book NAME's first FIRST positions (the whole book without "
        "FIRST); books: opening (5 to 11 stones, which a run's own labelling mostly cannot "
        "afford), early (12 to 20) and middle (21 to 28, both from the shipped network's games "
        "against search), random (12 stones or more, from games of random legal moves); 'none': "
        "the run's own positions only",
        group=TEACHER,
        on_resume=CHANGES,
        check=parse_teacher_books,
        metavar="BOOKS",
    )
    teacher_labels: str = setting(
        "shipped",
        help="where the run's own teacher positions get their labels: 'shipped' reads those that "
        "the package ships (seed 0's on 6x7, made by the same labelling) and labels the rest with "
        "the exact solver, 'label' labels them all (the log says which)",
        group=TEACHER,
        on_resume=FREE,
        choices=TEACHER_LABELS,
    )
    teacher_workers: int = setting(
        0,
        help="processes labelling the teacher positions (0: one per core this process may run "
        "on, counted when the run starts)",
        group=TEACHER,
        on_resume=FREE,
        bounds=(0, MAX_WIDTH),
    )
    # PPO: its checkpoint holds them
    n_steps: int = ppo_setting(64, help="steps per env per rollout", bounds=(1, 10**6))
    batch_size: int = ppo_setting(256, help="minibatch size", bounds=(2, 10**7))
    n_epochs: int = ppo_setting(4, help="passes over each rollout", bounds=(1, MAX_REPEATS))
    learning_rate: float = ppo_setting(
        5e-4, help="Adam learning rate at the start", bounds=(0, 1), low_excluded=True
    )
    final_learning_rate: float = ppo_setting(
        1e-4, help="learning rate at the end (linear decay)", bounds=(0, 1), low_excluded=True
    )
    gamma: float = ppo_setting(0.99, help="discount factor", bounds=(0, 1))
    gae_lambda: float = ppo_setting(0.95, help="GAE lambda", bounds=(0, 1))
    clip_range: float = ppo_setting(0.2, help="PPO clip range", bounds=(0, 1), low_excluded=True)
    ent_coef: float = ppo_setting(0.01, help="entropy bonus coefficient", bounds=(0, 1))
    vf_coef: float = ppo_setting(0.5, help="value loss coefficient", bounds=(0, 100))
    max_grad_norm: float = ppo_setting(
        0.5, help="gradient clipping norm", bounds=(0, 10**6), low_excluded=True
    )
    # network: its checkpoint holds it
    init_weights: str = network_setting(
        "",
        help="start from these weights instead of a fresh network: a shipped network's name "
        "(ppo, ppo-v1) or a weights-only .npz of the same network settings (--channels, "
        "--blocks, --features-dim; a value head is read when the file has one)",
        check=check_init_weights,
        metavar="WEIGHTS",
        default_text="'': a fresh network",
    )
    channels: int = network_setting(64, help="channels of the CNN's convolutions", bounds=(1, 1024))
    blocks: int = network_setting(
        2, help="residual blocks after the stem convolution", bounds=(0, 64)
    )
    features_dim: int = network_setting(
        128, help="size of the dense layer over the board", bounds=(1, MAX_WIDTH)
    )
    vf_layers: tuple[int, ...] = network_setting(
        (64,),
        help="hidden layers of the value head, their sizes",
        bounds=(1, MAX_WIDTH),
        max_items=16,
    )
    average_weights: int = setting(
        1,
        help="weights averaged into the play weights (final.npz, the final panel): the last ones "
        "and the newest average_weights - 1 snapshots before them, one per snapshot_every steps "
        "(stochastic weight averaging: connectx_train.finish); 1: the last weights alone. "
        "final.zip keeps the last weights",
        group=NETWORK,
        on_resume=FREE,
        bounds=(1, MAX_REPEATS),
    )
    # evaluation
    panel: tuple[str, ...] = setting(
        ("random", "onestep", "minimax:depth=2", "minimax:depth=3", "minimax:depth=4"),
        help="fixed evaluation panel (both seats, seats alternating)",
        group=EVALUATION,
        on_resume=CHANGES,
        max_items=MAX_REPEATS,
    )
    eval_every: int = count_setting(
        100_000, "steps between panel evaluations (0: only at the end)", EVALUATION, CHANGES, 0
    )
    eval_games: int = count_setting(
        40, "games per panel opponent in periodic evaluations", EVALUATION, CHANGES
    )
    final_games: int = count_setting(
        200, "games per panel opponent in the final report", EVALUATION, CHANGES
    )
    report_split: str = setting(
        "test",
        help="split of the shipped labelled positions whose mistake rates the final report "
        "gives: 'test', or 'dev' (what the periodic evaluations read) for an experiment that "
        "decides on the dev split and reads the test split only once, afterwards",
        group=EVALUATION,
        on_resume=FREE,
        choices=REPORT_SPLITS,
    )
    # performance
    n_envs: int = setting(
        32, help="parallel environments", group=PERFORMANCE, on_resume=CHANGES, bounds=(1, 4096)
    )
    vec_env: str = setting(
        "batched",
        help="'batched': every board in one numba-batched env, opponents answering all their "
        "boards at once (the training path); 'subproc': one process per env, for opponents "
        "without a batch answer that are slow in Python (a Kaggle agent, a .py file), whose "
        "moves it spreads over the cores; 'dummy': the envs one after another in this process, "
        "the plain reference path (a debugger steps into the opponent there)",
        group=PERFORMANCE,
        on_resume=CHANGES,
        choices=VEC_ENVS,
    )
    torch_threads: int = machine_setting(
        2,
        help="torch CPU threads of the learner (0: torch's default); numpy's BLAS is held to one "
        "thread during the run, so the two thread pools do not fight over the cores",
        bounds=(0, MAX_WIDTH),
    )
    precision: str = setting(
        "auto",
        help="number format of the network's convolutions and matrix products in passes that "
        "compute gradients (PPO updates, teacher passes): 'fp32'; 'bf16' (bfloat16 products with "
        "float32 weights, optimizer and outputs: faster on CPUs with bfloat16 instructions, "
        "slower on others); 'auto': bf16 where the CPU has them (AVX512-BF16 or AMX), else fp32, "
        "and fp32 on a GPU. Rollouts, predict and evaluation stay float32",
        group=PERFORMANCE,
        on_resume=CHANGES,
        choices=PRECISIONS,
    )
    device: str = machine_setting(
        "auto",
        help="where the network computes (teacher passes, PPO updates, the rollouts' forward "
        "passes): 'cpu', 'cuda' (the first GPU) or 'auto' (the GPU when torch sees one, else the "
        "CPU); opponents, self-play snapshots and labelling stay on the CPU",
        choices=DEVICES,
    )
    ray: str = machine_setting(
        "",
        help="label the teacher positions as Ray tasks and, with --vec-env batched, play the "
        "rollouts' env slices on Ray actors, with a local run's results: the "
        "flag alone or 'local' starts Ray on this machine, ADDRESS (HOST:PORT, ray://HOST:PORT, "
        "auto: the cluster this machine is in) joins that cluster (needs the ray extra)",
        check=lambda text: text in ("", "local") or check_address(text),
        metavar="ADDRESS",
        default_text="'': --teacher-workers local processes",
        flag_alone="local",
    )
    env_slices: int = setting(
        1,
        help="slices the --n-envs boards are cut into (--vec-env batched), each with its own "
        "random stream: the same seed and slices play the same games with and without --ray, "
        "where each slice is a Ray actor holding an equal share of the cluster's CPUs",
        group=PERFORMANCE,
        on_resume=CHANGES,
        bounds=(1, MAX_WIDTH),
    )

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first setting of the wrong type or out of its bounds,
        or settings that do not go together."""
        for f in fields(self):
            check_setting(f.name, str(f.type), declaration(f), getattr(self, f.name))
        geometry = self.geometry  # the board's own limits (cells)
        if self.opening_plies is not None:
            check_opening_plies(self.opening_plies, geometry)
        if self.review_weight + self.selfplay_weight >= 1:
            raise ValueError("review_weight + selfplay_weight must be < 1")
        if not self.opponent and not self.curriculum:
            raise ValueError("give at least one --opponent or curriculum stage")
        if not self.panel:
            raise ValueError("the evaluation panel is empty")
        if self.env_slices > 1 and (self.vec_env != "batched" or self.env_slices > self.n_envs):
            raise ValueError("--env-slices above 1 needs --vec-env batched and --n-envs >= it")
        check_rollout(self.n_envs, self.n_steps, self.timesteps)

    @property
    def geometry(self) -> Geometry:
        """The board of the run."""
        return Geometry(self.rows, self.columns, self.inarow)

    def training_opening_plies(self) -> int:
        """``opening_plies``, or when unset :data:`DEFAULT_OPENING_PLIES` capped at the longest
        opening where no stone completes a line (:func:`connectx_gym.env.quiet_opening_plies`)."""
        if self.opening_plies is None:
            return min(DEFAULT_OPENING_PLIES, quiet_opening_plies(self.geometry))
        return self.opening_plies

    def labelling_workers(self) -> int:
        """``teacher_workers``, or when 0 the cores this process may run on (counted now)."""
        return self.teacher_workers or available_cores()

    def learning_settings(self) -> dict[str, Any]:
        """The settings that shape what the run learns, as :meth:`to_json` writes them: all but
        those declared :attr:`OnResume.FREE` (where the run writes, its time bound, threads,
        processes and device, the averaging at its end)."""
        free = settings_on_resume(OnResume.FREE)
        return {k: v for k, v in self.to_json().items() if k not in free}

    def to_json(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict."""
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainConfig:
        """Settings from :meth:`to_json`'s dict (unknown keys are an error). A setting added
        after the dict was saved takes the value that keeps the older run as it was
        (:func:`added_later`) and settings since renamed are read in their new form
        (:func:`upgrade_saved_settings`), so ``--resume`` does not change what a run trains on."""
        data = upgrade_saved_settings(data)
        names = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(map(repr, unknown))}")
        values: dict[str, Any] = {**added_later(), **data}
        for name, value in values.items():
            check_setting_type(name, str(names[name].type), value)
            values[name] = tuple(value) if isinstance(value, list) else value
        return cls(**values)

    def save(self, path: Path) -> None:
        """Write the settings as JSON."""
        write_text_atomically(path, json.dumps(self.to_json(), indent=2))


def settings_on_resume(kind: OnResume) -> frozenset[str]:
    """The names of the settings that :class:`OnResume` ``kind`` declares."""
    return frozenset(f.name for f in fields(TrainConfig) if declaration(f).on_resume is kind)


def added_later() -> dict[str, Any]:
    """The settings whose default would change a run saved before they existed, with the value
    that reproduces such a run (read by :meth:`TrainConfig.from_json`)."""
    declared = {f.name: declaration(f) for f in fields(TrainConfig)}
    return {name: d.added_later for name, d in declared.items() if d.has_added_later}


def preset_config(name: str) -> TrainConfig:
    """The settings of preset ``name`` (see :data:`PRESETS`)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(sorted(PRESETS))}")
    return TrainConfig(**PRESETS[name][1])
