"""``connectx train``: train a MaskablePPO agent (with no flags, the README's default run)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from connectx_gym.commands import CommandError
from connectx_train.config_cli import add_arguments as _add_config_arguments

__all__ = ["add_arguments", "run"]

#: The one-line help of ``connectx --help`` (read from this source without importing it).
HELP = "train a MaskablePPO agent (curriculum, self-play)"

EXIT_INTERRUPTED = 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _add_config_arguments(parser)  # connectx_train.config_cli needs no torch


def run(args: argparse.Namespace) -> int:
    from connectx_train.config import TrainConfig
    from connectx_train.config_cli import config_from_args, read_config

    saved = None
    if args.resume:
        path = Path(args.out or TrainConfig().out) / "config.json"
        if not path.is_file():
            raise CommandError(f"nothing to resume: {path} does not exist")
        try:
            saved = read_config(path)
        except ValueError as error:
            raise CommandError(f"cannot resume: {error}") from None
    config = config_from_args(args, saved)  # bad settings fail here, before torch loads
    try:
        from connectx_train.trainer import RunInterruptedError, train
    except ImportError as error:
        raise CommandError(
            f'training needs the train extra: pip install "connectx-gym[train]" ({error})'
        ) from None
    try:
        report = train(config)
    except RunInterruptedError as stop:
        print(f"connectx: {stop}", file=sys.stderr)
        return getattr(stop, "exit_status", EXIT_INTERRUPTED)
    for spec, result in report["panel"].items():
        low, high = result["ci95"]
        print(f"  {spec:<20} score {result['score']:.3f} [95% CI {low:.3f}-{high:.3f}]")
    return 0
