"""Kaggle export of a network with its search: ``connectx export-kaggle "mcts:net=ppo,..."``.

The ``main.py`` holds what :func:`connectx_train.export.kaggle_source` holds (the weights, base64,
and the source of :mod:`connectx_gym.forward` and :mod:`connectx_gym.weights`), then the sources
of the search: the core's bitboard rules it calls, the kernels of
:mod:`connectx_baselines._mcts_kernels` and the loop of :mod:`connectx_baselines._mcts_search`,
run as plain Python (Kaggle's agents may lack numba). Its ``agent`` plays the spec's PUCT search
(:class:`connectx_baselines.mcts.MCTSPolicy`) within the spec's budget and at most half of
Kaggle's ``actTimeout``, its leaves scored as the spec's are (the network's value, or random
games). numpy and the standard library only.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from connectx_baselines import _mcts_kernels as kernels_module
from connectx_baselines import _mcts_search as search_module
from connectx_baselines._layout import center_order
from connectx_baselines.mcts import MCTSPolicy
from connectx_gym import _dims as dims_module
from connectx_gym import bitboard
from connectx_gym.outputs import check_output_path, write_text_atomically
from connectx_gym.registry import make_policy, parse_spec
from connectx_train.export import _module_body, kaggle_source, refuse_writing_onto

__all__ = ["export_search", "is_search_spec", "network_file", "search_kaggle_source"]

#: The policy name whose specs export as a search.
SEARCH_POLICY = "mcts"
_RULES = (
    bitboard.column_mask,
    bitboard.has_line,
    bitboard.winning_cells,
    bitboard.popcount,
    bitboard.possible_moves,
)
_KERNELS = (
    "new_tree",
    "uct_run",
    "gather_leaves",
    "finish_leaves",
    "root_visits",
    "root_outcomes",
)

_AGENT_SOURCE = '''
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
    base = kaggle_source(policy.weights)
    agent_start = base.index("\ndef agent(")
    rules = "\n\n\n".join(inspect.getsource(rule) for rule in _RULES)
    dims = "\n\n\n".join(
        inspect.getsource(item) for item in (dims_module.Dims, dims_module.as_dims)
    )
    internal = ("__future__", "connectx_gym._dims", "connectx_gym._jit", "connectx_gym.bitboard")
    agent = _AGENT_SOURCE.format(
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
