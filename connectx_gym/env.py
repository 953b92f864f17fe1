"""``ConnectX-v0``: ConnectX against an opponent that moves inside ``step()``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from connectx_gym._jit import jit
from connectx_gym.bitboard import Board, Geometry, has_line
from connectx_gym.numeric import player_mark
from connectx_gym.policy import Policy, Struct, validate_answer
from connectx_gym.registry import make_policy
from connectx_gym.render import board_to_ansi, board_to_rgb

__all__ = ["NO_OPPONENT_ACTION", "ConnectXEnv"]

#: ``info["opponent_action"]`` when the opponent did not move (as in the batched env).
NO_OPPONENT_ACTION = -1

OpponentSpec = str | Policy | Callable[..., Any]


def check_reset_options(options: Any) -> dict[str, Any]:
    """``reset``'s ``options`` as a dict (``{}`` for ``None``); ``ValueError`` for keys other
    than ``opponent`` and ``agent_mark`` (shared by ``ConnectX-v0`` and the batched env)."""
    checked: dict[str, Any] = options or {}
    unknown = set(checked) - {"opponent", "agent_mark"}
    if unknown:
        raise ValueError(f"unknown reset options {sorted(unknown)}; known: opponent, agent_mark")
    return checked


def check_env_options(
    render_mode: str | None, illegal_action: str, render_modes: Sequence[str]
) -> None:
    """``ValueError`` for a ``render_mode`` or ``illegal_action`` that the envs do not know (shared
    by ``ConnectX-v0`` and the batched env)."""
    if render_mode is not None and render_mode not in render_modes:
        raise ValueError(
            f"render_mode must be one of {list(render_modes)} or None, got {render_mode!r}"
        )
    if illegal_action not in ("lose", "raise"):
        raise ValueError(f"illegal_action must be 'lose' or 'raise', got {illegal_action!r}")


def quiet_opening_plies(geometry: Geometry) -> int:
    """The longest random opening in which no stone, nor the opponent's reply after it, can
    complete a line: ``2 * inarow - 3`` stones (with the reply, nobody has ``inarow``), at most
    ``cells - 2``. Longer openings play only stones that complete no line and end with the agent to
    move (:func:`opening_length`)."""
    return max(0, min(2 * geometry.inarow - 3, geometry.cells - 2))


def most_opening_plies(geometry: Geometry) -> int:
    """The longest random opening a board takes: ``cells - 2`` stones (the agent has a move left
    and the game is not decided by a full board), none with ``inarow=1`` (every stone wins)."""
    return 0 if geometry.inarow == 1 else max(0, geometry.cells - 2)


def opening_length(drawn: Any, agent_mark: Any, geometry: Geometry) -> Any:
    """The stones of random openings of ``drawn`` stones for agents of ``agent_mark`` (ints or
    arrays): ``drawn``, one fewer where ``drawn`` passes :func:`quiet_opening_plies` and would
    leave the opponent to move, so that a long opening, whose stones may leave wins in one, never
    hands the opponent its first move (mark 1 moves after an even number of stones)."""
    longer = (drawn > quiet_opening_plies(geometry)) & (1 + drawn % 2 != agent_mark)
    return drawn - longer


def quiet_random_column(board: Board, rng: np.random.Generator) -> int:
    """A uniformly random open column of ``board`` where the mover's stone completes no line (-1
    if every open one does): an opening's stone, from one ``rng.random()`` draw as
    :class:`~connectx_gym.policy.RandomPolicy`, whose column it is where no column wins."""
    quiet = [c for c in board.open_columns() if not board.is_winning_move(c)]
    chosen = int(rng.random() * len(quiet))
    return quiet[chosen] if quiet else -1


def random_opening(
    geometry: Geometry, opening_plies: int, to_move: frozenset[int], rng: np.random.Generator
) -> list[int]:
    """The columns of a random opening of 0 to ``opening_plies`` stones for a game whose player
    to move after it must be in ``to_move`` (marks): the length drawn uniformly
    (:func:`opening_length`; either mark will do where ``to_move`` holds both), each stone in a
    :func:`quiet_random_column`, from mark 1. An opening that runs out of such columns stops
    there, or is drawn again where that would leave a mark outside ``to_move`` to move.
    ``ConnectX-v0`` and the RLlib env play these; the batched env draws the same way over many
    boards at once (``_vector_kernels.random_quiet_columns``)."""
    while True:
        drawn = int(rng.integers(0, opening_plies + 1))
        mover = min(to_move) if len(to_move) == 1 else 1 + drawn % 2
        board, columns = Board.empty(*geometry.key), []
        for _ in range(opening_length(drawn, mover, geometry)):
            column = quiet_random_column(board, rng)
            if column < 0:  # every open column completes a line: the opening stops here
                break
            board = board.play(column)
            columns.append(column)
        else:
            return columns
        if board.mark in to_move:
            return columns


def check_opening_plies(plies: Any, geometry: Geometry) -> int:
    """``plies`` as an int, or ``ValueError`` unless it is a whole number from 0 to
    :func:`most_opening_plies` (shared by ``ConnectX-v0``, the batched env and training)."""
    most = most_opening_plies(geometry)
    if isinstance(plies, bool) or not isinstance(plies, (int, np.integer)) or plies < 0:
        raise ValueError(f"opening_plies must be a whole number >= 0, got {plies!r}")
    if plies > most:
        raise ValueError(
            f"opening_plies must be at most {most} on a {geometry.rows}x{geometry.columns} board "
            f"with inarow={geometry.inarow} (random stones that complete no line and leave the "
            f"agent a move), got {plies}"
        )
    return int(plies)


class ConnectXEnv(gym.Env[np.ndarray, np.int64]):
    """ConnectX (Connect Four on any board) for one agent, against an opponent inside ``step()``.

    ## Description
    Two players drop discs into the columns of a ``rows`` x ``columns`` board; a disc falls to the
    lowest empty cell. The first to line up ``inarow`` discs horizontally, vertically or diagonally
    wins; a full board without a line is a draw (a move that fills the board and makes a line wins).
    Mark 1 moves first, as on Kaggle. The agent plays one mark, the opponent the other: each
    ``step`` plays the agent's move and then, unless the game is over, the opponent's reply.

    ## Action Space
    ``Discrete(columns)``: the column to drop a disc in. A full column is illegal: see
    ``illegal_action``. The legal columns are ``info["action_mask"]`` (``int8``, Gymnasium's
    convention) and ``env.unwrapped.action_masks()`` (``bool``, for sb3-contrib's MaskablePPO, which
    finds it by itself through ``DummyVecEnv`` and ``SubprocVecEnv``). Both describe the state just
    returned; once the game is over every column is masked.

    ## Observation Space
    ``Box(0, 1, (2, rows, columns), int8)`` from the agent's point of view: plane 0 holds the
    agent's discs, plane 1 the opponent's; row 0 is the top row, as Kaggle draws it. Works as is
    with SB3's ``MlpPolicy`` (flattened) and with a CNN (channels first). Kaggle's own view of the
    same state is ``env.unwrapped.kaggle_observation()``.

    ## Starting State
    An empty board (with ``opening_plies=K``: 0 to ``K`` random stones, see Arguments). If the
    opponent is to move first (``agent_mark=2`` on an empty board), its move is already on the
    board in the observation ``reset`` returns.

    ## Rewards
    +1 when the agent wins, -1 when it loses (or plays an illegal move with
    ``illegal_action="lose"``), 0 otherwise (draws included).

    ## Episode End
    ``terminated`` is True on a win, a loss, a draw or an illegal move (``illegal_action="lose"``).
    ``truncated`` is always False: a game lasts at most ``rows * columns`` plies. Calling ``step``
    after the episode ended raises ``RuntimeError`` until ``reset``. If the opponent's opening
    move ends the game (only possible with ``inarow=1`` or a one-cell board), ``reset`` returns
    an all-zero mask and the next ``step``, whatever its action, plays nothing and reports the
    end (reward -1, or 0 for a draw, ``terminated`` True).

    ## Information
    ``info`` holds ``action_mask`` (``int8``), ``agent_mark`` (1 or 2), ``opponent_action`` (the
    opponent's column in this step or the reset, -1 when it did not move); when the episode ends,
    ``winner`` (mark, or 0 for a draw) and, for an illegal move, ``illegal_action`` (True). Each
    key holds values of one type in every episode (``int`` for the numbers), so that Gymnasium's
    own vector envs (``gym.make_vec``) can stack them.

    ## Arguments
    - ``rows=6, columns=7, inarow=4``: the board, any whole numbers >= 1 up to 1024, with at most
      4096 cells (``connectx_gym.bitboard.MAX_SIDE``, ``MAX_CELLS``).
    - ``opponent="random"``: a registered policy spec (``"minimax:depth=4"``; see
      ``connectx_gym.list_policies()``), a path to a saved agent, a ``Policy`` object, or a
      Kaggle-style callable ``agent(obs, config)``. Change it between episodes with
      ``set_opponent(spec)`` or ``reset(options={"opponent": spec})``. An opponent that answers an
      illegal column raises ``connectx_gym.IllegalMoveError``.
    - ``agent_mark=None``: 1 (the agent moves first), 2 (second), or None (drawn at each reset
      from the env's generator); per episode: ``reset(options={"agent_mark": m})``.
    - ``render_mode=None``: ``"ansi"`` (text), ``"rgb_array"`` (numpy image) or ``"human"`` (text
      printed to the terminal).
    - ``illegal_action="lose"``: ``"lose"`` ends the episode with reward -1 and
      ``info["illegal_action"] = True``; ``"raise"`` raises ``ValueError`` naming the column and the
      legal ones.
    - ``opening_plies=0``: each game starts after ``k`` stones in uniformly random open columns,
      ``k`` drawn uniformly from 0 to ``opening_plies`` at each reset, played alternately from
      mark 1 (whichever mark the agent has); then the opponent moves if it is its turn. Training
      against deterministic opponents from the empty board replays a few lines; this varies them.
      Up to ``2 * inarow - 3`` stones (5 on 6x7) no stone can complete a line. Longer openings
      (at most ``cells - 2``: 40 on 6x7) reach the middle and end of games as random play leaves
      them, wins and threats unplayed: their stones go only in columns where they complete no line
      (the opening stops where none is left, and is drawn again if that leaves the opponent to
      move), and they end with the agent to move (one stone fewer where the drawn ``k`` would leave
      the opponent to move), so no opening ends a game or hands the opponent a win before the
      agent moves.

    All randomness (the opponent's, the agent's mark, the random openings) comes from the env's
    generator, seeded by ``reset(seed=...)``: the same seed and actions give the same episodes.

    ## Copies
    ``copy.deepcopy(env)`` and ``pickle`` give a faithful, independent env mid-game: same position,
    opponent state and generator state, so the copy and the original play on identically for the
    same actions (the compiled win check and the numpy views are rebuilt on the copy).

    ## Version History
    - v0: Initial version.
    """

    # declared as gymnasium declares it (an attribute instances may replace)
    metadata: dict[str, Any] = {  # noqa: RUF012
        "render_modes": ["ansi", "rgb_array", "human"],
        "render_fps": 2,
    }

    def __init__(
        self,
        rows: int = 6,
        columns: int = 7,
        inarow: int = 4,
        opponent: OpponentSpec = "random",
        agent_mark: int | None = None,
        render_mode: str | None = None,
        illegal_action: Literal["lose", "raise"] = "lose",
        opening_plies: int = 0,
    ) -> None:
        self.geometry = Geometry(rows, columns, inarow)
        self.opening_plies = check_opening_plies(opening_plies, self.geometry)
        check_env_options(render_mode, illegal_action, self.metadata["render_modes"])
        self.agent_mark_setting = player_mark(agent_mark, "agent_mark", allow_none=True)
        self.render_mode = render_mode
        self.illegal_action = illegal_action
        self.opponent: Policy = make_policy(opponent)
        self.opponent_spec = opponent if isinstance(opponent, str) else repr(self.opponent)
        self._next_opponent: tuple[Policy, str] | None = None

        g = self.geometry
        self._dimensions = (g.rows, g.height, g.inarow, g.size, g.cells)
        self._rows, self._columns = g.rows, g.columns
        self.action_space = spaces.Discrete(g.columns)
        self.observation_space = spaces.Box(0, 1, shape=(2, g.rows, g.columns), dtype=np.int8)
        self._new_game()
        self._done = True
        self._attach()

    def _attach(self) -> None:
        """Build what is derived, not state: the win check (numba-compiled when the board fits in
        64 bits) and the numpy views over the observation and mask bytearrays."""
        g = self.geometry
        self._has_line = jit(has_line) if g.fits_64_bits else has_line
        self._planes = np.frombuffer(self._plane_bytes, dtype=np.int8).reshape(2, g.rows, g.columns)
        self._legal = np.frombuffer(self._legal_bytes, dtype=np.int8)

    # -- copies: copy.deepcopy and pickle give a faithful, independent env ------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for derived in ("_has_line", "_planes", "_legal"):
            state.pop(derived, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._attach()

    # -- episode ------------------------------------------------------------------------------
    def _new_game(self) -> None:
        g = self.geometry
        self._stones = [0, 0]  # [agent's stones, opponent's stones]
        self._mask = 0
        self._moves = 0
        self._heights = [0] * g.columns
        # Observation planes and legal mask live in bytearrays (cheap to write one cell at a
        # time) and are read through numpy views of them.
        self._plane_bytes = bytearray(2 * g.cells)
        self._planes = np.frombuffer(self._plane_bytes, dtype=np.int8).reshape(2, g.rows, g.columns)
        self._legal_bytes = bytearray(b"\x01" * g.columns)
        self._legal = np.frombuffer(self._legal_bytes, dtype=np.int8)
        self.agent_mark = 1
        self._winner: int | None = None
        self._ended_by_opening = False

    def set_opponent(self, opponent: OpponentSpec) -> None:
        """Play against ``opponent`` (a spec, policy or callable) from the next reset on; a game
        in progress is finished against the current opponent."""
        policy = make_policy(opponent)
        self._next_opponent = (policy, opponent if isinstance(opponent, str) else repr(policy))
        if self._done:
            self.opponent, self.opponent_spec = self._next_opponent
            self._next_opponent = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new game; ``options`` may set ``"opponent"`` and ``"agent_mark"``."""
        super().reset(seed=seed)
        options = check_reset_options(options)
        if "opponent" in options:
            self.set_opponent(options["opponent"])
        if self._next_opponent is not None:
            self.opponent, self.opponent_spec = self._next_opponent
            self._next_opponent = None
        mark = options.get("agent_mark", self.agent_mark_setting)
        mark = player_mark(mark, "agent_mark", allow_none=True)
        self._new_game()
        self.agent_mark = int(self.np_random.integers(1, 3)) if mark is None else mark
        self._done = False
        self.opponent.reset()
        if self.opening_plies:
            self._random_opening()
        opponent_action = NO_OPPONENT_ACTION
        if 1 + self._moves % 2 != self.agent_mark:  # mark 1 moves after an even number of stones
            opponent_action = self._opponent_move()
            self._ended_by_opening = self._done
        if self.render_mode == "human":
            self.render()
        return self._planes.copy(), self._info(opponent_action)

    def _random_opening(self) -> None:
        """0 to ``opening_plies`` random stones (:func:`random_opening`), the agent to move after
        a long opening."""
        to_move = frozenset((self.agent_mark,))
        for ply, column in enumerate(
            random_opening(self.geometry, self.opening_plies, to_move, self.np_random)
        ):
            self._play(column, 0 if 1 + ply % 2 == self.agent_mark else 1)  # 0: the agent's stone

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Play the agent's column, then the opponent's reply unless the game is over."""
        if self._done:
            if self._ended_by_opening:
                self._ended_by_opening = False
                reward = -1.0 if self._winner == 3 - self.agent_mark else 0.0
                return self._planes.copy(), reward, True, False, self._info(NO_OPPONENT_ACTION)
            raise RuntimeError("no game in progress (it ended or never started): call reset()")
        column = action if type(action) is int else self._column(action)
        if not (0 <= column < self._columns and self._heights[column] < self._rows):
            return self._illegal(column)
        reward = 0.0
        opponent_action = NO_OPPONENT_ACTION
        if self._play(column, 0):
            reward = 1.0
        elif not self._done:
            opponent_action = self._opponent_move()
            if self._winner == 3 - self.agent_mark:
                reward = -1.0
        info = self._info(opponent_action)
        if self.render_mode == "human":
            self.render()
        return self._planes.copy(), reward, self._done, False, info

    def _column(self, action: Any) -> int:
        if isinstance(action, (int, np.integer)) and not isinstance(action, (bool, np.bool_)):
            column = int(action)
        elif (
            isinstance(action, np.ndarray)
            and action.shape in ((), (1,))
            and action.dtype.kind in "iu"
        ):
            column = int(action.reshape(()))
        else:
            raise TypeError(f"action must be an integer column, got {action!r}")
        return column

    def _illegal(self, column: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        legal = np.flatnonzero(self._legal).tolist()
        if self.illegal_action == "raise":
            raise ValueError(f"illegal action: column {column} is not playable; legal: {legal}")
        self._done = True
        self._winner = 3 - self.agent_mark
        self._legal[:] = 0
        info = self._info(NO_OPPONENT_ACTION)
        info["illegal_action"] = True
        return self._planes.copy(), -1.0, True, False, info

    def _play(self, column: int, player: int) -> bool:
        """Drop a disc of ``player`` (0 agent, 1 opponent); True when it wins. Ends the game when
        it wins or fills the board."""
        rows, bits_per_column, inarow, size, cells = self._dimensions
        height = self._heights[column]
        self._heights[column] = height + 1
        bit = 1 << (column * bits_per_column + height)
        stones = self._stones[player] | bit
        self._stones[player] = stones
        self._mask |= bit
        moves = self._moves = self._moves + 1
        self._plane_bytes[(player * rows + rows - 1 - height) * self._columns + column] = 1
        if height + 1 == rows:
            self._legal_bytes[column] = 0
        # nobody has inarow stones before ply 2 * inarow - 1
        if moves >= 2 * inarow - 1 and self._has_line(stones, bits_per_column, inarow, size):
            self._winner = self.agent_mark if player == 0 else 3 - self.agent_mark
        elif moves == cells:
            self._winner = 0
        else:
            return False
        self._done = True
        self._legal[:] = 0
        return self._winner != 0

    def _opponent_move(self) -> int:
        board = Board(self.geometry, self._stones[1], self._mask, self._moves)
        try:
            answer = self.opponent.act(board, self.np_random)
            if not (
                type(answer) is int
                and 0 <= answer < self._columns
                and self._heights[answer] < self._rows
            ):
                answer = validate_answer(answer, board, f"opponent {self.opponent_spec!r}")
        except BaseException:
            self._done = True  # the game cannot go on without the opponent's move
            raise
        self._play(answer, 1)
        return answer

    def _info(self, opponent_action: int) -> dict[str, Any]:
        info: dict[str, Any] = {
            "action_mask": self._legal.copy(),
            "agent_mark": self.agent_mark,
            "opponent_action": opponent_action,
        }
        if self._done:
            info["winner"] = self._winner
        return info

    # -- views --------------------------------------------------------------------------------
    def action_masks(self) -> np.ndarray:
        """Bool mask of the legal columns in the current state (sb3-contrib's convention)."""
        return self._legal.astype(bool)

    def board(self) -> Board:
        """The current position as an immutable :class:`~connectx_gym.Board` (mover's view)."""
        to_move = 0 if (self._moves % 2 == 0) == (self.agent_mark == 1) else 1
        return Board(self.geometry, self._stones[to_move], self._mask, self._moves)

    def kaggle_observation(self) -> Struct:
        """The agent's observation as kaggle-environments gives it: ``{"board": [...], "mark": m}``.

        ``board`` is flat and row-major, row 0 at the top, 0 empty, 1 and 2 the marks.
        """
        return Struct(board=self._grid().ravel().tolist(), mark=self.agent_mark)

    def _grid(self) -> np.ndarray:
        marks = self._planes[0] * self.agent_mark + self._planes[1] * (3 - self.agent_mark)
        grid: np.ndarray = marks.astype(np.int8)
        return grid

    # gymnasium types render's frame as a type variable of the method alone, which no
    # concrete frame type can override
    def render(self) -> str | np.ndarray | None:  # type: ignore[override]
        """Draw the board as ``render_mode`` says (None when it is None)."""
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode to make()")
            return None
        if self.render_mode == "rgb_array":
            return board_to_rgb(self._grid())
        symbol = "X" if self.agent_mark == 1 else "O"
        status = f"agent plays {symbol} (mark {self.agent_mark})"
        if self._done and self._winner is not None:
            status += ", " + ("draw" if self._winner == 0 else f"mark {self._winner} wins")
        text = board_to_ansi(self._grid(), status)
        if self.render_mode == "human":
            sys.stdout.write(text)
            return None
        return text
