"""The weights-only network format: numpy and stdlib only, with :mod:`connectx_gym.forward`.

The loaders (:mod:`connectx_gym.files`) read agents with it, and the Kaggle export embeds **the
source of both modules** in ``main.py`` (:mod:`connectx_gym.forward` first), so an exported agent
reads its weights and runs exactly the forward pass the loaders run. They import nothing else
from the project for that reason.

The format
----------
An ``.npz`` archive with one float array per parameter plus ``__meta__``, a 0-d string array of
JSON::

    {"format": "connectx-gym-weights", "version": 1, "rows": 6, "columns": 7, "inarow": 4,
     "layers": [{"op": "ones_plane"}, {"op": "conv", "weight": "p0", "bias": "p1"}, ...]}

``layers`` is run in order on a ``(batch, 2, rows, columns)`` float32 input (the env's observation:
the mover's discs, then the opponent's) and ends with one logit per column; the ops are those of
:data:`connectx_gym.forward.OPERATIONS`, the table of their shape rules and numpy kernels.

A network may have a value head too (:class:`ValueHead`), an optional ``"value"`` entry::

    "value": {"after": 4, "layers": [{"op": "linear", "weight": "p9", "bias": "p10"}, ...]}

Its ``layers`` run on what the first ``after`` layers of ``layers`` make (the trunk both heads
share; 0: the input planes) and end with one number: how the position looks to the player to
move, about -1 (lost) to 1 (won), as the critic of the network's training estimated its return.
A file without the entry loads with ``value`` None; a reader that does not know the entry reads
the policy alone.

Reading files from strangers
----------------------------
:func:`read_weights` never unpickles and is bounded: the board size is checked first, ``__meta__``
may hold at most :data:`MAX_META_BYTES` of JSON nested at most :data:`MAX_META_DEPTH` deep, only the
arrays the layers name are read, and each array's header (shape, dtype) is read and its size checked
against the archive's central directory and against :data:`MAX_PARAMETERS` *before* its data is
decompressed. Every shape is then checked against the layers (:func:`output_shape`): a network
that does not end in one logit per column (or whose value head does not end in one number) is
refused, and so is one whose run would cost more than the bounds, computed from the layers and
shapes, value head included, before anything is allocated
(:func:`~connectx_gym.forward.network_cost`): :data:`MAX_ACTIVATION_BYTES`, the largest array one
layer makes for one board, and :data:`MAX_WORK`, the multiply-adds of a move. Last, the network
runs on :data:`PROBE_POSITIONS` positions (the empty board and a few seeded random ones): one
whose logits or value are not finite there (its arithmetic overflows float32) is refused. Every
refusal is a ``ValueError`` naming the file and the reason, whatever the archive holds (a zip
entry's unknown compression method or encryption flag, data that does not decompress included).
"""

from __future__ import annotations

import io
import json
import lzma
import math
import zipfile
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from connectx_gym.forward import (
    FORWARD_CHUNK,
    MAX_LAYERS,
    OPERATIONS,
    NetworkCost,
    best_legal_column,
    conv2d_same,
    conv_kernel,
    conv_kernels,
    forward_layers,
    masked_logits,
    network_cost,
    output_shape,
)

__all__ = [
    "MAX_ACTIVATION_BYTES",
    "MAX_LAYERS",
    "MAX_META_BYTES",
    "MAX_META_DEPTH",
    "MAX_PARAMETERS",
    "MAX_WORK",
    "OPERATIONS",
    "PROBE_POSITIONS",
    "WEIGHTS_FORMAT",
    "WEIGHTS_VERSION",
    "BoardSize",
    "ValueHead",
    "WeightsFile",
    "best_legal_column",
    "check_cost",
    "conv2d_same",
    "conv_kernel",
    "conv_kernels",
    "forward_layers",
    "masked_logits",
    "output_shape",
    "read_weights",
    "value_head",
    "weights_bytes",
    "write_weights",
]

