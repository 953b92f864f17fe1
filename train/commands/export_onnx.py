"""``connectx export-onnx MODEL -o agent.onnx``: a trained agent as an ONNX graph (see
:mod:`connectx_train.onnx_export` for its inputs and output)."""

from __future__ import annotations

import argparse
import logging

from connectx_gym.commands import bounded_int
from connectx_train.export import MAX_CHECK_POSITIONS

__all__ = ["add_arguments", "run"]

logger = logging.getLogger(__name__)

#: The one-line help of ``connectx --help`` (read from this source without importing it).
HELP = "write an ONNX graph of a model's policy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        help="weights-only .npz, SB3 .zip or 'ppo' (the shipped agent); needs the train and onnx "
        "extras",
    )
    parser.add_argument("-o", "--output", default="agent.onnx", help="output file (agent.onnx)")
    parser.add_argument(
        "--check",
        type=bounded_int(0, MAX_CHECK_POSITIONS),
        default=1000,
        metavar="N",
        help="random positions on which onnxruntime must reproduce the network's logits "
        f"before the file is written (default 1000, at most {MAX_CHECK_POSITIONS:,}; 0 to skip)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        from connectx_train.onnx_export import MASKED_LOGIT, OPSET, export_onnx
    except ImportError as error:
        raise ImportError(
            f'ONNX export needs the onnx and train extras: pip install "connectx-gym[onnx,train]" '
            f"({error})"
        ) from None
    path = export_onnx(args.model, args.output, check=args.check)
    logger.info(
        f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB, opset {OPSET}): inputs obs "
        f"[N, 2, rows, columns] and action_mask [N, columns], float32; output logits "
        f"[N, columns] with illegal columns at {MASKED_LOGIT:g}, argmax is the move"
    )
    return 0
