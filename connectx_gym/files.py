"""Saved agents as policies: weights-only ``.npz`` files, SB3 ``.zip`` models, Kaggle ``.py`` files.

:func:`load_policy_file` is the ``"file"`` policy of the registry, so a path works wherever a policy
spec does (``ConnectX-v0``'s opponent, ``play_match``, the ``connectx`` CLI)::

    make_policy("runs/ppo/final.npz")          # weights only: numpy, never unpickles
    make_policy("runs/ppo/final.zip")          # SB3 model: needs torch, unpickles (runs code)
    make_policy("submission/main.py")          # Kaggle agent file: runs the file's code

The package ships trained weights too (:data:`SHIPPED_WEIGHTS`): ``make_policy("ppo")`` is the
agent of ``connectx train --preset strong`` (see ``connectx_gym/data/README.md``).

:func:`file_loaders` is the one place that decides which loader a file suffix gets, by lazy
``"module:attr"`` entry points: the core's own (:data:`FILE_LOADERS`) and those the installed
packages declare in the ``connectx_gym.loaders`` group (the ``.zip`` loader comes from the training
package that way and is imported only when a ``.zip`` is loaded). A loader returns a
:class:`~connectx_gym.weights.WeightsFile` or a Kaggle-style agent function.

**Safety.** A ``.npz`` weights file is read by :func:`connectx_gym.weights.read_weights`: never
unpickled, bounded in size and nesting, checked against the largest board
(:data:`connectx_gym.bitboard.MAX_CELLS`) and shape-checked before it is used, so it is the format
to share agents in and to use other people's agents as opponents. An SB3 ``.zip`` unpickles Python
objects when it is loaded, which can run arbitrary code from the file, and a ``.py`` agent is
Python code that is executed: load those only from sources you trust.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from connectx_gym.bitboard import MAX_CELLS, MAX_SIDE, Board, Geometry
from connectx_gym.outputs import open_atomically
from connectx_gym.plugins import LOADERS_GROUP, load_entry_point, plugins
from connectx_gym.policy import KaggleAgentPolicy, Policy, agent_exit_error, choose_best
from connectx_gym.weights import (
    WEIGHTS_FORMAT,
    WeightsFile,
    conv2d_same,
    forward_layers,
    masked_logits,
    read_weights,
    write_weights,
)

__all__ = [
    "FILE_LOADERS",
    "WEIGHTS_FORMAT",
    "NumpyNetPolicy",
    "WeightsFile",
    "conv2d_same",
    "file_loaders",
    "forward_layers",
    "load_file",
    "load_kaggle_agent",
    "load_policy_file",
    "load_weights",
    "one_blas_thread",
    "save_weights",
]

UNPICKLE_WARNING = (
    "loading an SB3 .zip model unpickles Python objects, which can run code from the file; "
    "only load models you trust, and share agents as weights-only .npz files"
)

#: The core's file suffixes -> ``"module:attr"`` of the loader, ``loader(path) -> WeightsFile |
#: agent``; installed packages add suffixes (:func:`file_loaders`).
FILE_LOADERS: dict[str, str] = {
    ".npz": "connectx_gym.files:load_weights",
    ".py": "connectx_gym.files:load_kaggle_agent",
}


def file_loaders() -> dict[str, EntryPoint | str]:
    """Every loadable suffix (lower case, with its dot) -> its loader's entry point: the
    ``connectx_gym.loaders`` entry points of the installed packages, then the core's own."""
    loaders: dict[str, EntryPoint | str] = {
        name.lower(): entry for name, entry in plugins(LOADERS_GROUP).items()
    }
    return {**loaders, **FILE_LOADERS}


# -- the weights-only file ------------------------------------------------------------------------
def save_weights(weights: WeightsFile, path: str | Path) -> Path:
    """Write ``weights`` to ``path`` (``.npz``) atomically: a temporary file, then a rename
    (:func:`connectx_gym.outputs.open_atomically`: a directory, device or symbolic link at
    ``path`` is refused, never replaced)."""
    with open_atomically(path, "wb") as file:
        write_weights(weights, file)
    return Path(path)