WEIGHTS_FORMAT = "connectx-gym-weights"
WEIGHTS_VERSION = 1
#: Largest ``__meta__`` JSON (bytes), deepest nesting, most layers and most float parameters.
MAX_META_BYTES = 1 << 20
MAX_META_DEPTH = 64
MAX_PARAMETERS = 64 * 1024 * 1024
#: The largest array (bytes of float32) one layer may make for one board: its output, or a
#: convolution's matrix of windows. A batch runs :data:`~connectx_gym.forward.FORWARD_CHUNK`
#: boards at once, so that many times this at most.
MAX_ACTIVATION_BYTES = 64 * 1024 * 1024
#: The most work one board may cost: multiply-adds, counted as
#: :class:`~connectx_gym.forward.NetworkCost` counts them (one per output value and
#: :data:`~connectx_gym.forward.LAYER_COST` per layer besides).
MAX_WORK = 1 << 32
#: The positions a network runs on when it is made: the empty board, then positions of about a
#: quarter, half and three quarters of the board's cells played at random (seeded).
PROBE_POSITIONS = 4
_ACTIVATION_ITEM_BYTES = 4
_NPY_HEADER_LIMIT = 10_000
_FLOAT_KINDS = ("float16", "float32", "float64")


class BoardSize(NamedTuple):
    """The board a network was trained on."""

    rows: int
    columns: int
    inarow: int


def _array_names(layers: Any) -> list[str]:
    """The array names the layers refer to, in order, without repeats (none unless ``layers``,
    read from a file, is a list)."""
    names: list[str] = []
    for layer in layers if isinstance(layers, list) else []:
        if not isinstance(layer, dict):
            continue
        for key in ("weight", "bias"):
            if isinstance(layer.get(key), str) and layer[key] not in names:
                names.append(layer[key])
        nested = [layer.get("body"), *(layer.get("branches") or [])]
        for body in nested:
            names += [n for n in _array_names(body) if n not in names]
    return names


class ValueHead(NamedTuple):
    """A network's value head: ``layers`` run on what the first ``after`` layers of the policy
    make (the trunk the heads share) and end with one value, for the player to move."""

    after: int
    layers: list[dict[str, Any]]


def value_head(description: Any, layers: Any) -> ValueHead:
    """The :class:`ValueHead` of a ``"value"`` entry (``{"after": N, "layers": [...]}``, or a
    :class:`ValueHead`) of a network of ``layers``; ``ValueError`` when it is not one."""
    if isinstance(description, ValueHead):
        description = description._asdict()
    if not isinstance(description, dict) or set(description) != {"after", "layers"}:
        raise ValueError('\'value\' must be {"after": N, "layers": [...]}')
    after, count = description["after"], len(layers) if isinstance(layers, list) else 0
    if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after <= count:
        raise ValueError(f"the value head's 'after' must be a whole number in [0, {count}]")
    if not isinstance(description["layers"], list):
        raise ValueError("the value head's 'layers' must be a list of layers")
    return ValueHead(after, description["layers"])


def _sets_landing(layers: list[dict[str, Any]]) -> bool:
    """Whether ``layers`` (checked) run ``input_planes``, nested ones included."""
    return any(
        layer["op"] == "input_planes"
        or any(_sets_landing(body) for body in OPERATIONS[layer["op"]].bodies(layer))
        for layer in layers
    )


