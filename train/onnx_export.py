"""ONNX export: a trained agent as one ``.onnx`` file, for inference outside Python and torch.

``connectx export-onnx MODEL -o agent.onnx`` (or :func:`export_onnx`) converts a weights-only
``.npz`` or an SB3 MaskablePPO ``.zip`` (a :class:`connectx_train.networks.ConnectXPolicy`, as
``connectx train`` saves) into an ONNX graph with

- inputs ``obs``: float32 ``[N, 2, rows, columns]``, the ``ConnectX-v0`` observation (plane 0 the
  discs of the player to move, plane 1 the opponent's, row 0 at the top), and ``action_mask``:
  float32 ``[N, columns]``, 1 for a legal column and 0 for a full one;
- output ``logits``: float32 ``[N, columns]``, the policy's logits with illegal columns set to
  :data:`MASKED_LOGIT` (-1e9), so ``argmax`` is the agent's deterministic move and ``softmax`` its
  move probabilities.

The batch dimension ``N`` is dynamic (named ``batch``); rows and columns are fixed to the model's
board, which is also stored in the file's metadata (``connectx.rows``, ``connectx.columns``,
``connectx.inarow``). The graph uses ONNX opset :data:`OPSET` (standard operators only: Conv,
MatMul, Gemm, Relu, Concat, ReduceSum, Where, ...), which onnxruntime 1.16 and later run
(ONNX IR version 10).

The torch module runs the numpy layer description of :mod:`connectx_gym.weights` (the one that
the ``.npz`` loader and the Kaggle export run) with the torch kernels of
:mod:`connectx_train.networks`, so both input formats export the same way,
and every export is checked with onnxruntime against that numpy forward pass on random positions
before it is written. Needs ``pip install "connectx-gym[onnx,train]"`` (torch, onnx, onnxscript,
onnxruntime); reading an SB3 ``.zip`` unpickles it: trusted files only.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.files import load_file
from connectx_gym.outputs import atomic_output, check_output_path
from connectx_gym.weights import OPERATIONS, WeightsFile, forward_layers
from connectx_train.export import MAX_CHECK_POSITIONS, model_file, refuse_writing_onto
from connectx_train.networks import TORCH_OPERATIONS, TorchRun

__all__ = [
    "MASKED_LOGIT",
    "MAX_CHECK_POSITIONS",
    "OPSET",
    "LayersModule",
    "check_positions",
    "export_onnx",
    "onnx_logits",
    "random_positions",
]

#: Logit of an illegal column in the exported graph: far below any real logit, yet finite, so that
#: a softmax over the row stays a number even when every column is illegal.
MASKED_LOGIT = -1e9
#: The ONNX opset of exported graphs.
OPSET = 18
ONNX_HINT = 'ONNX export needs the onnx extra: pip install "connectx-gym[onnx,train]"'
#: Positions checked with onnxruntime after each export.
CHECK_POSITIONS = 1000


class LayersModule(nn.Module):
    """A torch module running a weights-only network description, masked for export.

    ``forward(obs, action_mask)`` returns the logits of :func:`connectx_gym.weights.forward_layers`
    with illegal columns (``action_mask == 0``) set to :data:`MASKED_LOGIT`.
    """

    def __init__(self, weights: WeightsFile) -> None:
        super().__init__()
        _check_ops(weights.layers)
        self.geometry = weights.geometry
        self.layers = weights.layers
        self.names = {name: f"p{index}" for index, name in enumerate(sorted(weights.params))}
        for name, buffer_name in self.names.items():
            self.register_buffer(buffer_name, torch.from_numpy(weights.params[name].copy()))

    def _param(self, name: str) -> torch.Tensor:
        return getattr(self, self.names[name])

    def forward(self, obs: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
        """Masked logits ``[N, columns]`` of a batch of observations."""
        logits = TorchRun(self._param, {}).run(self.layers, obs)
        return torch.where(action_mask > 0.5, logits, torch.full_like(logits, MASKED_LOGIT))


def _check_ops(layers: list) -> None:
    """Refuse a description naming an operation without a torch kernel (nested ones too)."""
    for layer in layers:
        operation = OPERATIONS.get(layer["op"])
        if operation is None or layer["op"] not in TORCH_OPERATIONS:
            raise ValueError(f"cannot export layer op {layer['op']!r} to ONNX")
        for body in operation.bodies(layer):
            _check_ops(body)


def random_positions(
    geometry: Geometry, count: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` positions of games played at random, the game not over: observations
    ``[count, 2, rows, columns]`` and legal masks ``[count, columns]``, float32."""
    boards: list[Board] = []
    while len(boards) < count:
        board = Board(geometry, 0, 0, 0)
        for _ in range(int(rng.integers(0, geometry.cells))):
            board = board.play(int(rng.choice(board.legal_moves())))
            if board.is_terminal():
                break
        if not board.is_terminal():
            boards.append(board)
    obs = np.stack([board.to_planes() for board in boards]).astype(np.float32)
    masks = np.stack([board.legal_mask() for board in boards]).astype(np.float32)
    return obs, masks


