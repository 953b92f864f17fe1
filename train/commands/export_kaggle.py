"""``connectx export-kaggle MODEL``: a self-contained Kaggle ``main.py`` (numpy only)."""

from __future__ import annotations

import argparse
import logging

__all__ = ["add_arguments", "run"]

logger = logging.getLogger(__name__)

#: The one-line help of ``connectx --help`` (read from this source without importing it).
HELP = "write a self-contained Kaggle main.py from a model"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        help="weights-only .npz, SB3 .zip (needs the train extra), 'ppo' (the shipped agent) or "
        "a search with its network, such as 'mcts:net=ppo,time_budget=0.5'",
    )
    parser.add_argument("-o", "--output", default="main.py", help="output file (main.py)")


def run(args: argparse.Namespace) -> int:
    from connectx_train.export import export_kaggle
    from connectx_train.kaggle_search import export_search, is_search_spec

    if is_search_spec(args.model):
        path = export_search(args.model, args.output)
    else:
        path = export_kaggle(args.model, args.output)
    size = path.stat().st_size / 1e6
    logger.info("wrote %s (%.2f MB): submit it as your Kaggle agent", path, size)
    return 0
