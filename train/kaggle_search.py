"""Kaggle export of a search led by a network (``connectx export-kaggle "mcts:net=ppo,..."``): one
self-contained ``main.py``, the network of :func:`connectx_train.export.kaggle_source` followed by
the sources of the search.

The file holds the core's bitboard rules the kernels call, the search kernels of
:mod:`connectx_baselines._mcts_kernels`, the loop of :mod:`connectx_baselines._mcts_search` and the
exact solver's kernels (:mod:`connectx_baselines._solver_kernels` and the helpers of
:mod:`connectx_baselines._kernels_common`), which a spec with ``solver_nodes`` uses. Where numba
imports (Kaggle's Python image has it), the file compiles the kernels when it is loaded, as
:mod:`connectx_gym._jit` compiles them here; without numba (or on a board beyond 64 bits) they run
as plain Python and ``solver_nodes`` is not used (plain Python proves about 5,000 nodes a second: a
leaf's proof would take the whole move), which the agent says once on standard error. Where
threadpoolctl imports, a move's search holds numpy's BLAS to one thread, as the network's file
does. Its ``agent`` plays the spec's PUCT search (:class:`connectx_baselines.mcts.MCTSPolicy`)
within the spec's budget and at most half of Kaggle's ``actTimeout``, its leaves scored as the
spec's are (the network's value, or random games) and, with the solver, first offered to it as
:class:`connectx_baselines.mcts.LeafProver` offers them.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from types import ModuleType

from connectx_baselines import _kernels_common as common_module
from connectx_baselines import _layout as layout_module
from connectx_baselines import _mcts_kernels as kernels_module
from connectx_baselines import _mcts_search as search_module
from connectx_baselines import _solver_kernels as solver_module
from connectx_baselines._layout import center_order, frame_width, new_state
from connectx_baselines.mcts import LeafProver, MCTSPolicy
from connectx_baselines.solver import next_prime
from connectx_gym import _dims as dims_module
from connectx_gym import bitboard
from connectx_gym._jit import HELPER_OPTIONS, KERNEL_OPTIONS
from connectx_gym.outputs import check_output_path, write_text_atomically
from connectx_gym.registry import make_policy, parse_spec
from connectx_train.export import kaggle_source, module_body, refuse_writing_onto

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
#: The kernels the search loop calls through its namespace of kernels.
_KERNELS = (
    "new_tree",
    "uct_run",
    "gather_leaves",
    "finish_leaves",
    "prove_leaves",
    "root_visits",
    "root_outcomes",
)
#: The functions of :mod:`connectx_baselines._layout` the file calls: the move order, a search's
#: stack and state.
_LAYOUT_HELPERS = (center_order, frame_width, new_state)
#: The project's modules whose imports the file's sources drop (the file defines what they give).
_INTERNAL = (
    "__future__",
    "connectx_gym._dims",
    "connectx_gym._jit",
    "connectx_gym.bitboard",
    "connectx_baselines._kernels_common",
    "connectx_baselines._layout",
    "connectx_baselines._mcts_kernels",
)

_SEARCH_AGENT_SOURCE = '''
def helper(function):
    """The kernels' mark for numba: compiled into their callers (see _compile_kernels)."""
    function.jit_helper = True
    return function


{rules}


{dims}


{layout}


{common}


{solver}


{kernels}


{search}


{layout_helpers}


def _compile_kernels(names):
    """Compile the functions ``names`` with numba, where it imports, in place: they call one
    another through this file's globals, so each calls the others compiled. Returns whether it
    did (plain Python otherwise)."""
    try:
        import numba
    except ImportError:
        return False
    namespace = globals()
    for name in names:
        function = namespace[name]
        marked = getattr(function, "jit_helper", False)
        options = {helper_options!r} if marked else {kernel_options!r}
        namespace[name] = numba.njit(**options)(function)
    return True


