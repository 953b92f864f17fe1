"""``ConnectX-v0`` in batches: N games in arrays, stepped by numba kernels on the shared rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from connectx_gym import _vector_kernels
from connectx_gym._dims import dims_arg
from connectx_gym.batch import BoardBatch, choose_columns
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.env import (
    check_env_options,
    check_opening_plies,
    check_reset_options,
    opening_length,
)
from connectx_gym.memory import MEMORY_SHARE, available_memory, format_bytes
from connectx_gym.numeric import player_mark
from connectx_gym.policy import Policy, RandomPolicy
from connectx_gym.registry import make_policy
from connectx_gym.render import board_to_ansi, board_to_rgb

__all__ = ["ConnectXVectorEnv", "check_num_envs", "max_num_envs"]


class ConnectXVectorEnv(VectorEnv[np.ndarray, np.ndarray, np.ndarray]):
    """``num_envs`` games of ``ConnectX-v0`` stepped together; each board is exactly the single env.

    Make it with ``gymnasium.make_vec("ConnectX-v0", num_envs=N)`` (the registered
    ``vector_entry_point``) or directly. Rules, observation, reward, ``terminated`` and the meaning
    of every info key are those of :class:`~connectx_gym.env.ConnectXEnv`, board by board:

    - ``observations``: ``(N, 2, rows, columns)`` ``int8``, plane 0 the agent's discs; written by a
      numba kernel into one preallocated buffer (returned as a copy unless ``copy=False``).
    - ``rewards`` ``(N,)`` float64 (+1 win, -1 loss or illegal move with ``"lose"``, else 0),
      ``terminations`` ``(N,)`` bool, ``truncations`` ``(N,)`` bool (always False).
    - ``infos``: ``action_mask`` ``(N, columns)`` ``int8``, ``agent_mark`` ``(N,)``,
      ``opponent_action`` ``(N,)`` ``int64`` (-1 where the opponent did not move, and
      ``infos["_opponent_action"]`` says where it did); ``winner`` and ``illegal_action`` appear
      in ``final_info`` (Gymnasium's ``key``/``_key`` convention) for the boards that ended.
      ``action_masks()`` gives the ``(N, columns)`` bool mask (sb3-contrib's convention).

    **Autoreset: same step** (``metadata["autoreset_mode"]`` is ``AutoresetMode.SAME_STEP``). A
    board whose game ends in ``step`` is reset at once: the step returns the first observation of
    its next game (and that game's mask, mark and opening move in ``infos``), while the last
    observation and info of the ended game are in ``infos["final_obs"]`` (an object array, None
    for boards that did not end) and ``infos["final_info"]``, masked by ``_final_obs`` and
    ``_final_info``. This is the convention of SB3's ``VecEnv`` (``terminal_observation``), so every
    step's action is a move of a live game and no learner step is wasted on a reset.

    Arguments are those of ``ConnectX-v0`` (``opening_plies`` included) plus ``num_envs`` and
    ``copy``; ``opponent`` and ``agent_mark`` also take a sequence of ``num_envs`` values, one per
    board (a curriculum's mixture). Change opponents with :meth:`set_opponent` (all boards or some,
    from each board's next game) or ``reset(options={"opponent": ..., "agent_mark": ...})``.
    Opponents that offer a batch method (:mod:`connectx_gym.batch`: random, ``~epsilon`` noise,
    onestep, minimax, negamax, numpy networks) answer all their boards in one call per step; others
    board by board.

    Seeding: every random draw (the marks, the openings, the opponents' moves) comes from
    ``self.np_random``, seeded by ``reset(seed=...)``; the same seed and actions give the same batch
    of episodes.

    Actions: an ``(N,)`` integer array (a list of ints is accepted). A wrong shape or a non-integer
    dtype raises ``TypeError``/``ValueError`` before any board moves. A column off the board or
    full is illegal on that board only: ``illegal_action="lose"`` ends that game with reward -1 and
    ``illegal_action`` True in its final info; ``"raise"`` raises ``ValueError`` naming the boards,
    columns and legal ones, and leaves every board as it was.
    """

    # declared as gymnasium declares it (an attribute instances may replace)
    metadata: dict[str, Any] = {  # noqa: RUF012
        "render_modes": ["ansi", "rgb_array"],
        "autoreset_mode": AutoresetMode.SAME_STEP,
    }

    def __init__(
        self,
        num_envs: int = 1,
        rows: int = 6,
        columns: int = 7,
        inarow: int = 4,
        opponent: Any = "random",
        agent_mark: int | Sequence[int | None] | None = None,
        render_mode: str | None = None,
        illegal_action: Literal["lose", "raise"] = "lose",
        copy: bool = True,
        opening_plies: int = 0,
    ) -> None:
        if (
            isinstance(num_envs, bool)
            or not isinstance(num_envs, (int, np.integer))
            or num_envs < 1
        ):
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        check_env_options(render_mode, illegal_action, self.metadata["render_modes"])
        self.num_envs = n = int(num_envs)
        self.geometry = g = Geometry(rows, columns, inarow)
        check_num_envs(n, g)
        self.render_mode, self.illegal_action, self.copy = render_mode, illegal_action, copy
        self.opening_plies = check_opening_plies(opening_plies, g)
        self.single_action_space = spaces.Discrete(g.columns)
        self.single_observation_space = spaces.Box(0, 1, (2, g.rows, g.columns), np.int8)
        self.action_space = batch_space(self.single_action_space, n)
        self.observation_space = batch_space(self.single_observation_space, n)
        self._kernels = _vector_kernels.for_geometry(g.fits_64_bits)
        self._dims = dims_arg(g)
        word = np.int64 if g.fits_64_bits else object
        self._agent = np.zeros(n, dtype=word)  # the agent's stones
        self._mask = np.zeros(n, dtype=word)  # every stone
        self._moves = np.zeros(n, dtype=np.int64)
        self._marks = np.ones(n, dtype=np.int64)  # the agent's mark per board
        self._winner = np.full(n, -1, dtype=np.int64)  # -1 playing, 0 draw, else the mark
        self._ended_by_opening = np.zeros(n, dtype=bool)
        self._observations = np.zeros((n, 2, g.rows, g.columns), dtype=np.int8)
        self._legal = np.zeros((n, g.columns), dtype=np.int8)
        self._mark_setting = self._marks_of(agent_mark)
        self._policies: list[Policy] = []
        self._names: list[str] = []
        self._policy_of = np.zeros(n, dtype=np.int64)
        self._next_policy_of = np.full(n, -1, dtype=np.int64)
        self._policy_of[:] = self._policy_indices(opponent)
        self._all_boards = np.arange(n, dtype=np.int64)
        self._everyone = np.ones(n, dtype=bool)
        self._pending = False  # some board waits for a new opponent at its next game
        self._started = False

    # -- opponents ----------------------------------------------------------------------------
    def _per_board(self, name: str, value: Any, check: Any) -> list[Any]:
        if isinstance(value, (list, tuple, np.ndarray)):
            if len(value) != self.num_envs:
                raise ValueError(f"{name} has {len(value)} entries for {self.num_envs} boards")
            return [check(v) for v in value]
        return [check(value)] * self.num_envs

    def _marks_of(self, agent_mark: Any) -> np.ndarray:
        marks = self._per_board("agent_mark", agent_mark, _check_mark)
        return np.array([0 if m is None else m for m in marks], dtype=np.int64)

    def _policy_indices(self, opponent: Any) -> np.ndarray:
        specs = self._per_board("opponent", opponent, lambda spec: spec)
        made: dict[Any, int] = {}
        indices = np.empty(self.num_envs, dtype=np.int64)
        for i, spec in enumerate(specs):
            key = spec if isinstance(spec, str) else id(spec)  # one policy per distinct spec
            if key not in made:
                policy = make_policy(spec)
                made[key] = len(self._policies)
                self._policies.append(policy)
                self._names.append(spec if isinstance(spec, str) else repr(policy))
            indices[i] = made[key]
        return indices

    def set_opponent(self, opponent: Any, boards: Sequence[int] | np.ndarray | None = None) -> None:
        """Play ``opponent`` (a spec, policy or callable, or one per board of ``boards``) on
        ``boards`` (all by default) from each board's next game; games in progress finish against
        their current opponent."""
        picked = self._all_boards if boards is None else np.asarray(boards, dtype=np.int64)
        if picked.ndim != 1 or ((picked < 0) | (picked >= self.num_envs)).any():
            raise ValueError(f"boards must be indices in [0, {self.num_envs}), got {boards!r}")
        if isinstance(opponent, (list, tuple, np.ndarray)) and len(opponent) != len(picked):
            raise ValueError(f"opponent has {len(opponent)} entries for {len(picked)} boards")
        full = opponent
        if isinstance(opponent, (list, tuple, np.ndarray)):
            full = [None] * self.num_envs
            for i, spec in zip(picked, opponent, strict=True):
                full[i] = spec
            full = [spec if spec is not None else "random" for spec in full]
        indices = self._policy_indices(full)
        self._next_policy_of[picked] = indices[picked]
        self._pending = True
        if not self._started:
            self._apply_pending(self._all_boards)
        self._forget_unused()

    def opponent_names(self) -> list[str]:
        """The opponent spec (or repr) each board plays against now."""
        return [self._names[p] for p in self._policy_of]

    def _apply_pending(self, boards: np.ndarray) -> None:
        if not self._pending:
            return
        pending = boards[self._next_policy_of[boards] >= 0]
        self._policy_of[pending] = self._next_policy_of[pending]
        self._next_policy_of[pending] = -1
        self._pending = bool((self._next_policy_of >= 0).any())

    def _forget_unused(self) -> None:
        used = np.union1d(self._policy_of, self._next_policy_of[self._next_policy_of >= 0])
        if len(used) == len(self._policies):
            return
        remap = np.full(len(self._policies), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        self._policies = [self._policies[p] for p in used]
        self._names = [self._names[p] for p in used]
        self._policy_of = remap[self._policy_of]
        waiting = self._next_policy_of >= 0
        self._next_policy_of[waiting] = remap[self._next_policy_of[waiting]]

    def _opponent_moves(
        self, boards: np.ndarray, opponent_action: np.ndarray, rewards: np.ndarray
    ) -> None:
        """The opponents' replies on ``boards`` (each policy once, for all its boards)."""
        if len(boards) == 0:
            return
        g = self.geometry
        groups = (
            [(0, boards)]
            if len(self._policies) == 1
            else [
                (p, boards[self._policy_of[boards] == p])
                for p in np.unique(self._policy_of[boards])
            ]
        )
        for p, group in groups:
            if type(self._policies[p]) is RandomPolicy:  # the common case, in one kernel call
                self._kernels.random_replies(
                    self._agent, self._mask, self._moves, self._marks, self._winner, rewards,
                    self._observations, self._legal, group, self.np_random.random(len(group)),
                    opponent_action, self._dims,
                )  # fmt: skip
                continue
            batch = BoardBatch(
                g, self._agent[group] ^ self._mask[group], self._mask[group], self._moves[group]
            )
            who = f"opponent {self._names[p]!r}"
            columns = choose_columns(self._policies[p], batch, self.np_random, who)
            self._play(group, columns, False, rewards)
            opponent_action[group] = columns

    # -- episodes -----------------------------------------------------------------------------
    def _reset_boards(self, boards: np.ndarray, opponent_action: np.ndarray) -> None:
        """New games on ``boards``: pending opponents, marks, the opponent's opening moves."""
        self._apply_pending(boards)
        self._kernels.clear_boards(
            self._agent, self._mask, self._moves, self._winner, self._observations, self._legal,
            boards,
        )  # fmt: skip
        opponent_action[boards] = -1
        drawn = self.np_random.integers(1, 3, size=len(boards))
        setting = self._mark_setting[boards]  # 0: drawn at each reset
        self._marks[boards] = np.where(setting == 0, drawn, setting)
        if len(self._policies) == 1:
            self._policies[0].reset()
        else:
            for p in np.unique(self._policy_of[boards]):
                self._policies[p].reset()
        if self.opening_plies:
            self._random_openings(boards)
        # the opponent moves first where the mark to move (1 after an even number of stones) is
        # not the agent's
        second = boards[1 + self._moves[boards] % 2 != self._marks[boards]]
        self._opponent_moves(second, opponent_action, np.zeros(self.num_envs))
        if self.geometry.inarow == 1 or self.geometry.cells == 1:  # openings that end games
            self._ended_by_opening[boards] = False
            self._ended_by_opening[second] = self._winner[second] >= 0

    def _random_openings(self, boards: np.ndarray) -> None:
        """``0..opening_plies`` stones (drawn per board; :func:`~connectx_gym.env.opening_length`)
        in uniformly random open columns that complete no line on the new ``boards``, played
        alternately from mark 1, ply by ply over all boards at once. An opening that runs out of
        such columns stops there, or is drawn again where that would leave the opponent to move."""
        while len(boards):
            stuck = self._random_opening_stones(boards)
            self._kernels.clear_boards(
                self._agent, self._mask, self._moves, self._winner, self._observations,
                self._legal, stuck,
            )  # fmt: skip
            boards = stuck

    def _random_opening_stones(self, boards: np.ndarray) -> np.ndarray:
        """One try of :meth:`_random_openings`; returns the boards to draw again."""
        drawn = self.np_random.integers(0, self.opening_plies + 1, size=len(boards))
        plies = opening_length(drawn, self._marks[boards], self.geometry)
        no_rewards = np.zeros(self.num_envs)  # no opening stone completes a line
        stuck = []
        for ply in range(int(plies.max(initial=0))):
            active = boards[plies > ply]
            by_agent = self._marks[active] == 1 + ply % 2
            columns = np.empty(len(active), dtype=np.int64)
            self._kernels.random_quiet_columns(
                self._agent, self._mask, active, self.np_random.random(len(active)), by_agent,
                self._dims, columns,
            )  # fmt: skip
            ended = columns < 0  # every open column completes a line: the opening stops here
            plies[np.isin(boards, active[ended])] = ply
            stuck.append(active[ended & ~by_agent])  # the opponent would move: draw again
            active, columns, by_agent = active[~ended], columns[~ended], by_agent[~ended]
            self._play(active[by_agent], columns[by_agent], True, no_rewards)
            self._play(active[~by_agent], columns[~by_agent], False, no_rewards)
        return np.concatenate([np.empty(0, dtype=boards.dtype), *stuck])

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new game on every board; ``options`` may set ``"opponent"`` and
        ``"agent_mark"`` (one value, or one per board)."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"seed must be an integer or None, got {seed!r}")
        super().reset(seed=seed)
        options = check_reset_options(options)
        if "agent_mark" in options:
            self._mark_setting = self._marks_of(options["agent_mark"])
        if "opponent" in options:
            self.set_opponent(options["opponent"])
        opponent_action = np.full(self.num_envs, -1, dtype=np.int64)
        self._reset_boards(self._all_boards, opponent_action)
        self._started = True
        return self._output(), self._infos(opponent_action)

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Play each board's column, then its opponent's reply; reset the boards that ended."""
        if not self._started:
            raise RuntimeError("no games in progress: call reset() first")
        columns = self._columns(actions)
        n = self.num_envs
        rewards = np.zeros(n, dtype=np.float64)
        illegal = np.zeros(n, dtype=bool)
        reply = np.zeros(n, dtype=bool)
        count = self._kernels.agent_moves(
            self._agent, self._mask, self._moves, self._marks, self._winner, rewards,
            self._observations, self._legal, self._ended_by_opening, columns, illegal, reply,
            self.illegal_action == "raise", self._dims,
        )  # fmt: skip
        if count and self.illegal_action == "raise":
            raise ValueError(self._illegal_message(np.flatnonzero(illegal), columns))
        opponent_action = np.full(n, -1, dtype=np.int64)
        try:
            self._opponent_moves(np.flatnonzero(reply), opponent_action, rewards)
        except BaseException:
            self._started = False  # the games cannot go on without the opponents' moves
            raise
        terminated = self._winner >= 0
        truncated = np.zeros(n, dtype=bool)
        if not terminated.any():
            return self._output(), rewards, terminated, truncated, self._infos(opponent_action)
        ended = np.flatnonzero(terminated)
        final_info = self._infos(opponent_action)
        final_info["action_mask"] = np.zeros_like(self._legal)  # every column, once it is over
        final_info["winner"] = np.where(terminated, self._winner, 0)
        final_info["_winner"] = terminated
        final_info["illegal_action"] = illegal
        final_info["_illegal_action"] = illegal
        final_obs = np.full(n, None, dtype=object)
        final_obs[ended] = list(self._observations[ended].copy())
        try:
            self._reset_boards(ended, opponent_action)
        except BaseException:
            self._started = False
            raise
        infos = self._infos(opponent_action)
        infos.update(
            final_obs=final_obs, _final_obs=terminated, final_info=final_info,
            _final_info=terminated,
        )  # fmt: skip
        return self._output(), rewards, terminated, truncated, infos

    def _columns(self, actions: Any) -> np.ndarray:
        array = np.asarray(actions)
        if array.dtype == np.int64 and array.shape == (self.num_envs,):
            return np.ascontiguousarray(array)
        if array.dtype.kind not in "iu":
            raise TypeError(
                f"actions must be integer columns, got dtype {array.dtype} ({actions!r:.80})"
            )
        if array.shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), got {array.shape}")
        return array.astype(np.int64)

    def _illegal_message(self, boards: np.ndarray, columns: np.ndarray) -> str:
        parts = [
            f"board {i}: column {columns[i]} (legal: {np.flatnonzero(self._legal[i]).tolist()})"
            for i in boards[:5]
        ]
        more = f" and {len(boards) - 5} more" if len(boards) > 5 else ""
        return "illegal action: " + "; ".join(parts) + more

    def _play(
        self, boards: np.ndarray, columns: np.ndarray, by_agent: bool, rewards: np.ndarray
    ) -> None:
        self._kernels.play_columns(
            self._agent, self._mask, self._moves, self._marks, self._winner, rewards,
            self._observations, self._legal, boards, columns, by_agent, self._dims,
        )  # fmt: skip

    def _output(self) -> np.ndarray:
        return self._observations.copy() if self.copy else self._observations

    def _infos(self, opponent_action: np.ndarray) -> dict[str, Any]:
        return {
            "action_mask": self._legal.copy(),
            "_action_mask": self._everyone.copy(),
            "agent_mark": self._marks.copy(),
            "_agent_mark": self._everyone.copy(),
            "opponent_action": opponent_action.copy(),
            "_opponent_action": opponent_action >= 0,
        }

    # -- views --------------------------------------------------------------------------------
    def action_masks(self) -> np.ndarray:
        """``(N, columns)`` bool: the legal columns of every board (sb3-contrib's convention)."""
        return self._legal.astype(bool)

    def board(self, index: int) -> Board:
        """Board ``index`` as an immutable :class:`~connectx_gym.Board` (mover's view)."""
        i = int(index)
        agent_to_move = (self._moves[i] % 2 == 0) == (self._marks[i] == 1)
        agent, mask = int(self._agent[i]), int(self._mask[i])
        current = agent if agent_to_move else agent ^ mask
        return Board(self.geometry, current, mask, int(self._moves[i]))

    def render(self) -> tuple[Any, ...] | None:
        """One drawing per board in ``render_mode`` (``"ansi"`` text or ``"rgb_array"``)."""
        if self.render_mode is None:
            return None
        grids = self._observations[:, 0] * self._marks[:, None, None]
        grids = grids + self._observations[:, 1] * (3 - self._marks)[:, None, None]
        if self.render_mode == "rgb_array":
            return tuple(board_to_rgb(grid.astype(np.int8)) for grid in grids)
        return tuple(
            board_to_ansi(grid.astype(np.int8), f"board {i}: agent plays mark {self._marks[i]}")
            for i, grid in enumerate(grids)
        )


def board_bytes(geometry: Geometry) -> int:
    """A generous estimate of the memory one board of the batch takes: its arrays, the copies a
    step returns, its infos and its share of the per-board lists."""
    return 4 * geometry.cells + 2 * geometry.columns + 512


def max_num_envs(geometry: Geometry) -> int | None:
    """The most boards of ``geometry`` a batch may hold: those that fit in
    :data:`~connectx_gym.memory.MEMORY_SHARE` of the available memory (None where it is
    unknown)."""
    available = available_memory()
    if available is None:
        return None
    return max(1, int(available * MEMORY_SHARE) // board_bytes(geometry))


def check_num_envs(num_envs: int, geometry: Geometry) -> None:
    """Refuse, before anything is allocated, a batch that would not fit in memory (one line
    naming the cap)."""
    cap = max_num_envs(geometry)
    if cap is not None and num_envs > cap:
        need = format_bytes(num_envs * board_bytes(geometry))
        share = f"{MEMORY_SHARE:.0%} of the {format_bytes(available_memory() or 0)} available"
        raise ValueError(
            f"num_envs={num_envs} boards of {geometry.rows}x{geometry.columns} need about {need}: "
            f"more than the {cap} boards (max_num_envs) that fit in {share} memory"
        )


def _check_mark(mark: Any) -> int | None:
    return player_mark(mark, "agent_mark", allow_none=True)
