"""The rollouts' boards cut into env slices, run as Ray actors (``connectx train --ray``) or in this
process: :class:`SlicedVecEnv`, made by :func:`train_env`.

``--env-slices K`` cuts the run's ``--n-envs`` boards into K slices of consecutive boards (sizes
differing by one at most). Slice k is a :class:`~connectx_train.opponents.BatchedOpponentSlots`
of its boards (:class:`connectx_train.env_slices.EnvSlice`), seeded with the run's env seed plus
the index of its first board (SB3's convention of one seed per board), so the partition decides
the games, not the cluster: the same seed and the same K play the same games, and train the same
weights, with and without ``--ray`` and on any cluster. With ``--ray`` each slice is a Ray actor
holding its boards and their opponents (spread over the cluster's nodes, each with an equal share
of its CPUs), and the learner stays in this process: every step sends each actor its boards'
actions, with the opponents queued for them since the last call, and gathers the answers
(observations, rewards, ends of games and the next action masks, so that MaskablePPO's request
for the masks costs no call). One slice without ``--ray`` is the plain batched env.

Faults (Ray): every wait is bounded (:data:`START_SECONDS`, :data:`STEP_SECONDS`,
:data:`RESTART_SECONDS`), so a lost node never hangs the run. A slice whose actor is lost (its
worker or node gone, or a step past its bound) is restarted (Ray's ``max_restarts``, at most
:data:`MAX_RESTARTS` times a slice), given its boards' opponents again, and its games restart
from a seed drawn for the restart; the step in flight on its boards is recorded as the cut end
(truncated) of those games and a warning says how many steps were dropped. A slice that cannot
be restarted raises :class:`RolloutsLostError`, on which the trainer saves a checkpoint and stops
(``--resume`` goes on).
"""

from __future__ import annotations

