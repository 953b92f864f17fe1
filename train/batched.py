"""The trainer's envs as one batched env (``--vec-env batched``).

:class:`BatchedOpponentSlots` is a :class:`~connectx_train.vec_env.ConnectXVecEnv` (every board in
one :class:`~connectx_gym.vector.ConnectXVectorEnv`, stepped by numba kernels) that answers the
calls the trainer makes of its per-env :class:`~connectx_train.opponents.OpponentSlot`:

- ``env_method("queue_opponent", label, opponent, indices=[i])``: board ``i`` plays ``opponent``
  (a spec or policy), reported as ``label``, from its next game. Calls are gathered and handed to
  the batched env in one ``set_opponent`` at the next step, so boards that queue the same spec (or
  the same policy object: one self-play snapshot) share one policy, answered in one batch call.
- the infos of finished episodes carry ``info["opponent"]``, the label of the opponent played;
- ``env_method("timing")``: seconds in the env and, per label, the opponents' seconds and moves.
  The batch has one clock, so the first index asked gets its totals and the others empty ones:
  summed over indices (:func:`~connectx_train.opponents.collect_timing`) they give the batch's
  timing.

All randomness comes from the batched env's generator, seeded at construction.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from connectx_gym.batch import BoardBatch, choose_columns
from connectx_gym.policy import Policy
from connectx_gym.registry import make_policy
from connectx_train.config import TrainConfig
from connectx_train.timed_policy import TimedPolicy
from connectx_train.vec_env import ConnectXVecEnv

__all__ = ["BatchedOpponentSlots", "TimedBatchPolicy"]


class TimedBatchPolicy(TimedPolicy):
    """A :class:`~connectx_train.timed_policy.TimedPolicy` that answers a whole batch of boards in
    one call (the wrapped policy's batch method, or board by board) and counts one move per
    board."""

    def act_batch(self, batch: BoardBatch, rng: np.random.Generator) -> np.ndarray:
        started = time.perf_counter()
        columns = choose_columns(self.policy, batch, rng, f"opponent {self.label!r}")
        entry = self.ledger.setdefault(self.label, [0.0, 0])
        entry[0] += time.perf_counter() - started
        entry[1] += len(batch)
        return columns


class BatchedOpponentSlots(ConnectXVecEnv):
    """``config.n_envs`` boards of ``config``'s geometry in one batched env, with the per-env
    opponent slots of the trainer (see the module docstring)."""

    def __init__(self, config: TrainConfig) -> None:
        super().__init__(
            num_envs=config.n_envs,
            rows=config.rows,
            columns=config.columns,
            inarow=config.inarow,
            opponent="random",
            opening_plies=config.training_opening_plies(),
        )
        self.labels = ["random"] * self.num_envs  # the label of each board's current opponent
        self._next_labels: list[str | None] = [None] * self.num_envs
        self._queued: dict[int, tuple[str, str | Policy]] = {}
        self._ledger: dict[str, list[float]] = {}
        self._env_seconds = 0.0
        self.seed(config.seed * 1000)

    def queue_opponent(self, label: str, opponent: str | Policy, boards: list[int]) -> None:
        """Play ``opponent``, reported as ``label``, on ``boards`` from each one's next game."""
        for board in boards:
            self._queued[board] = (label, opponent)

    def _hand_over_queued(self) -> None:
        """Give the queued opponents to the batched env: one timed policy per distinct label and
        spec (or policy object), in one ``set_opponent`` call."""
        if not self._queued:
            return
        made: dict[tuple[str, Any], TimedBatchPolicy] = {}
        boards, policies = [], []
        for board, (label, opponent) in sorted(self._queued.items()):
            key = (label, opponent if isinstance(opponent, str) else id(opponent))
            if key not in made:
                made[key] = TimedBatchPolicy(make_policy(opponent), label, self._ledger)
            boards.append(board)
            policies.append(made[key])
            self._next_labels[board] = label
        self._queued.clear()
        self.env.set_opponent(policies, boards=boards)

    def _start_queued(self, boards: np.ndarray) -> None:
        """The queued labels of ``boards``, whose new games started, become current."""
        for board in boards:
            label = self._next_labels[board]
            if label is not None:
                self.labels[board], self._next_labels[board] = label, None

    def reset(self) -> VecEnvObs:
        started = time.perf_counter()
        self._hand_over_queued()
        observations = super().reset()
        self._start_queued(np.arange(self.num_envs))
        self._env_seconds += time.perf_counter() - started
        return observations

    def step_wait(self) -> VecEnvStepReturn:
        started = time.perf_counter()
        self._hand_over_queued()  # from each board's next game, which may start in this step
        observations, rewards, dones, infos = super().step_wait()
        ended = np.flatnonzero(dones)
        for board in ended:
            infos[board]["opponent"] = self.labels[board]
        self._start_queued(ended)
        self._env_seconds += time.perf_counter() - started
        return observations, rewards, dones, infos

    def timing(self) -> dict[str, Any]:
        """Seconds spent in the env (opponents included) and, per opponent label, the opponents'
        seconds and moves."""
        opponents = {label: list(entry) for label, entry in self._ledger.items()}
        return {"env_seconds": self._env_seconds, "opponents": opponents}

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        picked = self._indices(indices)
        if method_name == "queue_opponent":
            self.queue_opponent(*method_args, boards=picked, **method_kwargs)
            return [None] * len(picked)
        if method_name == "timing":
            empty: dict[str, Any] = {"env_seconds": 0.0, "opponents": {}}
            return [self.timing()] + [empty] * (len(picked) - 1) if picked else []
        return super().env_method(method_name, *method_args, indices=indices, **method_kwargs)