class _LeafProver:
    """The exact solver offered each leaf of at least ``stones`` stones: the game value it proves
    for the player to move there within ``nodes`` nodes (+1, 0, -1), else None."""

    def __init__(self, nodes, stones):
        self.nodes, self.stones = nodes, stones
        self.table = np.zeros(({table_entries}, 2), dtype=np.int64)  # a prime, as the solver
        self.frames = np.zeros((_CELLS + 1, frame_width(_COLUMNS)), dtype=np.int64)
        self.bounds = np.zeros((_CELLS + 1, 3))
        self.stats = new_state()
        self.order = center_order(_COLUMNS)
        self(0, 0, budget=0)  # compile now, not in the first move's clock

    def __call__(self, current, mask, budget=None):
        moves = int(popcount(mask))
        if budget is None and moves < self.stones:
            return None
        stats = self.stats
        stats[STAT_NODES], stats[STAT_ABORTED] = 0, 0
        stats[STAT_BUDGET] = self.nodes if budget is None else budget
        value = solve_position(
            current, mask, moves, -1, 1, _DIMS_ARRAY, self.table, self.order, self.frames,
            self.bounds, stats,
        )
        if stats[STAT_ABORTED] or value == GAME_OVER:
            return None
        return (value > 0) - (value < 0)