import contextlib
import logging
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecMonitor
from stable_baselines3.common.vec_env.base_vec_env import (
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

from connectx_train.config import TrainConfig
from connectx_train.env_slices import (
    LocalSlices,
    Queued,
    RaySlices,
    SliceLostError,
    SliceReset,
    SliceStep,
    slice_bounds,
)
from connectx_train.opponents import make_vec_env
from connectx_train.run_setup import EXIT_TIME_LIMIT, RunInterruptedError

__all__ = [
    "MAX_RESTARTS",
    "RESTART_SECONDS",
    "START_SECONDS",
    "STEP_SECONDS",
    "RolloutsLostError",
    "SlicedVecEnv",
    "restart_seed",
    "run_ray",
    "train_env",
]

_log = logging.getLogger(__name__)

#: restarts of one slice's actor before the run stops (Ray's ``max_restarts``)
MAX_RESTARTS = 3
#: seconds the actors have for their start and first reset (imports on a loaded node)
START_SECONDS = 300.0
#: seconds one step of a slice may take before its actor counts as lost
STEP_SECONDS = 900.0
#: seconds a restarted actor has to answer (a CPU for it somewhere in the cluster)
RESTART_SECONDS = 120.0
#: seconds between two calls to an actor that Ray calls unavailable (not yet seen lost)
RETRY_SECONDS = 0.5


class RolloutsLostError(RuntimeError):
    """A slice's actor could not be restarted: the rollouts cannot go on (one line)."""

    def stopped(self, out: Path, steps: int) -> RunInterruptedError:
        """How the run stops, its checkpoint at ``steps`` saved in ``out``: ``--resume`` goes on
        (exit status 75, EX_TEMPFAIL: run it again)."""
        return RunInterruptedError(
            out,
            steps,
            f"rollouts stopped at step {steps}: {self}; checkpoint saved in {out}; continue "
            f"with: connectx train --resume --out {out}",
            exit_status=EXIT_TIME_LIMIT,
        )


def restart_seed(seed: int, slice_index: int, restart: int) -> int:
    """The seed of slice ``slice_index``'s games after its ``restart``-th restart."""
    return int(np.random.SeedSequence((seed, slice_index, restart)).generate_state(1)[0])


class SlicedVecEnv(VecEnv):
    """The run's ``config.n_envs`` boards in ``config.env_slices`` slices (module docstring):
    in this process, or with ``address`` as Ray actors on that cluster (``"local"``: an instance
    started on this machine). It answers the calls the trainer makes of
    :class:`~connectx_train.opponents.BatchedOpponentSlots` (``queue_opponent``, ``timing``,
    ``action_masks`` by ``env_method``); ``seed(s)`` gives slice k the seed ``s + start_k`` at
    the next reset. :attr:`cluster` names the cluster (None in this process)."""

    def __init__(self, config: TrainConfig, address: str | None = None) -> None:
        self.config = config
        self.bounds = slice_bounds(config.n_envs, config.env_slices)
        self.slices: LocalSlices | RaySlices = (
            RaySlices(config, self.bounds, address, MAX_RESTARTS)
            if address
            else LocalSlices(config, self.bounds)
        )
        self.cluster = self.slices.cluster
        n, count = config.n_envs, len(self.bounds)
        sizes = [stop - start for start, stop in self.bounds]
        self._slice_of = np.repeat(np.arange(count), sizes)
        self._board_in_slice = np.arange(n) - np.repeat([start for start, _ in self.bounds], sizes)
        self._queued: list[Queued] = [[] for _ in self.bounds]
        self._assigned: list[dict[int, tuple[str, Any]]] = [{} for _ in self.bounds]
        self._restarts = [0] * count
        self._handles: list[Any] | None = None
        self._started = False
        self._moves = np.zeros(n, dtype=np.int64)  # agent moves of each board's current game
        self._observations: np.ndarray | None = None
        self._masks: np.ndarray | None = None
        #: steps in flight dropped with lost actors, and moves of the games they cut
        self.dropped_steps = self.cut_moves = 0
        self.lost_reason = ""  # the last restart, for its warning
        rows, columns = config.rows, config.columns
        observation_space = spaces.Box(0, 1, (2, rows, columns), np.int8)
        super().__init__(n, observation_space, spaces.Discrete(columns))

    # --- the calls of every step --------------------------------------------------------------

    def reset(self) -> VecEnvObs:
        handles = [
            self.slices.submit(k, "reset", self._seeds[start], self._options[start] or None,
                               self._take_queued(k))
            for k, (start, _) in enumerate(self.bounds)
        ]  # fmt: skip
        seconds = RESTART_SECONDS if self._started else START_SECONDS
        answers: list[SliceReset] = []
        for k, handle in enumerate(handles):
            try:
                answers.append(self.slices.result(k, handle, seconds))
            except SliceLostError as lost:
                answers.append(self._restart(k, lost))
                _log.warning("%s", self.lost_reason)
        self._started = True
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [info for answer in answers for info in answer.infos]
        self._masks = np.concatenate([answer.masks for answer in answers])
        self._observations = np.concatenate([answer.observations for answer in answers])
        self._moves[:] = 0
        return self._observations

    def step_async(self, actions: np.ndarray) -> None:
        actions = np.asarray(actions)
        self._handles = [
            self.slices.submit(k, "step", actions[start:stop], self._take_queued(k))
            for k, (start, stop) in enumerate(self.bounds)
        ]

    def step_wait(self) -> VecEnvStepReturn:
        if self._handles is None:
            raise RuntimeError("step_wait() called without step_async()")
        handles, self._handles = self._handles, None
        answers = []
        for k, handle in enumerate(handles):
            try:
                answers.append(self.slices.result(k, handle, STEP_SECONDS))
            except SliceLostError as lost:
                answers.append(self._cut(k, self._restart(k, lost)))
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for (start, _), answer in zip(self.bounds, answers, strict=True):
            for board, info in answer.ended:
                infos[start + board] = info
        dones = np.concatenate([answer.dones for answer in answers])
        self._moves += 1
        self._moves[dones] = 0
        self._masks = np.concatenate([answer.masks for answer in answers])
        self._observations = np.concatenate([answer.observations for answer in answers])
        rewards = np.concatenate([answer.rewards for answer in answers])
        return self._observations, rewards, dones, infos

    def action_masks(self) -> np.ndarray:
        """``(num_envs, columns)`` bool: the legal columns of every board (from the last answer)."""
        if self._masks is None:
            raise RuntimeError("action_masks() called before reset()")
        return self._masks

    def _take_queued(self, index: int) -> Queued:
        queued, self._queued[index] = self._queued[index], []
        return queued

    # --- faults -------------------------------------------------------------------------------

    def _restart(self, index: int, lost: SliceLostError) -> SliceReset:
        """Slice ``index``'s actor restarted, its opponents handed over again and its games
        restarted; :class:`RolloutsLostError` when that cannot be done: its restarts spent, or
        no answer within :data:`RESTART_SECONDS` (while Ray has not seen the loss, it calls the
        actor unavailable: asked again every :data:`RETRY_SECONDS`)."""
        start, stop = self.bounds[index]
        what = f"env slice {index} (boards {start}-{stop - 1}) lost its Ray actor ({lost.reason})"
        self._restarts[index] += 1
        if self._restarts[index] > MAX_RESTARTS:
            raise RolloutsLostError(f"{what}, its {MAX_RESTARTS} restarts spent")
        self.slices.revive(index, lost.hung)
        seed = restart_seed(self.config.seed, index, self._restarts[index])
        assigned = self._assigned[index]
        queued = [(board, *assigned[board]) for board in sorted(assigned)]
        deadline = time.monotonic() + RESTART_SECONDS
        while True:
            handle = self.slices.submit(index, "reset", seed, None, queued)
            try:
                answer: SliceReset = self.slices.result(
                    index, handle, max(deadline - time.monotonic(), RETRY_SECONDS)
                )
                break
            except SliceLostError as again:
                if again.dead or time.monotonic() > deadline:
                    raise RolloutsLostError(
                        f"{what} and it did not come back within {RESTART_SECONDS:g} s "
                        f"({again.reason})"
                    ) from None
            time.sleep(RETRY_SECONDS)
        self.lost_reason = (
            f"{what}; actor restarted ({self._restarts[index]} of {MAX_RESTARTS}), its "
            f"{stop - start} games restarted"
        )
        return answer

    def _cut(self, index: int, restarted: SliceReset) -> SliceStep:
        """The step of slice ``index`` lost with its actor, as the cut end of its games: each
        board's last observation as a truncated game's last (its value bootstraps the return),
        reward 0, then the first observations of its restarted games."""
        start, stop = self.bounds[index]
        boards = stop - start
        if self._observations is None:
            raise RuntimeError("a step before the first reset")
        cut_moves = int(self._moves[start:stop].sum())
        self.dropped_steps += boards
        self.cut_moves += cut_moves
        _log.warning(
            "%s: the %d steps in flight dropped (recorded as the truncated ends of its games, "
            "after %d earlier moves)", self.lost_reason, boards, cut_moves,
        )  # fmt: skip
        ended = [
            (board, {"terminal_observation": self._observations[start + board],
                     "TimeLimit.truncated": True})
            for board in range(boards)
        ]  # fmt: skip
        return SliceStep(
            restarted.observations,
            np.zeros(boards, dtype=np.float32),
            np.ones(boards, dtype=bool),
            ended,
            restarted.masks,
        )

    # --- VecEnv's other calls -----------------------------------------------------------------

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        picked = list(self._get_indices(indices))
        if method_name == "action_masks":
            return list(self.action_masks()[picked])
        if method_name == "queue_opponent":
            for board in picked:
                index, in_slice = int(self._slice_of[board]), int(self._board_in_slice[board])
                self._queued[index].append((in_slice, *method_args))
                self._assigned[index][in_slice] = (method_args[0], method_args[1])
            return [None] * len(picked)
        results: list[Any] = [None] * len(picked)
        by_slice: dict[int, list[int]] = {}
        for position, board in enumerate(picked):
            by_slice.setdefault(int(self._slice_of[board]), []).append(position)
        args = (method_name, method_args, method_kwargs)
        handles = {
            k: self.slices.submit(
                k, "env_method", *args, [int(self._board_in_slice[picked[p]]) for p in positions]
            )
            for k, positions in by_slice.items()
        }
        for k, positions in by_slice.items():
            try:
                answers = self.slices.result(k, handles[k], STEP_SECONDS)
            except SliceLostError:
                if method_name != "timing":
                    raise
                answers = [{"env_seconds": 0.0, "opponents": {}}] * len(positions)
            for position, answer in zip(positions, answers, strict=True):
                results[position] = answer
        if method_name == "timing" and self.cluster and results:
            results[0] = {**results[0], "cluster": self.cluster}
        return results

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        picked = list(self._get_indices(indices))
        if attr_name == "render_mode":  # asked by VecEnv.__init__; the slices render nothing
            return [None] * len(picked)
        if attr_name == "action_masks":
            return [self.action_masks] * len(picked)
        values = {
            k: self.slices.result(k, self.slices.submit(k, "get_attr", attr_name), STEP_SECONDS)
            for k in {int(self._slice_of[board]) for board in picked}
        }
        return [values[int(self._slice_of[board])] for board in picked]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        if len(list(self._get_indices(indices))) != self.num_envs:
            raise ValueError("attributes of the batched env are shared by every board")
        handles = [
            self.slices.submit(k, "set_attr", attr_name, value) for k in range(len(self.bounds))
        ]
        for k, handle in enumerate(handles):
            self.slices.result(k, handle, STEP_SECONDS)

    def env_is_wrapped(self, wrapper_class: type[Any], indices: VecEnvIndices = None) -> list[bool]:
        return [False] * len(list(self._get_indices(indices)))

    def close(self) -> None:
        self.slices.close()


def run_ray(config: TrainConfig) -> AbstractContextManager[None]:
    """The block in which a run labels and makes its envs: with ``--ray`` and the rollouts on Ray
    (vec env ``batched``), the Ray instance the labelling starts is kept for the env slices'
    actors, and stopped once, when the envs close (:func:`connectx_baselines.teacher_ray.
    one_ray_start`); otherwise nothing (a labelling alone stops Ray as soon as it is done)."""
    if not (config.ray and config.vec_env == "batched"):
        return contextlib.nullcontext()
    from connectx_baselines.teacher_ray import one_ray_start

    return one_ray_start()


def train_env(config: TrainConfig) -> VecEnv:
    """The envs of a run: with ``--ray`` (vec env ``batched``) or more than one env slice a
    :class:`SlicedVecEnv` (on Ray: the cluster named in a log line), else
    :func:`~connectx_train.opponents.make_vec_env`'s."""
    sliced = config.vec_env == "batched" and (config.ray or config.env_slices > 1)
    if not sliced:
        return make_vec_env(config)
    env = SlicedVecEnv(config, config.ray or None)
    if env.cluster:
        _log.info("rollouts: %s", env.cluster)
    return VecMonitor(env)