# -- the weights-only file ------------------------------------------------------------------------
class WeightsFile:
    """A network in the weights-only format: its board, its layers and its arrays.

    ``geometry`` is anything with ``rows``, ``columns`` and ``inarow`` (a :class:`BoardSize` or a
    :class:`connectx_gym.Geometry`). The layers are checked against the array shapes: they must
    turn ``(2, rows, columns)`` planes into one logit per column, and the optional ``value`` head
    (a :class:`ValueHead` or its ``{"after", "layers"}`` dict; None: the network has none) the
    trunk into one value, or ``ValueError`` says why. ``kernels`` holds the convolutions'
    matrices (:func:`conv_kernels`, read-only), made once here from ``params``, which are not to
    be changed afterwards.
    """

    def __init__(
        self,
        geometry: Any,
        layers: list[dict[str, Any]],
        params: dict[str, Any],
        value: ValueHead | dict[str, Any] | None = None,
    ) -> None:
        self.geometry = geometry
        self.layers = layers
        self.value = None if value is None else value_head(value, layers)
        self.params = {name: np.asarray(value, dtype=np.float32) for name, value in params.items()}
        # A linear layer multiplies by its (2-D) weight transposed: held column-major for the
        # forward pass, that view is contiguous, which OpenBLAS multiplies 2-3 times as fast for
        # batches of 2 to 8 boards. ``params`` stay as read and written.
        self._run_params = {
            k: np.asfortranarray(a) if a.ndim == 2 else a for k, a in self.params.items()
        }
        for name, array in self.params.items():
            if not np.isfinite(array).all():
                raise ValueError(f"array {name!r} holds values that are not finite")
        planes = (2, int(geometry.rows), int(geometry.columns))
        out = check_cost(layers, self.params, planes, self.value).shape
        if out != (planes[2],):
            raise ValueError(
                f"the network outputs shape {out}, not one logit per column ({planes[2]})"
            )
        self.kernels = conv_kernels(layers, self.params)
        if self.value is not None:
            self.kernels |= conv_kernels(self.value.layers, self.params)
        for kernel in self.kernels.values():
            kernel.setflags(write=False)
        self._check_finite_outputs()

    def _check_finite_outputs(self) -> None:
        """``ValueError`` when the logits or the value of a probe position are not all finite."""
        probes = probe_positions(int(self.geometry.rows), int(self.geometry.columns))
        with np.errstate(over="ignore", invalid="ignore"):  # reported below, in one line
            logits, values = self.logits_and_values(probes)
        for what, finite in (
            ("logits are", np.isfinite(logits).all(axis=1)),
            ("value is", np.isfinite(values if values is not None else np.zeros(len(probes)))),
        ):
            if not finite.all():
                stones = int(probes[int(np.flatnonzero(~finite)[0])].sum())
                board = "the empty board" if stones == 0 else f"a board of {stones} stones"
                raise ValueError(
                    f"the network's {what} not finite (inf or nan: its arithmetic overflows "
                    f"float32) on {board}"
                )

    @property
    def meta(self) -> dict[str, Any]:
        """The JSON-ready description stored as ``__meta__``."""
        g = self.geometry
        return {
            "format": WEIGHTS_FORMAT,
            "version": WEIGHTS_VERSION,
            "rows": int(g.rows),
            "columns": int(g.columns),
            "inarow": int(g.inarow),
            "layers": self.layers,
            **({} if self.value is None else {"value": self.value._asdict()}),
        }

    def logits(self, planes: np.ndarray) -> np.ndarray:
        """Raw logits for a batch ``(N, 2, rows, columns)`` of observations."""
        x = np.asarray(planes, dtype=np.float32)
        return forward_layers(self.layers, self._run_params, x, kernels=self.kernels)

    def values(self, planes: np.ndarray) -> np.ndarray:
        """The value head's ``(N,)`` values of a batch ``(N, 2, rows, columns)`` of observations,
        each for the player to move; ``ValueError`` when the network has no value head."""
        values = self.logits_and_values(planes)[1]
        if values is None:
            raise ValueError("this network has no value head")
        return values

    def logits_and_values(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`logits` and :meth:`values` of a batch, the shared trunk run once; the values
        are None when the network has no value head."""
        x = np.asarray(planes, dtype=np.float32)
        if self.value is None:
            return self.logits(x), None
        starts = range(0, max(len(x), 1), FORWARD_CHUNK)
        pieces = [self._heads(x[start : start + FORWARD_CHUNK]) for start in starts]
        return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])

    def _heads(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logits and values of at most :data:`~connectx_gym.forward.FORWARD_CHUNK` boards."""
        assert self.value is not None
        saved: dict[str, np.ndarray] = {}  # the landing cells, from the trunk to the heads
        after, params, kernels = self.value.after, self._run_params, self.kernels
        trunk = forward_layers(self.layers[:after], params, x, saved, kernels)
        logits = forward_layers(self.layers[after:], params, trunk, saved, kernels)
        return logits, forward_layers(self.value.layers, params, trunk, saved, kernels)[:, 0]


def check_cost(
    layers: Any, shapes: dict[str, Any], planes: tuple[int, ...], value: ValueHead | None = None
) -> NetworkCost:
    """The :func:`~connectx_gym.forward.network_cost` of ``layers`` on ``planes`` given the
    arrays' ``shapes``, the ``value`` head's counted in (its trunk once), or ``ValueError``
    naming the bound it exceeds (:data:`MAX_WORK`, :data:`MAX_ACTIVATION_BYTES`) or why the
    value head does not fit (it must end in one value)."""
    cost = network_cost(layers, shapes, planes)
    if value is not None:
        trunk = layers[: value.after]
        shape = network_cost(trunk, shapes, planes).shape
        head = network_cost(value.layers, shapes, shape, _sets_landing(trunk))
        if head.shape != (1,):
            raise ValueError(f"the value head outputs shape {head.shape}, not one value")
        largest = max(cost.largest_activation, head.largest_activation)
        cost = NetworkCost(cost.shape, largest, cost.work + head.work)
    activation = cost.largest_activation * _ACTIVATION_ITEM_BYTES
    if activation > MAX_ACTIVATION_BYTES:
        raise ValueError(
            f"a layer needs {activation:,} bytes for one board, more than "
            f"MAX_ACTIVATION_BYTES ({MAX_ACTIVATION_BYTES:,})"
        )
    if cost.work > MAX_WORK:
        raise ValueError(
            f"a move costs {cost.work:,} multiply-adds, more than MAX_WORK ({MAX_WORK:,})"
        )
    return cost


def probe_positions(rows: int, columns: int) -> np.ndarray:
    """:data:`PROBE_POSITIONS` observations ``(PROBE_POSITIONS, 2, rows, columns)``: the empty
    board, then boards with about a quarter, a half and three quarters of the cells filled by
    seeded random play (stacked from the bottom; the players alternate, lines not checked)."""
    cells = rows * columns
    rng = np.random.default_rng(0)
    planes = np.zeros((PROBE_POSITIONS, 2, rows, columns), dtype=np.float32)
    for index in range(1, PROBE_POSITIONS):
        stones = cells * index // PROBE_POSITIONS
        # heights: ``stones`` picks among the cells of all columns, lowest cells first
        order = rng.permutation(np.repeat(np.arange(columns), rows))[:stones]
        by_column = np.argsort(order, kind="stable")
        ordered = order[by_column]
        below = np.empty(stones, dtype=np.int64)  # earlier stones in the same column
        below[by_column] = np.arange(stones) - np.searchsorted(ordered, ordered)
        planes[index, np.arange(stones) % 2, rows - 1 - below, order] = 1
        if stones % 2:  # the mover's discs first, as the env shows them
            planes[index] = planes[index, ::-1].copy()
    return planes


def write_weights(weights: WeightsFile, target: Any, compressed: bool = False) -> None:
    """Write ``weights`` as an ``.npz`` to ``target`` (a path or a binary file object)."""
    arrays: dict[str, Any] = {"__meta__": np.array(json.dumps(weights.meta))}
    arrays.update(weights.params)
    (np.savez_compressed if compressed else np.savez)(target, **arrays)


def _depth(value: Any, limit: int) -> int:
    stack = [(value, 1)]
    deepest = 0
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, (dict, list)):
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _read_member(archive: zipfile.ZipFile, name: str) -> tuple[zipfile.ZipInfo, Any]:
    try:
        info = archive.getinfo(name + ".npy")
    except KeyError:
        raise ValueError(f"missing array {name!r}") from None
    return info, archive.open(info)


