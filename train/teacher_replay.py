"""Teacher replay: supervised minibatches of teacher positions after each PPO rollout."""

from __future__ import annotations

import copy
from typing import Any

import torch
from stable_baselines3.common.callbacks import BaseCallback

from connectx_train.teacher import TEACHER_BATCH, TeacherTensors, batch_losses

__all__ = ["TeacherReplayCallback"]


class TeacherReplayCallback(BaseCallback):
    """After each rollout, ``batches`` supervised minibatches of teacher positions (their own
    Adam, at PPO's current learning rate), so PPO's updates do not wash out what was taught.

    :meth:`state_dict` is what a checkpoint keeps of it (``connectx_train.resume_extras``): Adam's
    moments and where the index generator stands, so that a resumed run goes on with them rather
    than with a fresh Adam, whose first steps move every weight by about the learning rate at
    once."""

    def __init__(self, data: TeacherTensors, batches: int, seed: int) -> None:
        super().__init__()
        self.data, self.batches = data, batches
        self.generator = torch.Generator().manual_seed(seed)
        self.optimizer: torch.optim.Optimizer | None = None
        self._saved_optimizer: dict[str, Any] | None = None  # loaded once the optimizer exists

    def state_dict(self) -> dict[str, Any]:
        """The generator's state and the optimizer's (``None`` before the first replay)."""
        optimizer = self._saved_optimizer if self.optimizer is None else self.optimizer.state_dict()
        return {"generator": self.generator.get_state(), "optimizer": optimizer}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Go on from :meth:`state_dict`'s ``saved`` (before the first rollout ends; a copy is
        kept, since an optimizer's state dict holds its live tensors)."""
        optimizer = copy.deepcopy(saved["optimizer"])  # both read before either is set
        self.generator.set_state(saved["generator"])
        self._saved_optimizer = optimizer

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        policy = self.model.policy
        self.data = self.data.to(policy.device)  # once: the positions stay there
        if self.optimizer is None:
            self.optimizer = torch.optim.Adam(policy.parameters())
            if self._saved_optimizer is not None:
                self.optimizer.load_state_dict(self._saved_optimizer)
        for group in self.optimizer.param_groups:
            group["lr"] = policy.optimizer.param_groups[0]["lr"]
        policy.set_training_mode(True)
        total = 0.0
        for _ in range(self.batches):
            index = torch.randint(len(self.data), (TEACHER_BATCH,), generator=self.generator)
            mirror = bool(torch.rand(1, generator=self.generator) < 0.5)
            actor, critic = batch_losses(policy, self.data, index, mirror)
            self.optimizer.zero_grad()
            (actor + 0.5 * critic).backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            self.optimizer.step()
            total += actor.item()
        policy.set_training_mode(False)
        self.logger.record("teacher/actor_loss", total / max(self.batches, 1))
