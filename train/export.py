"""Kaggle export: one self-contained ``main.py`` with the weights embedded and numpy-only inference
(``connectx export-kaggle MODEL``), of a network or of a search led by one.

The file holds the network as a base64 ``.npz`` in the weights-only format and the whole source of
:mod:`connectx_gym.forward` and :mod:`connectx_gym.weights` (the modules the ``.npz`` loader uses:
the exported agent reads its weights and runs exactly the same forward pass), then an
``agent(obs, config)`` that plays the legal column with the highest logit: it never answers an
illegal column (:func:`export_kaggle`). It imports only numpy and the standard library. Converting
an SB3 ``.zip`` needs torch; exporting from a ``.npz`` does not.

A search spec (``connectx export-kaggle "mcts:net=ppo,..."``, :func:`export_search`) exports the
same network, then the sources of the search: the core's bitboard rules it calls, the kernels of
:mod:`connectx_baselines._mcts_kernels` and the loop of :mod:`connectx_baselines._mcts_search`,
run as plain Python (Kaggle's agents may lack numba). Its ``agent`` plays the spec's PUCT search
(:class:`connectx_baselines.mcts.MCTSPolicy`) within the spec's budget and at most half of
Kaggle's ``actTimeout``, its leaves scored as the spec's are (the network's value, or random
games).

The checks both exports share with the ONNX export (:mod:`connectx_train.onnx_export`) are here:
the model file an export reads (:func:`model_file`), the output that may not be that file
(:func:`refuse_writing_onto`) and the bound of ``connectx export-onnx --check``
(:data:`MAX_CHECK_POSITIONS`), which its flags read without torch.
"""

from __future__ import annotations

import ast
import base64
import inspect
import os
from pathlib import Path

from connectx_baselines import _mcts_kernels as kernels_module
from connectx_baselines import _mcts_search as search_module
from connectx_baselines._kernels_common import non_losing_moves
from connectx_baselines._layout import center_order
from connectx_baselines.mcts import MCTSPolicy
from connectx_gym import _dims as dims_module
from connectx_gym import bitboard
from connectx_gym import forward as forward_module
from connectx_gym import weights as weights_module
from connectx_gym.files import SHIPPED_WEIGHTS, load_file, shipped_weights
from connectx_gym.outputs import OutputPathError, check_output_path, write_text_atomically
from connectx_gym.registry import make_policy, parse_spec
from connectx_gym.weights import WeightsFile, weights_bytes
from connectx_train.sb3_files import GEOMETRY_ATTRIBUTE, weights_from_sb3

__all__ = [
    "GEOMETRY_ATTRIBUTE",
    "MAX_CHECK_POSITIONS",
    "export_kaggle",
    "export_search",
    "is_search_spec",
    "kaggle_source",
    "model_file",
    "network_file",
    "refuse_writing_onto",
    "search_kaggle_source",
    "weights_from_sb3",
]

#: The most positions ``connectx export-onnx --check`` draws (:mod:`connectx_train.onnx_export`):
# 100,000
#: positions of the largest board are 0.1 GB of inputs, and minutes of drawing.
MAX_CHECK_POSITIONS = 100_000

_AGENT_SOURCE = '''
_NETWORK = read_weights(io.BytesIO(base64.b64decode(_WEIGHTS)), "embedded weights")
_BOARD = (_NETWORK.geometry.rows, _NETWORK.geometry.columns, _NETWORK.geometry.inarow)


def _setting(source, key):
    return source[key] if isinstance(source, dict) else getattr(source, key)


def agent(obs, config):
    """The legal column with the highest logit for the player to move."""
    rows, columns = int(_setting(config, "rows")), int(_setting(config, "columns"))
    if (rows, columns, int(_setting(config, "inarow"))) != _BOARD:
        raise ValueError(f"this agent was trained on another board size: {_BOARD}")
    grid = np.asarray(_setting(obs, "board"), dtype=np.int64).reshape(rows, columns)
    mark = int(_setting(obs, "mark"))
    planes = np.stack([grid == mark, grid == 3 - mark])
    legal = grid[0] == 0
    logits = masked_logits(_NETWORK.layers, _NETWORK.params, planes, legal, _NETWORK.kernels)
    return best_legal_column(logits, legal)
'''


def _module_body(module: object, drop_imports: tuple[str, ...] = ()) -> str:
    """``module``'s source without its docstring and its ``from`` imports of ``drop_imports``."""
    source = inspect.getsource(module)  # type: ignore[arg-type]
    skipped: set[int] = set()
    body = ast.parse(source).body
    for node in body:
        docstring = node is body[0] and isinstance(node, ast.Expr)
        if docstring or (isinstance(node, ast.ImportFrom) and node.module in drop_imports):
            skipped.update(range(node.lineno - 1, node.end_lineno or node.lineno))
    lines = source.splitlines(keepends=True)
    return "".join(line for number, line in enumerate(lines) if number not in skipped).strip()


