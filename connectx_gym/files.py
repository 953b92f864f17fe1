"""Saved agents as policies: weights-only ``.npz`` files, SB3 ``.zip`` models, Kaggle ``.py`` files.

:func:`load_policy_file` is the ``"file"`` policy of the registry, so a path works wherever a policy
spec does (``ConnectX-v0``'s opponent, ``play_match``, the ``connectx`` CLI)::

    make_policy("runs/ppo/final.npz")          # weights only: numpy, never unpickles
    make_policy("runs/ppo/final.zip")          # SB3 model: needs torch, unpickles (runs code)
    make_policy("submission/main.py")          # Kaggle agent file: runs the file's code

**Safety.** A ``.npz`` weights file is read with ``allow_pickle=False``: it holds arrays and a JSON
description of the network, nothing executable, so it is the format to share agents in and to use
other people's agents as opponents. An SB3 ``.zip`` unpickles Python objects when it is loaded,
which can run arbitrary code from the file, and a ``.py`` agent is Python code that is executed:
load those only from sources you trust.

The weights-only format
-----------------------
An ``.npz`` archive with one array per parameter plus ``__meta__``, a 0-d string array of JSON::

    {"format": "connectx-gym-weights", "version": 1, "rows": 6, "columns": 7, "inarow": 4,
     "layers": [{"op": "ones_plane"}, {"op": "conv", "weight": "p0", "bias": "p1"}, ...]}

``layers`` is run in order on a ``(batch, 2, rows, columns)`` float32 input (the env's observation:
the mover's discs, then the opponent's) and ends with one logit per column. The ops are
``ones_plane`` (append a plane of ones), ``input_planes`` (append a plane of ones and the plane of
*landing cells*, the cell each non-full column would receive next, and remember the latter),
``conv`` (2-D cross-correlation, zero "same" padding), ``linear``, ``relu``, ``tanh``,
``flatten``, ``residual`` (``x + layers(x)`` for its ``body``), ``branches`` (run each list of
layers on ``x`` and concatenate the flattened results), ``gather_landing`` (a one-plane map read at
each column's landing cell: one value per column) and ``linear_plus_prefix`` (a linear layer plus
the first ``out`` inputs, which are per-column scores).
:func:`forward_layers` is the only implementation of that forward pass: the Kaggle export embeds
its source.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.policy import KaggleAgentPolicy, Policy, choose_best

__all__ = [
    "WEIGHTS_FORMAT",
    "NumpyNetPolicy",
    "WeightsFile",
    "forward_layers",
    "load_kaggle_agent",
    "load_policy_file",
    "load_weights",
    "save_weights",
]

WEIGHTS_FORMAT = "connectx-gym-weights"
WEIGHTS_VERSION = 1
TRAIN_HINT = 'loading SB3 models needs the training extra: pip install "connectx-gym[train]"'
UNPICKLE_WARNING = (
    "loading an SB3 .zip model unpickles Python objects, which can run code from the file; "
    "only load models you trust, and share agents as weights-only .npz files"
)


# -- the numpy forward pass (embedded verbatim in Kaggle exports: numpy only, no project imports) --
def conv2d_same(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """2-D cross-correlation of ``x`` (N, C, H, W) with ``weight`` (O, C, kh, kw), zero padded so
    the output keeps H x W (odd kernels), as ``torch.nn.Conv2d(padding=k // 2)``."""
    kh, kw = weight.shape[2], weight.shape[3]
    padded = np.pad(x, ((0, 0), (0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))
    out = np.tensordot(windows, weight, axes=([1, 4, 5], [1, 2, 3]))  # N, H, W, O
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2)) + bias[None, :, None, None]