def load_weights(path: str | Path) -> WeightsFile:
    """Read a weights-only ``.npz`` file with numpy, never unpickling, bounded (see
    :func:`connectx_gym.weights.read_weights`).

    Raises ``FileNotFoundError`` when it does not exist and ``ValueError`` naming the file and the
    reason when it is not a valid weights file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such weights file: {path}")
    weights = read_weights(path, str(path), max_side=MAX_SIDE, max_cells=MAX_CELLS)
    weights.geometry = Geometry(*weights.geometry)
    return weights


def load_file(path: str | Path) -> Any:
    """What the loader of ``path``'s suffix (:data:`FILE_LOADERS`) makes of it: a
    :class:`WeightsFile` or a Kaggle-style agent function."""
    file = _existing_file(path)
    loaders = file_loaders()
    suffix = file.resolve().suffix.lower()  # a link is loaded as what it leads to, or refused
    named = file.suffix.lower()
    if named in loaders and named != suffix:
        raise ValueError(
            f"{file.name} leads to a {suffix or 'suffix-less'} file, not a {named} one: name the "
            "file itself"
        )
    entry_point = loaders.get(suffix)
    if entry_point is None:
        expected = ", ".join(sorted(loaders))
        raise ValueError(f"unknown model file type {suffix!r} of {file}: expected {expected}")
    return load_entry_point(entry_point, f"the {suffix} loader for {file}")(file)


def _existing_file(path: str | Path) -> Path:
    """``path`` as a :class:`Path` to an existing file; ``ValueError`` for a name no file system
    takes (a NUL byte, a part over its length limit), ``FileNotFoundError`` for no such file."""
    if "\x00" in str(path):
        raise ValueError(f"a file name cannot hold a NUL byte: {str(path)!r}")
    file = Path(path)
    try:
        found = file.is_file()
    except OSError as error:  # e.g. a name over 255 bytes
        raise ValueError(f"cannot read {str(file)[:80]!r}: {error.strerror}") from None
    if not found:
        raise FileNotFoundError(f"no such model or agent file: {file}")
    return file


# -- policies -------------------------------------------------------------------------------------
@functools.cache
def _blas_controller() -> ThreadpoolController:
    """The BLAS libraries numpy loaded (found once: a few milliseconds)."""
    return ThreadpoolController()


def one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """A block in which BLAS uses one thread (cheap to enter and leave).

    One board's matrix products are too small for a second thread to pay, and when the cores
    are busy a second thread waits for one, which makes a move several times slower. The limit
    is threadpoolctl's: process-wide while it lasts, and the count it found comes back when the
    block ends.
    """
    limit: contextlib.AbstractContextManager[Any] = _blas_controller().limit(
        limits=1, user_api="blas"
    )
    return limit


class NumpyNetPolicy(Policy):
    """A policy network evaluated with numpy: masked argmax of its logits (ties at random), or a
    move sampled from its masked softmax when ``deterministic`` is False. Each board is evaluated
    with one BLAS thread (:func:`one_blas_thread`). Where a logit of a legal column overflows,
    NaN counts as the lowest logit and +inf as the highest, as in the Kaggle export
    (:func:`~connectx_gym.weights.best_legal_column`): a sampled move is then one of the
    infinite columns, or any legal column when none is finite or +inf."""

    def __init__(self, weights: WeightsFile, deterministic: bool = True, name: str = "net") -> None:
        super().__init__()
        self.weights = weights
        self.deterministic = deterministic
        self.name = name

    def _logits(self, board: Board) -> tuple[np.ndarray, np.ndarray]:
        """The logits of the legal columns (-inf elsewhere, and for NaN) and the legal mask."""
        if board.geometry != self.weights.geometry:
            raise ValueError(
                f"{self.name} was trained on {self.weights.geometry!r}, not {board.geometry!r}"
            )
        with one_blas_thread():
            weights = self.weights
            planes, legal = board.to_planes(), board.legal_mask()
            logits = masked_logits(weights.layers, weights.params, planes, legal, weights.kernels)
        return np.where(np.isnan(logits), -np.inf, logits), legal

    def scores(self, board: Board) -> np.ndarray:
        logits, legal = self._logits(board)
        return np.where(legal, logits, np.nan)

    def probabilities(self, board: Board) -> np.ndarray:
        """The softmax of the logits over the legal columns (0 elsewhere): the moves a
        non-``deterministic`` policy samples from."""
        logits, legal = self._logits(board)
        return _softmax(logits, legal)

    def values(self, boards: Sequence[Board]) -> np.ndarray:
        """The network's value of each of ``boards`` for its player to move, about -1 (lost)
        to 1 (won), in one batch: ``(len(boards),)``. ``ValueError`` when the network has no
        value head (:attr:`WeightsFile.value`) or a board is not of its size."""
        if self.weights.value is None:
            raise ValueError(f"{self.name} has no value head")
        for board in boards:
            if board.geometry != self.weights.geometry:
                raise ValueError(
                    f"{self.name} was trained on {self.weights.geometry!r}, not {board.geometry!r}"
                )
        g = self.weights.geometry
        planes = np.zeros((len(boards), 2, g.rows, g.columns), dtype=np.float32)
        for index, board in enumerate(boards):
            planes[index] = board.to_planes()
        with one_blas_thread():
            return self.weights.values(planes)

    def act(self, board: Board, rng: np.random.Generator) -> int:
        logits, legal = self._logits(board)
        if self.deterministic:
            return choose_best(np.where(legal, logits, np.nan), rng)
        probabilities = _softmax(logits, legal)
        return int(rng.choice(len(probabilities), p=probabilities))

    def __repr__(self) -> str:
        return f"NumpyNetPolicy({self.name!r}, deterministic={self.deterministic})"


def _softmax(logits: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """Softmax of the legal columns' ``logits`` (-inf elsewhere); where the largest is
    infinite, even chances among the +inf columns, or among the legal ones when none is finite."""
    top = logits.max()
    if np.isinf(top):
        chances = (logits == top) if top > 0 else legal
        even: np.ndarray = chances / chances.sum()
        return even
    probabilities = np.exp(logits - top)
    softmax: np.ndarray = probabilities / probabilities.sum()
    return softmax


def load_kaggle_agent(path: str | Path) -> Callable[..., Any]:
    """The agent function of a Kaggle ``.py`` file: ``agent``, else ``act``, else the last
    function the file defines (Kaggle's own rule). **Runs the file's code.**

    A file that calls ``sys.exit`` while it is loaded raises
    :class:`~connectx_gym.policy.AgentExitError` naming it (so does its agent when it plays:
    :class:`~connectx_gym.policy.KaggleAgentPolicy`). ``os._exit`` ends the process at once,
    beyond any protection in-process."""
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
    except SystemExit as exit_:  # one line naming the file, not the end of the program
        sys.modules.pop(module_name, None)
        raise agent_exit_error(exit_, f"agent file {path}", "while it was loaded") from None
    except Exception as error:
        sys.modules.pop(module_name, None)
        raise ValueError(f"running agent file {path} failed: {error!r}") from None
    for name in ("agent", "act"):
        named: Callable[..., Any] | None = getattr(module, name, None)
        if callable(named):
            return named
    functions: list[Callable[..., Any]] = [
        value
        for value in vars(module).values()
        if callable(value) and getattr(value, "__module__", None) == module_name
    ]
    if not functions:
        raise ValueError(f"agent file {path} defines no function")
    return functions[-1]


#: Weights shipped with the package, by policy name (6x7, four in a row).
SHIPPED_WEIGHTS: dict[str, Path] = {
    "ppo": Path(__file__).parent / "data" / "ppo.npz",
    # the networks shipped as "ppo" before the current one, newest first
    # (connectx_gym/data/README.md)
    "ppo-v3": Path(__file__).parent / "data" / "ppo_v3.npz",
    "ppo-v2": Path(__file__).parent / "data" / "ppo_v2.npz",
    "ppo-v1": Path(__file__).parent / "data" / "ppo_v1.npz",
}


def shipped_weights(name: str) -> Path:
    """The path of the shipped weights ``name`` (a key of :data:`SHIPPED_WEIGHTS`)."""
    if name not in SHIPPED_WEIGHTS:
        shipped = ", ".join(SHIPPED_WEIGHTS)
        raise ValueError(f"no shipped weights named {name!r}; shipped: {shipped}")
    path = SHIPPED_WEIGHTS[name]
    if not path.is_file():
        raise FileNotFoundError(f"the shipped weights {path} are missing from this installation")
    return path


def load_shipped(name: str, deterministic: bool = True) -> Policy:
    """The shipped network ``name`` (a key of :data:`SHIPPED_WEIGHTS`; 6x7, numpy only, no
    search; ``deterministic=False`` samples from its softmax)."""
    policy = load_policy_file(str(shipped_weights(name)), deterministic=deterministic)
    policy.name = name
    return policy


def load_ppo(deterministic: bool = True) -> Policy:
    """The ``"ppo"`` policy: the shipped network of ``connectx train --preset strong``."""
    return load_shipped("ppo", deterministic)


def load_ppo_v3(deterministic: bool = True) -> Policy:
    """The ``"ppo-v3"`` policy: the network shipped as ``ppo`` before the current one, made by
    ``connectx train --preset strong-v3``."""
    return load_shipped("ppo-v3", deterministic)


def load_ppo_v2(deterministic: bool = True) -> Policy:
    """The ``"ppo-v2"`` policy: the network shipped as ``ppo`` before ``ppo-v3``, made by
    ``connectx train --preset strong-v2``."""
    return load_shipped("ppo-v2", deterministic)


def load_ppo_v1(deterministic: bool = True) -> Policy:
    """The ``"ppo-v1"`` policy: the network shipped as ``ppo`` before ``ppo-v2``, made by
    ``connectx train --preset strong-v1``."""
    return load_shipped("ppo-v1", deterministic)


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
    loaded = load_file(path)
    name = Path(path).name
    if isinstance(loaded, WeightsFile):
        return NumpyNetPolicy(loaded, deterministic=deterministic, name=name)
    return KaggleAgentPolicy(loaded, name=name)