def kaggle_source(weights: WeightsFile) -> str:
    """The text of a self-contained Kaggle agent file playing ``weights``."""
    encoded = base64.b64encode(weights_bytes(weights)).decode("ascii")
    g = weights.geometry
    # forward's source, then weights' without the imports that the file already holds
    body = (
        _module_body(forward_module)
        + "\n\n\n"
        + _module_body(weights_module, ("__future__", "connectx_gym.forward"))
    )
    header = (
        f'"""ConnectX agent exported by connectx-gym: a policy network for {g.rows}x{g.columns}, '
        f"{g.inarow} in a row.\n\nSelf-contained: numpy only, weights embedded (weights-only "
        ".npz, base64), read and run by the source of connectx_gym.forward and "
        'connectx_gym.weights below. Plays the legal column with the highest logit.\n"""\n\n'
    )
    wrapped = "\n".join(encoded[i : i + 96] for i in range(0, len(encoded), 96))
    imports = "import base64\n\n"
    return (
        f'{header}{body}\n\n\n{imports}_WEIGHTS = """\n{wrapped}\n"""\n\n{_AGENT_SOURCE.lstrip()}'
    )


def model_file(model: str | Path) -> Path:
    """The file an export reads for ``model``: the name of shipped weights (such as ``"ppo"``,
    :data:`connectx_gym.files.SHIPPED_WEIGHTS`), a ``.npz`` weights file or an SB3 ``.zip``."""
    if str(model) in SHIPPED_WEIGHTS:
        return shipped_weights(str(model))
    model = Path(model)
    if model.suffix.lower() not in (".npz", ".zip"):
        shipped = ", ".join(SHIPPED_WEIGHTS)
        raise ValueError(
            f"cannot export {model}: expected a .npz weights file or an SB3 .zip, or the name "
            f"of shipped weights ({shipped})"
        )
    return model


def refuse_writing_onto(source: Path, output: Path) -> None:
    """:class:`~connectx_gym.outputs.OutputPathError` when ``output`` is the file ``source``: the
    same path once resolved, or the same file by another name (a link, hard or symbolic, to it),
    which an export would replace by its result."""
    try:
        same = os.path.samefile(source, output)
    except OSError:  # one of them does not exist (yet)
        same = False
    if same or source.resolve() == output.resolve():
        raise OutputPathError(
            f"refusing to write {output}: it is the model being exported ({source}), which it "
            "would destroy; give another output file"
        )


def export_kaggle(model: str | Path, output: str | Path = "main.py") -> Path:
    """Write the Kaggle agent file for ``model`` (a ``.npz`` weights file, an SB3 ``.zip`` or the
    name of shipped weights, such as ``"ppo"``; a search with its network:
    :func:`export_search`)."""
    output = check_output_path(output)  # before the work: a bad path fails at once
    source = model_file(model)
    refuse_writing_onto(source, output)  # the model's own file, by any name
    weights = load_file(source)
    return write_text_atomically(output, kaggle_source(weights))


#: The policy name whose specs export as a search.
SEARCH_POLICY = "mcts"
_RULES = (
    bitboard.column_mask,
    bitboard.has_line,
    bitboard.winning_cells,
    bitboard.popcount,
    bitboard.possible_moves,
    non_losing_moves,
)
_KERNELS = (
    "new_tree",
    "uct_run",
    "gather_leaves",
    "finish_leaves",
    "root_visits",
    "root_outcomes",
)

_SEARCH_AGENT_SOURCE = '''
def helper(function):
    """The kernels' mark for numba, which this file does not use."""
    return function


{rules}


{dims}


{kernels}


{search}


{order}


_ROWS, _COLUMNS, _INAROW = _BOARD
_HEIGHT = _ROWS + 1
_BOTTOM = ((1 << (_COLUMNS * _HEIGHT)) - 1) // ((1 << _HEIGHT) - 1)
_DIMS = Dims(
    _BOTTOM, _BOTTOM * ((1 << _ROWS) - 1), _HEIGHT, _INAROW, _COLUMNS * _HEIGHT, _COLUMNS,
    _ROWS * _COLUMNS,
)
_WIDE = _COLUMNS * _HEIGHT > 64
_TREE = SearchTree(
    types.SimpleNamespace(**{{name: globals()[name] for name in {kernel_names!r}}}),
    _DIMS, _ROWS, _COLUMNS, center_order(_COLUMNS), _WIDE,
)
_CELL_BITS = bit_indices(_ROWS, _COLUMNS, _WIDE).ravel()
_CELL_VALUES = np.left_shift(np.ones_like(_CELL_BITS), _CELL_BITS)
_RNG = np.random.default_rng({seed})
_SIMULATIONS = {simulations!r}
_TIME_BUDGET = {time_budget!r}
_EXPLORATION = {exploration!r}
_ROLLOUTS = {rollouts!r}
_BATCH = {batch!r}
_VALUE_LEAVES = {value_leaves!r}


def _evaluate(planes):
    if _VALUE_LEAVES:  # the leaves scored by the network's value head, not by random games
        return _NETWORK.logits_and_values(planes)
    return _NETWORK.logits(planes)


def agent(obs, config):
    """The most visited column of a PUCT search led by the network (a proven win first)."""
    rows, columns = int(_setting(config, "rows")), int(_setting(config, "columns"))
    if (rows, columns, int(_setting(config, "inarow"))) != _BOARD:
        raise ValueError(f"this agent was trained on another board size: {{_BOARD}}")
    grid = np.asarray(_setting(obs, "board"), dtype=np.int64).ravel()
    mark = int(_setting(obs, "mark"))
    current = _CELL_VALUES[grid == mark].sum()
    mask = _CELL_VALUES[grid != 0].sum()
    moves = int(np.count_nonzero(grid))
    try:
        seconds = 0.5 * float(_setting(config, "actTimeout"))
    except (KeyError, AttributeError):  # a bare config: Kaggle's 2 s
        seconds = 1.0
    if _TIME_BUDGET is not None:
        seconds = min(seconds, _TIME_BUDGET)
    found = _TREE.search(
        int(current), int(mask), moves, _RNG, _SIMULATIONS, seconds, _EXPLORATION, _ROLLOUTS,
        _evaluate, _BATCH, _VALUE_LEAVES,
    )
    scores = found["visits"] + np.where(found["outcomes"] == WIN, 1e12, 0.0)
    scores -= np.where(found["outcomes"] == LOSS, 1e12, 0.0)
    legal = grid.reshape(rows, columns)[0] == 0
    scores = np.where(legal & ~np.isnan(scores), scores, -np.inf)
    best = np.flatnonzero(scores == scores.max())
    return int(best[_RNG.integers(len(best))])
'''