def forward_layers(
    layers: list, params: dict, x: np.ndarray, saved: dict | None = None
) -> np.ndarray:
    """Run the weights-only network description ``layers`` with ``params`` on the batch ``x``
    (``saved`` carries the landing cells from ``input_planes`` to ``gather_landing``)."""
    saved = {} if saved is None else saved
    for layer in layers:
        op = layer["op"]
        if op == "ones_plane":
            x = np.concatenate([x, np.ones_like(x[:, :1])], axis=1)
        elif op == "input_planes":
            occupied = x[:, 0] + x[:, 1]
            below = np.concatenate([occupied[:, 1:], np.ones_like(occupied[:, :1])], axis=1)
            saved["landing"] = (1 - occupied) * below
            x = np.concatenate([x, np.ones_like(x[:, :1]), saved["landing"][:, None]], axis=1)
        elif op == "gather_landing":
            x = (x[:, 0] * saved["landing"]).sum(axis=1)
        elif op == "branches":
            outputs = [forward_layers(body, params, x, saved) for body in layer["branches"]]
            x = np.concatenate([out.reshape(out.shape[0], -1) for out in outputs], axis=1)
        elif op == "linear_plus_prefix":
            weight = params[layer["weight"]]
            x = x @ weight.T + params[layer["bias"]] + x[:, : weight.shape[0]]
        elif op == "conv":
            x = conv2d_same(x, params[layer["weight"]], params[layer["bias"]])
        elif op == "linear":
            x = x @ params[layer["weight"]].T + params[layer["bias"]]
        elif op == "relu":
            x = np.maximum(x, 0)
        elif op == "tanh":
            x = np.tanh(x)
        elif op == "flatten":
            x = x.reshape(x.shape[0], -1)
        elif op == "residual":
            x = x + forward_layers(layer["body"], params, x, saved)
        else:
            raise ValueError(f"unknown layer op {op!r}")
    return x


