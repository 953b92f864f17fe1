"""Monte Carlo tree search as a policy (``"mcts"``), with random rollouts or a network's guidance.

The search is the usual loop (select, expand, evaluate, back up) over a tree kept in arrays
(:mod:`connectx_baselines._mcts_kernels`, numba-compiled on boards of up to 64 bits), with the
evaluation swappable, as in OpenSpiel's ``MCTSBot`` and AlphaZero.jl:

* without ``net``: UCT (``Q + uct_c sqrt(ln N / n)``) whose leaves are scored by random games
  played to the end;
* with ``net`` (a network: ``"ppo"`` or a weights file such as ``runs/x/final.npz``): PUCT
  (``Q + c_puct P sqrt(N) / (1 + n)``) whose priors ``P`` are the softmax of the network's
  logits, the network asked for a batch of leaves at a time (descents in a batch steer apart by
  virtual losses), each leaf with its mirror image (``mirror``: their answers averaged), its
  answers kept for the rest of the game
  (:class:`connectx_baselines._mcts_search.EvaluationCache`). A network with a value head
  (:attr:`connectx_gym.weights.WeightsFile.value`: the shipped ``ppo`` and the networks
  ``connectx train`` writes) scores each leaf by its value, as AlphaZero does, with no rollout;
  one without (``ppo-v1``) by random games. ``rollouts`` chooses: unset, the value where there is
  one; 0, the value (refused without one); 1 or more, random games even where there is a value.

With ``solver_nodes`` (a network search only), each leaf of at least ``solver_min_stones``
stones is first offered to the exact solver for that many nodes (:class:`LeafProver`): a leaf
it proves is settled with its game value and costs no network call (minimax proofs inside
MCTS-Solver, as in Baier and Winands' hybrids), so the search plays perfectly where the solver
reaches and as the network leads where it does not.

Both prove what they can (MCTS-Solver): a move that wins, fills the board or lets the opponent
win at once, or (where no move wins at once) makes a threat the opponent cannot stop, is proven
when its node is made, and proofs climb the tree, so a win in one is always taken and a loss in
one blocked when a block exists. The move played is the most visited
(a proven win first, a proven loss last), ties broken by the caller's generator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from connectx_baselines import _mcts_kernels as layout
from connectx_baselines._checks import require_node_limit, require_seconds
from connectx_baselines._layout import center_order
from connectx_baselines._mcts_search import SearchTree, tempered_logits
from connectx_baselines.solver import SearchLimitError, Solver
from connectx_gym._dims import dims_arg
from connectx_gym._jit import backend
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.deadline import time_left
from connectx_gym.files import NumpyNetPolicy, one_blas_thread
from connectx_gym.policy import Policy, choose_best, require_depth, require_playable
from connectx_gym.weights import WeightsFile

__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_C_PUCT",
    "DEFAULT_MIRROR",
    "DEFAULT_SIMULATIONS",
    "DEFAULT_SOLVER_MIN_STONES",
    "PROVEN_BONUS",
    "LeafProver",
    "MCTSPolicy",
]

#: Simulations a move runs when neither ``simulations`` nor ``time_budget`` is given.
DEFAULT_SIMULATIONS = 1000
#: PUCT's exploration constant with a network, over values in [-1, 1]: larger spends a small
#: budget on moves the priors like and the backed-up values have already refuted.
DEFAULT_C_PUCT = 1.0
#: Leaves the network scores in one call. The forward pass costs about the same per leaf in any
#: batch, so in a time budget a small batch runs most of a large one's simulations (the calls'
#: overhead takes the rest) and chooses each with more of the tree's results: the descents of a
#: batch steer apart by virtual losses, guesses of where the others' results would lead.
DEFAULT_BATCH = 2
#: Whether a network search evaluates each leaf with its mirror image (``mirror``). A taught
#: network is never exactly mirror-symmetric: the mean of its answers on a leaf and on the leaf's
#: image errs less than either, worth the simulations that calls of twice the boards cost.
DEFAULT_MIRROR = True
#: Nodes above which a move's tree is dropped after the move rather than kept for the next one.
KEEP_TREE_NODES = 1 << 16
#: The fewest stones on a leaf that ``solver_nodes`` offers the solver (fewer: it rarely proves
#: one within a few thousand nodes, and the time goes to the network instead).
DEFAULT_SOLVER_MIN_STONES = 16
#: What :meth:`MCTSPolicy.scores` adds to a proven win's visits (and takes from a proven loss's).
PROVEN_BONUS = 1e12


def _require_number(name: str, value: Any, minimum: float, inclusive: bool) -> float:
    """``value`` as a float when it is a finite number above ``minimum`` (or equal to it, when
    ``inclusive``), else a one-line ``ValueError``."""
    bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not np.isfinite(value)
        or value < minimum
        or (value == minimum and not inclusive)
    ):
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return float(value)


def _require_positive(name: str, value: Any) -> float:
    return _require_number(name, value, 0.0, inclusive=False)


def _require_non_negative(name: str, value: Any) -> float:
    return _require_number(name, value, 0.0, inclusive=True)


def load_network(net: str) -> tuple[WeightsFile, str]:
    """The weights of the network ``net`` names (a registered network such as ``"ppo"``, or a
    weights file) and its name; ``ValueError`` when ``net`` is not a network."""
    from connectx_gym.registry import make_policy

    if not isinstance(net, str) or not net.strip():
        raise ValueError(f"net must name a network ('ppo' or a weights file), got {net!r}")
    policy = make_policy(net)
    if not isinstance(policy, NumpyNetPolicy):
        raise ValueError(f"net={net!r} is not a network (a .npz or .zip model, or 'ppo')")
    return policy.weights, policy.name


class LeafProver:
    """The exact solver, offered each leaf of a search: the game value it proves for the player
    to move within ``nodes`` solver nodes (positions of at least ``stones`` stones), else None.

    It has a transposition table of its own (``2 ** TABLE_BITS`` entries), kept for the policy's
    life, so what one move's search proves helps the next; it never shares the table of the
    solver that judges a policy (:func:`connectx_baselines.solver.get_solver`).
    """

    TABLE_BITS = 20

    def __init__(self, geometry: Geometry, nodes: int, stones: int = 0) -> None:
        self.geometry = geometry
        self.nodes = nodes
        self.stones = stones
        self.solver = Solver(geometry, self.TABLE_BITS)
        self.tried = self.proven = 0
        self._searched = False  # since the table was last emptied

    def reset(self) -> None:
        """Forget what was proven (a new game); a table no search has written stays as it is
        (emptying writes all 16 MB, and a judge resets before every position)."""
        if self._searched:
            self.solver.reset()
            self._searched = False

    def __call__(self, current: int, mask: int) -> int | None:
        moves = mask.bit_count()
        if moves < self.stones:
            return None
        self.tried += 1
        self._searched = True
        try:
            value = self.solver.game_value(
                Board(self.geometry, current, mask, moves), node_limit=self.nodes
            )
        except SearchLimitError:
            return None
        self.proven += 1
        return value


class MCTSPolicy(Policy):
    """Monte Carlo tree search (``"mcts"``): UCT with random rollouts, or PUCT with a network.

    Args:
        simulations: simulations a move runs, >= 1 (default :data:`DEFAULT_SIMULATIONS` when no
            ``time_budget`` is given, else no count).
        time_budget: seconds a move may take (the search stops before a simulation or batch
            that would pass it; numba's one-off compilation for a new board size happens before
            the clock starts). A move under a time budget alone is not reproducible (how far
            the search gets depends on the machine); under ``simulations`` alone it is, given
            the generator.
        net: a network for the priors, and the leaves' values where it has a value head
            (``"ppo"``, a ``.npz`` weights file, an SB3 ``.zip``); it plays only the board size
            it was trained on.
        uct_c: UCT's exploration constant (without ``net``; default 2).
        c_puct: PUCT's exploration constant (with ``net``; default :data:`DEFAULT_C_PUCT`).
        rollouts: random games that score each leaf, >= 1; 0 scores each leaf by the network's
            value instead (a ``net`` with a value head). Default: 0 for a ``net`` with a value
            head, else 1.
        batch: leaves the network scores in one call, >= 1 (with ``net``; default
            :data:`DEFAULT_BATCH`).
        solver_nodes: with ``net``, the exact solver's nodes per leaf, >= 1: a leaf it proves
            within them (a win, draw or loss) is settled with no network call (default None:
            no solver).
        solver_min_stones: the fewest stones on a leaf offered to the solver, >= 0 (with
            ``solver_nodes``; default :data:`DEFAULT_SOLVER_MIN_STONES`).
        fpu_reduction: with ``net``, a move not yet visited is valued as its position's value
            for the player choosing less this, >= 0 (first-play urgency, as in Leela Zero);
            default None: valued as a draw.
        prior_temperature: with ``net``, the priors are the softmax of the network's logits
            divided by this, > 0 (above 1 spreads the first visits over the moves the network
            ranks low; default 1: its own probabilities).
        mirror: with ``net``, each leaf's logits and value are the mean of the network's on the
            leaf and on its mirror image (columns reversed), both in one call: fewer mistakes in
            the same time, though each call costs more (default :data:`DEFAULT_MIRROR`).
    """

    name = "mcts"

    def __init__(
        self,
        simulations: int | None = None,
        time_budget: float | None = None,
        net: str | None = None,
        uct_c: float | None = None,
        c_puct: float | None = None,
        rollouts: int | None = None,
        batch: int | None = None,
        solver_nodes: int | None = None,
        solver_min_stones: int | None = None,
        fpu_reduction: float | None = None,
        prior_temperature: float | None = None,
        mirror: bool | None = None,
    ) -> None:
        super().__init__()
        if simulations is not None:
            simulations = require_depth("simulations", simulations)
        self.time_budget = require_seconds("time_budget", time_budget)
        if simulations is None and self.time_budget is None:
            simulations = DEFAULT_SIMULATIONS
        self.simulations = simulations
        if rollouts is not None and rollouts != 0:
            rollouts = require_depth("rollouts", rollouts)
        if net is None:
            for option, value in (("c_puct", c_puct), ("batch", batch)):
                if value is not None:
                    raise ValueError(f"{option} applies to a search with a network (net=...)")
            self.exploration = _require_positive("uct_c", 2.0 if uct_c is None else uct_c)
            self.batch = 1
        else:
            if uct_c is not None:
                raise ValueError("uct_c applies to a search without a network: use c_puct")
            self.exploration = _require_positive(
                "c_puct", DEFAULT_C_PUCT if c_puct is None else c_puct
            )
            self.batch = require_depth("batch", DEFAULT_BATCH if batch is None else batch)
        self.net = net
        self.weights: WeightsFile | None = None
        if net is not None:
            self.weights, net_name = load_network(net)
            self.name = f"mcts({net_name})"
        self.rollouts = self._leaf_rollouts(rollouts)
        self.solver_nodes = require_node_limit("solver_nodes", solver_nodes)
        if self.solver_nodes is not None and net is None:
            raise ValueError("solver_nodes applies to a search with a network (net=...)")
        if solver_min_stones is not None and self.solver_nodes is None:
            raise ValueError("solver_min_stones applies with solver_nodes")
        if solver_min_stones is None:
            solver_min_stones = DEFAULT_SOLVER_MIN_STONES
        elif (
            isinstance(solver_min_stones, bool)
            or not isinstance(solver_min_stones, (int, np.integer))
            or solver_min_stones < 0
        ):
            raise ValueError(
                f"solver_min_stones must be an integer >= 0, got {solver_min_stones!r}"
            )
        self.solver_min_stones = int(solver_min_stones)
        if fpu_reduction is not None:
            if net is None:
                raise ValueError("fpu_reduction applies to a search with a network (net=...)")
            fpu_reduction = _require_non_negative("fpu_reduction", fpu_reduction)
        self.fpu_reduction = fpu_reduction
        if prior_temperature is not None and net is None:
            raise ValueError("prior_temperature applies to a search with a network (net=...)")
        self.prior_temperature = (
            1.0
            if prior_temperature is None
            else _require_positive("prior_temperature", prior_temperature)
        )
        if mirror is not None and net is None:
            raise ValueError("mirror applies to a search with a network (net=...)")
        if mirror is not None and not isinstance(mirror, (bool, np.bool_)):
            raise ValueError(f"mirror must be true or false, got {mirror!r}")
        self.mirror = DEFAULT_MIRROR if mirror is None else bool(mirror)
        self._provers: dict[Geometry, LeafProver] = {}
        self._trees: dict[Geometry, SearchTree] = {}
        # Load the compiled kernels for the usual board now, not inside a timed first move
        # (other sizes load on their first move, before its clock starts).
        self._tree(Geometry() if self.weights is None else self.weights.geometry)

    def _leaf_rollouts(self, rollouts: int | None) -> int:
        """The random games per leaf: ``rollouts``, or 0 (the network's value) when unset and
        the network has a value head, else 1; ``ValueError`` for 0 without a value head."""
        has_value = self.weights is not None and self.weights.value is not None
        if rollouts is None:
            return 0 if has_value else 1
        if isinstance(rollouts, bool) or rollouts != 0:
            return require_depth("rollouts", rollouts)
        if self.weights is None:
            raise ValueError("rollouts=0 scores the leaves by a network's value: give net=")
        if not has_value:
            raise ValueError(
                f"rollouts=0 scores the leaves by a network's value, and net={self.net!r} has "
                "no value head: give rollouts >= 1"
            )
        return 0

    @property
    def value_leaves(self) -> bool:
        """Whether the network's value scores the leaves (``rollouts`` 0), not random games."""
        return self.rollouts == 0

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_trees"] = {}  # rebuilt on use: no need to copy a tree of megabytes
        state["_provers"] = {}  # likewise their solvers' tables
        return state

    def _evaluate(self, planes: np.ndarray) -> Any:
        """The network's logits of a batch of leaves, with their values when they score them."""
        assert self.weights is not None
        with one_blas_thread():
            if self.value_leaves:
                logits, values = self.weights.logits_and_values(planes)
                return tempered_logits(logits, self.prior_temperature), values
            return tempered_logits(self.weights.logits(planes), self.prior_temperature)

    def _tree(self, geometry: Geometry) -> SearchTree:
        tree = self._trees.get(geometry)
        if tree is None:
            g = geometry
            kernels = backend("connectx_baselines._mcts_kernels", g)
            tree = SearchTree(
                kernels, dims_arg(g), g.rows, g.columns, center_order(g.columns), not g.fits_64_bits
            )
            # Compile (or load) the kernels before any clock starts: a small search of both kinds.
            warm = np.random.default_rng(0)
            tree.search(0, 0, 0, warm, 2, None, 1.0, 1)
            tree.search(0, 0, 0, warm, 2, None, 1.0, 1, lambda planes: planes[:, 0, 0], 2)
            self._trees[g] = tree
        return tree

    def reset(self) -> None:
        for prover in self._provers.values():
            prover.reset()

    def _prover(self, geometry: Geometry) -> LeafProver | None:
        if self.solver_nodes is None:
            return None
        prover = self._provers.get(geometry)
        if prover is None:
            prover = LeafProver(geometry, self.solver_nodes, self.solver_min_stones)
            self._provers[geometry] = prover
        return prover

    def search(self, board: Board, rng: np.random.Generator) -> dict[str, Any]:
        """Search ``board`` (not over): the root moves' visits and proven outcomes by column,
        the simulations run, the nodes, the seconds and why it stopped (with ``solver_nodes``,
        also the leaves offered to the solver and those it proved)."""
        require_playable(board)
        g = board.geometry
        if self.weights is not None and g != self.weights.geometry:
            raise ValueError(
                f"{self.name}'s network was trained on {self.weights.geometry!r}, not {g!r}"
            )
        tree = self._tree(g)
        seconds = self.time_budget
        outer = time_left()  # the caller's deadline (connectx serve's requests), if any
        if outer is not None:
            seconds = outer if seconds is None else min(seconds, outer)
        evaluate = None if self.weights is None else self._evaluate
        prover = self._prover(g)
        tried, proven = (0, 0) if prover is None else (prover.tried, prover.proven)
        result = tree.search(
            board.current, board.mask, board.moves, rng, self.simulations, seconds,
            self.exploration, self.rollouts, evaluate, self.batch, self.value_leaves, prover,
            self.fpu_reduction, self.mirror,
        )  # fmt: skip
        if prover is not None:
            result["solver_tried"] = prover.tried - tried
            result["solver_proven"] = prover.proven - proven
        if tree.nodes > KEEP_TREE_NODES:
            # A large search's pages stay resident while the tree is kept: let them go, so that
            # a process holding many policies (connectx serve) holds no large trees between moves.
            del self._trees[g]
        return result

    def scores(self, board: Board, rng: np.random.Generator | None = None) -> np.ndarray:
        """The root moves' visits (NaN for full columns), a proven win raised and a proven
        loss lowered by :data:`PROVEN_BONUS`; the search draws from ``rng`` (seed 0 if None)."""
        found = self.search(board, np.random.default_rng(0) if rng is None else rng)
        kept = ("simulations", "cached", "nodes", "seconds", "solver_tried", "solver_proven")
        self.last_info = {key: found[key] for key in kept if key in found}
        self.last_info["stopped"] = found["stopped"]
        outcomes = found["outcomes"]
        bonus = np.where(outcomes == layout.WIN, PROVEN_BONUS, 0.0)
        bonus -= np.where(outcomes == layout.LOSS, PROVEN_BONUS, 0.0)
        return found["visits"] + bonus

    def act(self, board: Board, rng: np.random.Generator) -> int:
        scores = self.scores(board, rng)
        column = choose_best(scores, rng)
        self.last_info["visits"] = float(scores[column])
        return column

    def __repr__(self) -> str:
        parts = []
        if self.simulations is not None:
            parts.append(f"simulations={self.simulations}")
        if self.time_budget is not None:
            parts.append(f"time_budget={self.time_budget}")
        if self.net is not None:
            parts += [f"net={self.net!r}", f"c_puct={self.exploration}", f"batch={self.batch}"]
            if self.solver_nodes is not None:
                parts.append(f"solver_nodes={self.solver_nodes}")
                parts.append(f"solver_min_stones={self.solver_min_stones}")
            if self.fpu_reduction is not None:
                parts.append(f"fpu_reduction={self.fpu_reduction}")
            if self.prior_temperature != 1.0:
                parts.append(f"prior_temperature={self.prior_temperature}")
            parts.append(f"mirror={self.mirror}")
        else:
            parts.append(f"uct_c={self.exploration}")
        return f"MCTSPolicy({', '.join(parts)}, rollouts={self.rollouts})"