def is_search_spec(model: object) -> bool:
    """Whether ``model`` is a spec of the search policy (``"mcts:net=ppo,time_budget=0.5"``)."""
    return isinstance(model, str) and model.strip().split(":")[0].strip() == SEARCH_POLICY


def network_file(spec: str) -> Path | None:
    """The file the network of the search ``spec`` is read from (None for a registered network
    such as ``ppo``)."""
    net = parse_spec(spec)[1].get("net")
    return Path(net) if isinstance(net, str) and Path(net).is_file() else None


def search_kaggle_source(spec: str, seed: int = 0) -> str:
    """The text of a self-contained Kaggle agent file playing the search ``spec`` (a ``mcts``
    spec with a network); its generator is seeded with ``seed``."""
    parse_spec(spec)  # a malformed spec fails here, naming itself
    policy = make_policy(spec)
    if not isinstance(policy, MCTSPolicy) or policy.weights is None:
        raise ValueError(
            f"cannot export {spec!r}: the search exports with its network (net=ppo or a file)"
        )
    if policy.solver_nodes is not None:
        raise ValueError(
            f"cannot export {spec!r}: solver_nodes needs the compiled solver, and the exported "
            "search runs as plain Python; export it without solver_nodes"
        )
    base = kaggle_source(policy.weights)
    agent_start = base.index("\ndef agent(")
    rules = "\n\n\n".join(inspect.getsource(rule) for rule in _RULES)
    dims = "\n\n\n".join(
        inspect.getsource(item) for item in (dims_module.Dims, dims_module.as_dims)
    )
    internal = (
        "__future__",
        "connectx_gym._dims",
        "connectx_gym._jit",
        "connectx_gym.bitboard",
        "connectx_baselines._kernels_common",
    )
    agent = _SEARCH_AGENT_SOURCE.format(
        rules=rules,
        dims=dims,
        kernels=_module_body(kernels_module, internal),
        search=_module_body(search_module, ("__future__", "connectx_baselines._mcts_kernels")),
        order=inspect.getsource(center_order),
        kernel_names=_KERNELS,
        seed=seed,
        simulations=policy.simulations,
        time_budget=policy.time_budget,
        exploration=policy.exploration,
        rollouts=policy.rollouts,
        batch=policy.batch,
        value_leaves=policy.value_leaves,
    )
    header_end = base.index('"""\n\n') + len('"""\n\n')
    header = (
        f'"""ConnectX agent exported by connectx-gym: {spec}, a PUCT search led by a policy '
        "network.\n\nSelf-contained: numpy only, weights embedded (weights-only .npz, base64), "
        "read and run by the source of connectx_gym.forward and connectx_gym.weights below; the "
        "search is the source of connectx_baselines' MCTS kernels, run as plain Python.\n"
        '"""\n\n'
    )
    imports = "import math\nimport time\nimport types\nfrom typing import NamedTuple\n\n"
    return header + base[header_end:agent_start] + "\n" + imports + agent.lstrip()


def export_search(spec: str, output: str | Path = "main.py") -> Path:
    """Write the Kaggle agent file playing the search ``spec`` (``"mcts:net=ppo,time_budget=0.5"``)
    to ``output``, which may not be the network's own file."""
    output = check_output_path(output)  # before the work: a bad path fails at once
    network = network_file(spec)
    if network is not None:
        refuse_writing_onto(network, output)
    return write_text_atomically(output, search_kaggle_source(spec))