_ROWS, _COLUMNS, _INAROW = _BOARD
_HEIGHT = _ROWS + 1
_CELLS = _ROWS * _COLUMNS
_BOTTOM = ((1 << (_COLUMNS * _HEIGHT)) - 1) // ((1 << _HEIGHT) - 1)
_DIMS = Dims(
    _BOTTOM, _BOTTOM * ((1 << _ROWS) - 1), _HEIGHT, _INAROW, _COLUMNS * _HEIGHT, _COLUMNS, _CELLS
)
_WIDE = _COLUMNS * _HEIGHT > 64
_COMPILED = not _WIDE and _compile_kernels({compiled_names!r})
_DIMS_ARRAY = np.array(_DIMS, dtype=np.int64) if _COMPILED else _DIMS
_TREE = SearchTree(
    types.SimpleNamespace(**{{name: globals()[name] for name in {kernel_names!r}}}),
    _DIMS_ARRAY, _ROWS, _COLUMNS, center_order(_COLUMNS), _WIDE,
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
_SOLVER_NODES = {solver_nodes!r}
_SOLVER_MIN_STONES = {solver_min_stones!r}
_FPU_REDUCTION = {fpu_reduction!r}
_PRIOR_TEMPERATURE = {prior_temperature!r}
_MIRROR = {mirror!r}
_PROVER = None
if _SOLVER_NODES is not None and _COMPILED:
    _PROVER = _LeafProver(_SOLVER_NODES, _SOLVER_MIN_STONES)
elif _SOLVER_NODES is not None:
    _WHY = "the board is beyond 64 bits" if _WIDE else "numba is not installed"
    print(f"{{_WHY}}: the search runs without its solver", file=sys.stderr)


def _evaluate(planes):
    if _VALUE_LEAVES:  # the leaves scored by the network's value head, not by random games
        logits, values = _NETWORK.logits_and_values(planes)
        return tempered_logits(logits, _PRIOR_TEMPERATURE), values
    return tempered_logits(_NETWORK.logits(planes), _PRIOR_TEMPERATURE)


if _COMPILED:  # compile the search's own kernels now too (the proofs' with the prover), with
    # a generator of its own
    _TREE.search(
        0, 0, 0, np.random.default_rng(0), 2, None, _EXPLORATION, _ROLLOUTS, _evaluate, _BATCH,
        _VALUE_LEAVES, _PROVER, _FPU_REDUCTION, _MIRROR,
    )


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
    with _one_blas_thread():
        found = _TREE.search(
            int(current), int(mask), moves, _RNG, _SIMULATIONS, seconds, _EXPLORATION,
            _ROLLOUTS, _evaluate, _BATCH, _VALUE_LEAVES, _PROVER, _FPU_REDUCTION, _MIRROR,
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


def _layout_constants(*modules: ModuleType) -> str:
    """Assignments of the :mod:`connectx_baselines._layout` constants ``modules`` import."""
    names: list[str] = []
    for module in modules:
        for node in ast.parse(inspect.getsource(module)).body:
            if isinstance(node, ast.ImportFrom) and node.module == layout_module.__name__:
                names += [alias.name for alias in node.names if alias.name not in names]
    # and those that the file's copies of _LAYOUT_HELPERS read
    names += [name for name in ("FRAME_MOVES", "STAT_PLY", "STAT_SIZE") if name not in names]
    return "\n".join(f"{name} = {getattr(layout_module, name)!r}" for name in names)


def _functions(*modules: ModuleType) -> list[str]:
    """The names of the functions ``modules`` define at their top level."""
    return [
        node.name
        for module in modules
        for node in ast.parse(inspect.getsource(module)).body
        if isinstance(node, ast.FunctionDef)
    ]


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
    kernel_modules = (common_module, solver_module, kernels_module)
    agent = _SEARCH_AGENT_SOURCE.format(
        rules="\n\n\n".join(inspect.getsource(rule) for rule in _RULES),
        dims="\n\n\n".join(
            inspect.getsource(item) for item in (dims_module.Dims, dims_module.as_dims)
        ),
        layout=_layout_constants(*kernel_modules),
        common=module_body(common_module, _INTERNAL),
        solver=module_body(solver_module, _INTERNAL),
        kernels=module_body(kernels_module, _INTERNAL),
        search=module_body(search_module, _INTERNAL),
        layout_helpers="\n\n\n".join(inspect.getsource(helper) for helper in _LAYOUT_HELPERS),
        helper_options=HELPER_OPTIONS,
        kernel_options=KERNEL_OPTIONS,
        table_entries=next_prime((1 << LeafProver.TABLE_BITS) + 1),
        compiled_names=[rule.__name__ for rule in _RULES]
        + ["as_dims"]
        + _functions(*kernel_modules),
        kernel_names=_KERNELS,
        seed=seed,
        simulations=policy.simulations,
        time_budget=policy.time_budget,
        exploration=policy.exploration,
        rollouts=policy.rollouts,
        batch=policy.batch,
        value_leaves=policy.value_leaves,
        solver_nodes=policy.solver_nodes,
        solver_min_stones=policy.solver_min_stones,
        fpu_reduction=policy.fpu_reduction,
        prior_temperature=policy.prior_temperature,
        mirror=policy.mirror,
    )
    header_end = base.index('"""\n\n') + len('"""\n\n')
    header = (
        f'"""ConnectX agent exported by connectx-gym: {spec}, a PUCT search led by a policy '
        "network.\n\nSelf-contained: numpy, weights embedded (weights-only .npz, base64), read "
        "and run by the source of connectx_gym.forward and connectx_gym.weights below; the search "
        "is the source of connectx_baselines' MCTS (and solver) kernels, compiled by numba when "
        "it imports, else run as plain Python (without the solver).\n"
        '"""\n\n'
    )
    imports = "".join(f"import {name}\n" for name in ("math", "sys", "time", "types"))
    imports += "from typing import NamedTuple\n\n"
    return header + base[header_end:agent_start] + "\n" + imports + agent.lstrip()


def export_search(spec: str, output: str | Path = "main.py") -> Path:
    """Write the Kaggle agent file playing the search ``spec`` (``"mcts:net=ppo,time_budget=0.5"``)
    to ``output``, which may not be the network's own file."""
    output = check_output_path(output)  # before the work: a bad path fails at once
    network = network_file(spec)
    if network is not None:
        refuse_writing_onto(network, output)
    return write_text_atomically(output, search_kaggle_source(spec))