def onnx_logits(path: str | Path, obs: np.ndarray, action_mask: np.ndarray) -> np.ndarray:
    """Run an exported agent with onnxruntime: its ``logits`` for a batch."""
    try:
        import onnxruntime
    except ImportError as error:
        raise ImportError(f"{ONNX_HINT} ({error})") from None
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {
        "obs": np.asarray(obs, dtype=np.float32),
        "action_mask": np.asarray(action_mask, dtype=np.float32),
    }
    return session.run(["logits"], feeds)[0]


def _load(model: str | Path) -> WeightsFile:
    """The network of ``model``: shipped weights by name, a ``.npz`` or an SB3 ``.zip``."""
    return load_file(model_file(model))


def check_positions(count: int) -> int:
    """``count`` if it is a number of check positions this module accepts (``ValueError`` naming
    :data:`MAX_CHECK_POSITIONS` otherwise)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"check must be a whole number >= 0, got {count!r}")
    if count > MAX_CHECK_POSITIONS:
        raise ValueError(
            f"check must be <= {MAX_CHECK_POSITIONS} positions (MAX_CHECK_POSITIONS), got {count}"
        )
    return count


def export_onnx(
    model: str | Path | WeightsFile, output: str | Path = "agent.onnx", check: int = CHECK_POSITIONS
) -> Path:
    """Write ``model`` (a ``.npz`` weights file, an SB3 ``.zip``, the name of shipped weights such
    as ``"ppo"``, or a :class:`WeightsFile`) as an ONNX graph to ``output`` (see the module
    docstring for its inputs and output), atomically (:func:`connectx_gym.outputs.atomic_output`:
    a directory, device or symbolic link at ``output`` is refused, never replaced, and so is the
    model's own file: :func:`connectx_train.export.refuse_writing_onto`).

    Before the file is written, onnxruntime runs the graph on ``check`` random positions and its
    logits must equal the numpy forward pass's (``ValueError`` otherwise); ``check`` is at most
    :data:`MAX_CHECK_POSITIONS`. Raises
    ``FileNotFoundError`` for a missing model, ``ValueError`` for one that is not a connectx-gym
    network and ``ImportError`` (with the install hint) when onnx or onnxruntime is missing.
    """
    try:
        import onnx
        import onnxruntime  # noqa: F401 - the check below needs it
        import onnxscript  # noqa: F401 - torch's ONNX exporter needs it
    except ImportError as error:
        raise ImportError(f"{ONNX_HINT} ({error})") from None
    check_positions(check)
    output = check_output_path(output)  # before the export's work: a bad path fails at once
    if not isinstance(model, WeightsFile):
        refuse_writing_onto(model_file(model), output)
    weights = model if isinstance(model, WeightsFile) else _load(model)
    g = weights.geometry
    module = LayersModule(weights).eval()
    example = (torch.zeros(2, 2, g.rows, g.columns), torch.ones(2, g.columns))
    batch = torch.export.Dim("batch")
    exporter_log = logging.getLogger("torch.onnx")
    level = exporter_log.level
    exporter_log.setLevel(logging.ERROR)  # notes about optional torchvision operators
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's deprecation and renaming notes
            program: Any = torch.onnx.export(
                module,
                example,
                input_names=["obs", "action_mask"],
                output_names=["logits"],
                opset_version=OPSET,
                dynamo=True,
                external_data=False,
                dynamic_shapes={"obs": {0: batch}, "action_mask": {0: batch}},
                verbose=False,
            )
    finally:
        exporter_log.setLevel(level)
    proto = program.model_proto
    for key, value in (("rows", g.rows), ("columns", g.columns), ("inarow", g.inarow)):
        entry = proto.metadata_props.add()
        entry.key, entry.value = f"connectx.{key}", str(value)
    proto.doc_string = (
        f"connectx-gym agent for {g.rows}x{g.columns}, {g.inarow} in a row: obs [N, 2, rows, "
        "columns] and action_mask [N, columns] (float32) -> logits [N, columns], illegal "
        f"columns at {MASKED_LOGIT:g}; argmax is the move."
    )
    onnx.checker.check_model(proto)
    with atomic_output(output) as temporary:
        onnx.save(proto, temporary)
        if check:
            _check_export(temporary, weights, check)
    return output


def _check_export(path: Path, weights: WeightsFile, count: int) -> None:
    geometry = Geometry.of(weights.geometry)
    obs, masks = random_positions(geometry, count, np.random.default_rng(0))
    got = onnx_logits(path, obs, masks)
    with np.errstate(over="ignore", invalid="ignore"):  # reported below, in one line
        expected = forward_layers(weights.layers, weights.params, obs)
    overflowing = int((~np.isfinite(expected)).any(axis=1).sum())
    if overflowing:
        raise ValueError(
            "the network's logits are not finite (inf or nan: its arithmetic overflows float32) "
            f"on {overflowing} of the {count} check positions: no graph can reproduce them"
        )
    expected = np.where(masks > 0, expected, MASKED_LOGIT)
    error = float(np.max(np.abs(got - expected) / (1 + np.abs(expected))))
    if not error <= 1e-4:
        raise ValueError(f"the ONNX graph's logits differ from the network's (error {error:.2g})")