def _npy_header(member: Any, name: str) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(member)
    reader = (
        np.lib.format.read_array_header_1_0
        if version == (1, 0)
        else np.lib.format.read_array_header_2_0
    )
    shape, fortran, dtype = reader(member, max_header_size=_NPY_HEADER_LIMIT)
    if fortran or dtype.hasobject:
        raise ValueError(f"array {name!r} is not a plain C-ordered array")
    return tuple(int(n) for n in shape), dtype


def _read_meta(archive: zipfile.ZipFile) -> dict[str, Any]:
    info, member = _read_member(archive, "__meta__")
    if info.file_size > MAX_META_BYTES:
        raise ValueError(f"'__meta__' is {info.file_size} bytes, more than {MAX_META_BYTES}")
    with member:
        shape, dtype = _npy_header(member, "__meta__")
        if shape != () or dtype.kind != "U":
            raise ValueError("'__meta__' is not a JSON string")
        text = np.frombuffer(member.read(MAX_META_BYTES), dtype=dtype, count=1)[0]
    try:
        meta = json.loads(str(text))
    except RecursionError:
        raise ValueError(f"'__meta__' is nested deeper than {MAX_META_DEPTH}") from None
    if _depth(meta, MAX_META_DEPTH) > MAX_META_DEPTH:
        raise ValueError(f"'__meta__' is nested deeper than {MAX_META_DEPTH}")
    if not isinstance(meta, dict) or meta.get("format") != WEIGHTS_FORMAT:
        raise ValueError("the format tag is missing")
    if meta.get("version") != WEIGHTS_VERSION:
        raise ValueError(f"unsupported weights format version {meta.get('version')!r}")
    return meta