def masked_logits(layers: list, params: dict, planes: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """Logits of one position's ``(2, rows, columns)`` planes, ``-inf`` on illegal columns."""
    x = np.asarray(planes, dtype=np.float32)[None]
    logits = forward_layers(layers, params, x)[0].astype(np.float64)
    return np.where(legal, logits, -np.inf)


# -- the weights-only file ------------------------------------------------------------------------
class WeightsFile:
    """A network in the weights-only format: its JSON description and its arrays."""

    def __init__(
        self, geometry: Geometry, layers: list[dict[str, Any]], params: dict[str, np.ndarray]
    ) -> None:
        self.geometry = geometry
        self.layers = layers
        self.params = {name: np.asarray(value, dtype=np.float32) for name, value in params.items()}
        _check_layers(layers, self.params)

    @property
    def meta(self) -> dict[str, Any]:
        """The JSON-ready description stored as ``__meta__``."""
        g = self.geometry
        return {
            "format": WEIGHTS_FORMAT,
            "version": WEIGHTS_VERSION,
            "rows": g.rows,
            "columns": g.columns,
            "inarow": g.inarow,
            "layers": self.layers,
        }

    def logits(self, planes: np.ndarray) -> np.ndarray:
        """Raw logits for a batch ``(N, 2, rows, columns)`` of observations."""
        return forward_layers(self.layers, self.params, np.asarray(planes, dtype=np.float32))


def _check_layers(layers: Any, params: dict[str, np.ndarray]) -> None:
    if not isinstance(layers, list):
        raise ValueError("weights file: 'layers' must be a list")
    for layer in layers:
        if not isinstance(layer, dict) or "op" not in layer:
            raise ValueError(f"weights file: bad layer {layer!r}")
        for key in ("weight", "bias"):
            if key in layer and layer[key] not in params:
                raise ValueError(f"weights file: layer refers to missing array {layer[key]!r}")
        if layer["op"] == "residual":
            _check_layers(layer.get("body"), params)
        if layer["op"] == "branches":
            for body in layer.get("branches") or [None]:
                _check_layers(body, params)


def save_weights(weights: WeightsFile, path: str | Path) -> Path:
    """Write ``weights`` to ``path`` (``.npz``) atomically: a temporary file, then a rename."""
    path = Path(path)
    temporary = path.with_name(path.name + ".tmp.npz")
    arrays = {"__meta__": np.array(json.dumps(weights.meta))}
    arrays.update(weights.params)
    np.savez(temporary, **arrays)
    temporary.replace(path)
    return path


def load_weights(path: str | Path) -> WeightsFile:
    """Read a weights-only ``.npz`` file with numpy, never unpickling.

    Raises ``FileNotFoundError`` when it does not exist and ``ValueError`` when it is not a valid
    weights file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such weights file: {path}")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a connectx-gym weights file (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        meta = json.loads(str(arrays.pop("__meta__")))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as error:
        raise ValueError(f"{path} is not a connectx-gym weights file ({error})") from None
    if not isinstance(meta, dict) or meta.get("format") != WEIGHTS_FORMAT:
        raise ValueError(f"{path} is not a connectx-gym weights file (format tag missing)")
    if meta.get("version") != WEIGHTS_VERSION:
        raise ValueError(f"{path}: unsupported weights format version {meta.get('version')!r}")
    try:
        geometry = Geometry(meta["rows"], meta["columns"], meta["inarow"])
        return WeightsFile(geometry, meta["layers"], arrays)
    except (KeyError, TypeError) as error:
        raise ValueError(f"{path} is not a connectx-gym weights file ({error!r})") from None


# -- policies -------------------------------------------------------------------------------------
class NumpyNetPolicy(Policy):
    """A policy network evaluated with numpy: masked argmax of its logits (ties at random), or a
    move sampled from its masked softmax when ``deterministic`` is False."""

    def __init__(self, weights: WeightsFile, deterministic: bool = True, name: str = "net") -> None:
        super().__init__()
        self.weights = weights
        self.deterministic = deterministic
        self.name = name

    def _logits(self, board: Board) -> np.ndarray:
        if board.geometry != self.weights.geometry:
            raise ValueError(
                f"{self.name} was trained on {self.weights.geometry!r}, not {board.geometry!r}"
            )
        return masked_logits(
            self.weights.layers, self.weights.params, board.to_planes(), board.legal_mask()
        )

    def scores(self, board: Board) -> np.ndarray:
        logits = self._logits(board)
        return np.where(np.isfinite(logits), logits, np.nan)

    def act(self, board: Board, rng: np.random.Generator) -> int:
        logits = self._logits(board)
        if self.deterministic:
            return choose_best(np.where(np.isfinite(logits), logits, np.nan), rng)
        probabilities = np.exp(logits - logits.max())
        probabilities /= probabilities.sum()
        return int(rng.choice(len(probabilities), p=probabilities))

    def __repr__(self) -> str:
        return f"NumpyNetPolicy({self.name!r}, deterministic={self.deterministic})"


def load_kaggle_agent(path: str | Path) -> Callable[..., Any]:
    """The agent function of a Kaggle ``.py`` file: ``agent``, else ``act``, else the last
    function the file defines (Kaggle's own rule). **Runs the file's code.**"""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such agent file: {path}")
    module_name = f"_connectx_agent_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        sys.modules.pop(module_name, None)
        raise ValueError(f"running agent file {path} failed: {error!r}") from None
    for name in ("agent", "act"):
        if callable(getattr(module, name, None)):
            return getattr(module, name)
    functions = [
        value
        for value in vars(module).values()
        if callable(value) and getattr(value, "__module__", None) == module_name
    ]
    if not functions:
        raise ValueError(f"agent file {path} defines no function")
    return functions[-1]


def load_policy_file(path: str, deterministic: bool = True) -> Policy:
    """A policy from a saved agent: ``.npz`` weights, SB3 ``.zip`` model or Kaggle ``.py`` file.

    - ``.npz``: the weights-only format, read by numpy with ``allow_pickle=False`` (never runs
      code); the safe way to use someone else's agent.
    - ``.zip``: an SB3 / sb3-contrib MaskablePPO model, converted to the same numpy network.
      Needs ``pip install "connectx-gym[train]"``; **unpickles Python objects, so loading runs code
      from the file** (a warning says so).
    - ``.py``: a Kaggle agent file; **its code is executed** and its agent function is used.

    ``deterministic=False`` samples network moves from the softmax instead of taking the argmax.
    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a corrupt or unknown one.
    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no such model or agent file: {file}")
    suffix = file.suffix.lower()
    if suffix == ".npz":
        return NumpyNetPolicy(load_weights(file), deterministic=deterministic, name=file.name)
    if suffix == ".zip":
        try:
            from train.export import weights_from_sb3
        except ImportError as error:
            raise ImportError(f"{TRAIN_HINT} ({error})") from None
        return NumpyNetPolicy(weights_from_sb3(file), deterministic=deterministic, name=file.name)
    if suffix == ".py":
        return KaggleAgentPolicy(load_kaggle_agent(file), name=file.name)
    raise ValueError(f"unknown model file type {file.suffix!r}: expected .npz, .zip or .py")
