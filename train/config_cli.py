"""``connectx train``'s flags and where a run's settings come from: one ``--flag`` per
:class:`connectx_train.config.TrainConfig` field, made from its declaration (group, help, type and
bounds: a value out of them is a one-line argparse error), over a starting point (the defaults,
``--preset NAME``, ``--config FILE`` or, with ``--resume``, the run's saved settings); and the
text of ``connectx train --help`` around the flags (:data:`TRAIN_DESCRIPTION`,
:data:`TRAIN_EPILOG`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import textwrap
from dataclasses import fields
from pathlib import Path
from typing import Any

from connectx_train.config import PRESETS, TrainConfig, preset_config
from connectx_train.config_types import GROUPS, RUN, OnResume, argument_type, declaration

__all__ = [
    "TRAIN_DESCRIPTION",
    "TRAIN_EPILOG",
    "add_arguments",
    "check_resume",
    "config_from_args",
    "read_config",
]

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--preset``, ``--config`` and one ``--flag`` per :class:`TrainConfig` field to
    ``parser``, in the help groups their declarations name (defaults: None = unset)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = TRAIN_DESCRIPTION
    parser.epilog = TRAIN_EPILOG + "\n" + textwrap.fill(parser.epilog or "", width=100)
    groups = {title: parser.add_argument_group(title) for title in GROUPS}
    groups[RUN].add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help="start from a named bundle of settings (flags given beside it override it): "
        + "; ".join(f"{name}: {text}" for name, (text, _) in sorted(PRESETS.items())),
    )
    groups[RUN].add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="start from the settings in FILE, the config.json a run writes into its --out "
        "(flags given beside it override them)",
    )
    defaults = TrainConfig()
    for f in fields(TrainConfig):
        declared = declaration(f)
        flag = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        shown = declared.default_text or (
            " ".join(map(str, default)) if isinstance(default, tuple) else default
        )
        options: dict[str, Any] = {"default": None, "help": f"{declared.help} (default: {shown})"}
        if isinstance(default, bool):
            options["action"] = argparse.BooleanOptionalAction
        else:
            options["type"] = argument_type(f.name, str(f.type), declared)
            options["metavar"] = declared.metavar
            if declared.repeatable:
                options["action"] = "append"
                options["help"] = declared.help
            elif isinstance(default, tuple):
                options["nargs"] = "*"
            else:
                options["choices"] = declared.choices
            if declared.flag_alone is not None:
                options["nargs"], options["const"] = "?", declared.flag_alone
        groups[declared.group].add_argument(flag, **options)


def config_from_args(args: argparse.Namespace, saved: TrainConfig | None = None) -> TrainConfig:
    """A :class:`TrainConfig` from parsed flags: those given override ``saved`` (a resumed run's
    settings: a flag may not change one its checkpoint holds, :func:`check_resume`), else the
    ``--config`` file's settings, else the ``--preset``'s, else the defaults."""
    preset, config_file = getattr(args, "preset", None), getattr(args, "config", None)
    if saved is not None and (preset is not None or config_file is not None):
        start = "--preset" if preset is not None else "--config"
        raise ValueError(f"{start} cannot be combined with --resume: a run keeps its settings")
    if preset is not None and config_file is not None:
        raise ValueError("--preset and --config are both starting points: give one of them")
    if saved is not None:
        base = saved
    elif config_file is not None:
        # the file's run is not resumed by starting from its settings
        base = dataclasses.replace(read_config(Path(config_file)), resume=False)
    elif preset is not None:
        base = preset_config(preset)
    else:
        base = TrainConfig()
    given: dict[str, Any] = {}
    for f in fields(TrainConfig):
        value = getattr(args, f.name, None)
        if value is not None:
            given[f.name] = tuple(value) if isinstance(value, list) else value
    config = dataclasses.replace(base, **given)
    if saved is not None:
        check_resume(saved, config)
    config.validate()
    return config


def check_resume(saved: TrainConfig, config: TrainConfig) -> None:
    """``ValueError`` naming the first setting declared :attr:`OnResume.FIXED` (held by the run's
    checkpoint) that ``config``, a ``--resume``'s settings, changes from the run's ``saved``
    settings."""
    for f in fields(TrainConfig):
        if declaration(f).on_resume is not OnResume.FIXED:
            continue
        before, after = getattr(saved, f.name), getattr(config, f.name)
        if before != after:
            flag = "--" + f.name.replace("_", "-")
            raise ValueError(
                f"{flag} cannot change on --resume (the run has {_shown(before)}, asked for "
                f"{_shown(after)}): start a new run in another --out, for example with "
                f"--config {Path(saved.out) / 'config.json'}"
            )


def _shown(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, tuple) else str(value)


def read_config(path: Path) -> TrainConfig:
    """The settings in the ``config.json`` at ``path`` (:meth:`TrainConfig.from_json`, older
    files read in today's names); ``ValueError`` naming the file and the fault: unreadable, not
    JSON, an unknown setting or one of the wrong type."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror or error}") from None
    except ValueError as error:  # JSON and UTF-8 errors alike
        raise ValueError(f"{path} is not a saved config: not JSON ({error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a saved config: not a JSON object of settings")
    try:
        return TrainConfig.from_json(data)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{path} is not a saved config: {error}") from None