def _board(meta: dict[str, Any], max_side: int, max_cells: int) -> BoardSize:
    values = []
    for key in BoardSize._fields:
        value = meta.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= max_side:
            raise ValueError(f"{key} must be a whole number in [1, {max_side}], got {value!r}")
        values.append(value)
    board = BoardSize(*values)
    if board.rows * board.columns > max_cells:
        raise ValueError(f"a {board.rows} x {board.columns} board is larger than {max_cells} cells")
    return board


def read_weights(
    source: str | Path | Any, name: str = "", max_side: int = 1024, max_cells: int = 4096
) -> WeightsFile:
    """Read a weights-only ``.npz`` from a path or a binary file object, bounded (see the module
    docstring); ``name`` names the file in errors. Raises ``ValueError`` for anything else."""
    name = name or str(source)
    try:
        with zipfile.ZipFile(source) as archive:
            meta = _read_meta(archive)
            board = _board(meta, max_side, max_cells)
            value = value_head(meta["value"], meta.get("layers")) if "value" in meta else None
            names = _array_names(meta.get("layers"))
            if value is not None:
                names += [n for n in _array_names(value.layers) if n not in names]
            headers: dict[str, Any] = {}
            total = 0
            for array in names:  # shapes and sizes first: nothing decompressed beyond headers
                info, member = _read_member(archive, array)
                with member:
                    shape, dtype = _npy_header(member, array)
                    header_bytes = member.tell() if member.seekable() else None
                if dtype.name not in _FLOAT_KINDS:
                    raise ValueError(f"array {array!r} holds {dtype}, not floats")
                count = math.prod(shape)
                total += count
                if total > MAX_PARAMETERS:
                    raise ValueError(f"more than {MAX_PARAMETERS} parameters")
                data_bytes = count * dtype.itemsize
                if info.file_size < data_bytes or (
                    header_bytes is not None and info.file_size != header_bytes + data_bytes
                ):
                    raise ValueError(f"array {array!r}: its size does not match its shape {shape}")
                headers[array] = _Shape(shape)
            planes = (2, board.rows, board.columns)
            out = check_cost(meta.get("layers"), headers, planes, value).shape
            if out != (board.columns,):
                raise ValueError(f"the network outputs shape {out}, not {board.columns} logits")
            params = {}
            for array in names:
                _, member = _read_member(archive, array)
                with member:
                    shape, dtype = _npy_header(member, array)
                    data = member.read(math.prod(shape) * dtype.itemsize)
                params[array] = np.frombuffer(data, dtype=dtype).reshape(shape)
        return WeightsFile(board, meta["layers"], params, value)
    except ValueError as error:
        raise ValueError(f"{name} is not a connectx-gym weights file: {error}") from None
    except (
        OSError,
        EOFError,
        KeyError,
        TypeError,
        zipfile.BadZipFile,
        RecursionError,
        NotImplementedError,  # zipfile: an unknown compression method
        RuntimeError,  # zipfile: an encrypted entry
        zlib.error,
        lzma.LZMAError,
    ) as error:
        reason = f"{type(error).__name__}: {error}"
        message = f"{name} is not a connectx-gym weights file: {reason}"
        raise ValueError(message) from None


class _Shape:
    """An array's shape, known from its header before its data is read."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape


def weights_bytes(weights: WeightsFile) -> bytes:
    """``weights`` as the bytes of a compressed ``.npz``."""
    buffer = io.BytesIO()
    write_weights(weights, buffer, compressed=True)
    return buffer.getvalue()
